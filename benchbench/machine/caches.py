"""CPU cache sizes as the OS reports them: the one reader of sysfs (and lscpu) for caches.

    read_os_caches()      # (OsCache(1, "Data", 32768), OsCache(2, "Unified", ...), ...)
    cpu_cache_sizes()     # {"L1d": 32768, "L2": 1048576, "L3": 37486592}

The probe stores :func:`read_os_caches` in the hardware profile; the cold-cache flusher
sizes its buffer from :func:`cpu_cache_sizes`; plots mark those sizes on the x-axis.
Sizes are per instance (per core for L1 and L2), as sysfs gives them for cpu0.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from benchbench.machine.hardware import OsCache

#: Where Linux describes cpu0's caches, one ``index<N>`` folder per cache.
SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")

_SIZE_RE = re.compile(r"^\s*([0-9.]+)\s*([KMG]?)(i?B)?\s*$", re.IGNORECASE)
_LSCPU_RE = re.compile(r"^L(\d)([di]?) cache:\s*([0-9.]+\s*[KMG]?i?B?)\s*(?:\((\d+) instance)?")


def parse_size(text: str) -> int | None:
    """Bytes in a cache size as sysfs (``32K``) or lscpu (``35.8 MiB``) writes it, else None."""
    match = _SIZE_RE.match(text)
    if not match:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return round(float(match.group(1)) * scale)


def sysfs_caches(sysfs_dir: Path = SYSFS_CACHE) -> tuple[OsCache, ...]:
    """Data and unified caches of cpu0 from sysfs, by level; () where sysfs has none."""
    found: list[OsCache] = []
    for index in sorted(sysfs_dir.glob("index*")):
        try:
            level = int((index / "level").read_text().strip())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size:
            found.append(OsCache(level=level, type=kind, size_bytes=size))
    return tuple(sorted(found, key=lambda c: c.level))


def lscpu_caches(lscpu_text: str) -> tuple[OsCache, ...]:
    """Data and unified caches parsed from ``lscpu`` output, per instance.

    lscpu prints totals over instances (``L2 cache: 2 MiB (2 instances)``), so its sizes
    are divided by the instance count to match sysfs's per-instance figure.
    """
    found: list[OsCache] = []
    for line in lscpu_text.splitlines():
        match = _LSCPU_RE.match(line.strip())
        if not match or match.group(2) == "i":
            continue
        size = parse_size(match.group(3))
        if size:
            size //= int(match.group(4) or 1)
            kind = "Data" if match.group(2) == "d" else "Unified"
            found.append(OsCache(level=int(match.group(1)), type=kind, size_bytes=size))
    return tuple(found)


def read_os_caches(
    sysfs_dir: Path = SYSFS_CACHE, lscpu_text: str | None = None
) -> tuple[OsCache, ...]:
    """Caches of cpu0 from sysfs, else from ``lscpu`` (run when ``lscpu_text`` is None), else ()."""
    found = sysfs_caches(sysfs_dir)
    if found:
        return found
    if lscpu_text is None:
        try:
            lscpu_text = subprocess.run(
                ["lscpu"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return ()
    return lscpu_caches(lscpu_text)


def cache_label(cache: OsCache) -> str:
    """``L1d`` for a level-1 data cache, ``L2`` for a unified one."""
    return f"L{cache.level}{'d' if cache.type == 'Data' else ''}"


def cpu_cache_sizes(sysfs_dir: Path = SYSFS_CACHE) -> dict[str, int]:
    """Cache sizes sysfs reports for cpu0 by label, e.g. ``{"L1d": 32768, "L2": ..., "L3": ...}``.

    sysfs only: this runs in every worker that measures a ``cold`` point, where starting
    ``lscpu`` (~5 ms here) per point would be wasted; without sysfs the caller's default applies.
    """
    return {cache_label(c): c.size_bytes for c in sysfs_caches(sysfs_dir)}
