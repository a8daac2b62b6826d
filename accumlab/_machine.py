"""What this machine offers: how much memory this process may use. Validation (`_validate`) and
the launcher size their limits from it."""

from __future__ import annotations

import os
from functools import cache


@cache  # fixed for the life of the process; read once (it is asked on every al.run)
def memory_limit() -> int:
    """Bytes this process can use at most: physical memory, or less when a container (cgroup) or
    an address-space limit (ulimit -v) says so."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX: assume a small laptop
        limits.append(8 << 30)
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" or a huge number: no limit
            limits.append(int(text))
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1):
            limits.append(soft)
    except (ImportError, ValueError, OSError):
        pass
    return min(limits)


def human_bytes(n: float) -> str:
    unit = 0
    while n >= 1024 and unit < 5:
        n, unit = n / 1024, unit + 1
    return f"{n:.3g} {('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB')[unit]}"
