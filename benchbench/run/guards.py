"""What a worker applies to each request before it measures, and reads from each result
after: ``--memory-limit`` for the point's device (:func:`guard_memory`), and whether a
result's error left the process's CUDA context unusable (:func:`poisons_cuda`), so that
the worker retires and the runner takes the next point to a fresh one."""

from __future__ import annotations

import re
import resource
from typing import Any

from benchbench.measure.timers import unavailable_reason

#: Reasons that say the CUDA context of the process is gone: CUDA reports a kernel's
#: fault (device-side assert, illegal address) at the next synchronising call and then
#: fails every later call of the process with it ("sticky" errors).
_POISONED = re.compile(
    r"CUDA error|HIP error|hipError|device-side assert|illegal (memory )?address|AcceleratorError|"
    r"unspecified launch failure|CUBLAS_STATUS_EXECUTION_FAILED"
)


def poisons_cuda(reason: str | None) -> bool:
    """True when a result's ``reason`` is a CUDA error that leaves the context unusable."""
    return bool(reason) and _POISONED.search(reason or "") is not None


def guard_memory(
    device: str, memory_limit: int, torch: Any, setrlimit: Any = resource.setrlimit
) -> str | None:
    """Apply ``--memory-limit`` (bytes; 0: none) in this worker for a point on ``device``.

    CPU and MPS points: an address-space limit (``RLIMIT_AS``), so an allocation past
    it fails inside the worker and is recorded as "out of memory" instead of waking the
    kernel's OOM killer. CUDA points: no address-space limit (the driver reserves
    address space for unified addressing far beyond any memory limit, and creating the
    CUDA context fails under one); the device's caching allocator is capped at the same
    number of bytes (``torch.cuda.set_per_process_memory_fraction``: an allocation past
    it raises ``OutOfMemoryError``), and host memory is left to the runner, which
    watches the worker's resident memory and kills it past the limit
    (:class:`benchbench.run.workers.Worker`). Returns what was applied, None for nothing.
    """
    if memory_limit <= 0:
        return None
    if device.partition(":")[0] != "cuda":
        setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        return "address space"
    if unavailable_reason(device, torch) is not None:
        return None  # the point is skipped with that reason: nothing to guard
    # The index (None: the current device): the fraction's setter rejects a device
    # without one ("cuda").
    where = torch.device(device).index
    total = int(torch.cuda.get_device_properties(where).total_memory)
    torch.cuda.set_per_process_memory_fraction(min(1.0, memory_limit / total), where)
    return "device memory"
