"""Install the JupyterLab settings a learner starts with into an environment.

    python tools/lab_settings.py [--prefix PREFIX]

JupyterLab reads `PREFIX/share/jupyter/lab/settings/overrides.json` as the defaults of every user of
the environment at PREFIX (default: this interpreter's sys.prefix). The project's
`jupyter/overrides.json` turns off what gets in a learner's way on first start: the "Would you like
to get notified about official Jupyter news?" prompt (and the news fetch behind it) and the update
check, which also contacts a website. Settings already in the file are kept; ours are merged in.
`make lab`, `make test` and Binder's postBuild run this.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROJECT_SETTINGS = Path(__file__).resolve().parents[1] / "jupyter" / "overrides.json"


def overrides_path(prefix: Path) -> Path:
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def install(prefix: Path) -> Path:
    path = overrides_path(prefix)
    current = json.loads(path.read_text()) if path.exists() else {}
    for plugin, values in json.loads(PROJECT_SETTINGS.read_text()).items():
        current.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, default=Path(sys.prefix))
    args = parser.parse_args(argv)
    print(f"JupyterLab settings installed in {install(args.prefix)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
