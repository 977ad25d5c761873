"""The memory allocator of worker processes: which one, its settings, huge pages.

The runner starts its worker processes with :func:`worker_environment` added to
their environment, before they import anything: so the allocator's behaviour is
fixed for the worker's whole life and does not depend on what the worker measured
before. A worker reads back what it runs under with :func:`describe` (part of the
environment fingerprint, see :mod:`benchbench.machine.environment`).

- ``system`` (default): glibc's malloc with both thresholds fixed
  (:data:`MMAP_THRESHOLD_BYTES`, :data:`TRIM_THRESHOLD_BYTES`).
- ``jemalloc`` / ``tcmalloc``: the library preloaded with ``LD_PRELOAD``, as PyTorch's
  own launcher ``torch.backends.xeon.run_cpu`` does; Debian packages ``libjemalloc2``
  and ``libtcmalloc-minimal4``.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchbench.core.errors import UsageError

ALLOCATORS = ("system", "jemalloc", "tcmalloc")

#: Library file and the Debian package that installs it, per preloaded allocator.
LIBRARIES = {
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
}

#: Where :func:`find_library` looks, in order (Debian's multiarch folders first).
SEARCH_PATH: tuple[str, ...] = (
    f"/usr/lib/{platform.machine()}-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    f"{sys.prefix}/lib",
)

#: glibc's dynamic mmap threshold starts at 128 KiB and rises to the size of any
#: mmapped block freed, up to 32 MiB: a worker's threshold, and with it whether an
#: op's output is reused heap or a fresh mapping that every call page-faults and
#: zeroes, depended on the points it measured before. Measured here (2 cores, load
#: 1.7-2.4, one thread, two runs): ``1 / torch.sqrt(x)`` at 2^22 float32 took 7.8-17.2
#: ms with the dynamic threshold in a fresh process (~300 faults per call), 7.1-8.8 ms
#: from heap, 42.9-61.7 ms as fresh mappings (12291 faults per call); ``x + 1`` at
#: 2^22 1.4-3.1 ms from heap against 13.3-23.2 ms. Fixing the threshold at 32 MiB,
#: the ceiling of glibc's dynamic rule on 64-bit and so the value a long-running
#: process converges to, gives every worker that steady state from the first point
#: on: blocks below 32 MiB come from the heap, larger ones are always fresh mappings
#: (``x + 1`` at 2^23 float32: 37.9 ms, 8193 faults per call, and a warning). A
#: threshold of 64 KiB would make every large output a fresh mapping instead: the
#: figure would then be mostly the kernel's. Setting either variable turns the
#: dynamic threshold off.
MMAP_THRESHOLD_BYTES = 32 * 2**20
#: Twice the mmap threshold, as glibc's dynamic rule sets it: a freed 32 MiB block
#: stays in the heap instead of being trimmed and faulted in again by the next call.
TRIM_THRESHOLD_BYTES = 64 * 2**20

#: The transparent-huge-pages mode; its bracketed word is the one in effect.
THP_PATH = Path("/sys/kernel/mm/transparent_hugepage/enabled")

#: Set for the workers so that they can record the allocator they run under.
ALLOCATOR_VARIABLE = "BENCHBENCH_ALLOCATOR"


def find_library(allocator: str, search_path: Sequence[str] | None = None) -> Path:
    """The shared library of ``allocator`` (jemalloc, tcmalloc) in ``search_path``
    (default :data:`SEARCH_PATH`); UsageError naming the package to install if absent."""
    filename, package = LIBRARIES[allocator]
    search_path = SEARCH_PATH if search_path is None else search_path
    for folder in search_path:
        candidate = Path(folder) / filename
        if candidate.is_file():
            return candidate
    raise UsageError(
        f"--allocator {allocator}: {filename} not found in {', '.join(search_path)}; "
        f"install it (Debian/Ubuntu: apt-get install {package}) or use --allocator system"
    )


def worker_environment(
    allocator: str,
    base: Mapping[str, str] | None = None,
    search_path: Sequence[str] | None = None,
) -> dict[str, str]:
    """The environment to start a worker process (or the zygote) with.

    ``base`` (default: this process's environment) plus the allocator's variables:
    glibc's fixed thresholds for ``system``, ``LD_PRELOAD`` of the library (before any
    already there) for ``jemalloc`` and ``tcmalloc``.
    """
    if allocator not in ALLOCATORS:
        raise UsageError(f"--allocator must be one of {', '.join(ALLOCATORS)}, got {allocator!r}")
    env = dict(os.environ if base is None else base)
    env[ALLOCATOR_VARIABLE] = allocator
    if allocator == "system":
        env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD_BYTES)
        env["MALLOC_TRIM_THRESHOLD_"] = str(TRIM_THRESHOLD_BYTES)
        return env
    library = str(find_library(allocator, search_path))
    preloaded = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{library}:{preloaded}" if preloaded else library
    return env


def transparent_hugepages(path: Path = THP_PATH) -> str | None:
    """The THP mode in effect (``always``, ``madvise``, ``never``), None where unknown."""
    try:
        text = path.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def describe(environ: Mapping[str, str] | None = None, thp_path: Path = THP_PATH) -> dict[str, Any]:
    """What this process allocates with: allocator, glibc thresholds (None: dynamic), THP.

    The allocator is what the runner started the worker with; a process the runner
    did not start (``compare_variants`` in-process) reports ``system``.
    """
    env = os.environ if environ is None else environ

    def _bytes(name: str) -> int | None:
        value = env.get(name)
        return int(value) if value and value.isdigit() else None

    return {
        "allocator": env.get(ALLOCATOR_VARIABLE, "system"),
        "malloc_mmap_threshold_bytes": _bytes("MALLOC_MMAP_THRESHOLD_"),
        "malloc_trim_threshold_bytes": _bytes("MALLOC_TRIM_THRESHOLD_"),
        "transparent_hugepages": transparent_hugepages(thp_path),
    }
