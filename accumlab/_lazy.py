"""Lazy names for packages: `import accumlab` stays cheap, and a topic or a name is imported the
first time a lesson touches it (`al.run`, `al.batchnorm.gradient_mismatch`)."""

from __future__ import annotations

import importlib
import sys


def lazy_names(package: str, names: dict[str, str], subpackages: tuple[str, ...] = ()):
    """Module-level `__getattr__`, `__dir__` and `__all__` for `package`.

    `names` maps a public name to the submodule defining it, relative to `package` ("engine", or
    "report:format_summary" where the public name differs from the one in the module); each
    `subpackages` entry is a folder imported on first use.
    """

    def __getattr__(name: str):
        if name in names:
            where, _, attr = names[name].partition(":")
            value = getattr(importlib.import_module(f"{package}.{where}"), attr or name)
        elif name in subpackages:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    public = sorted({*names, *subpackages})

    def __dir__() -> list[str]:
        return sorted({*public, *sys.modules[package].__dict__})

    return __getattr__, __dir__, public
