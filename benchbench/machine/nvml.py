"""NVIDIA's management library (NVML, through ``pynvml``): loaded once, called safely.

    nvml, why_not = load_nvml()            # (initialised pynvml, "") or (None, reason)
    if nvml is not None:
        handle = read(nvml.nvmlDeviceGetHandleByIndex, 0)   # None when it fails
        clocks = call(nvml.nvmlDeviceGetApplicationsClock, handle, 0)  # raises

The telemetry sampler, the doctor and the environment fingerprint all read NVML
through this module. Every function takes the module as an argument, so tests pass
a fake; none of them assumes a GPU (the normal case on a CPU machine is no NVML).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import psutil

try:
    import pynvml
except ImportError:  # a declared dependency, but a CPU-only install may drop it
    pynvml = None

#: The NVML functions that list the processes with a context on a GPU.
PROCESS_FUNCTIONS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
)


@functools.lru_cache(maxsize=1)
def load_nvml() -> tuple[ModuleType | None, str]:
    """``(pynvml, "")`` once NVML is initialised, or ``(None, why not)``.

    Initialised once per process and never shut down: ``nvmlInit`` costs ~0.1-1 s on a GPU
    machine and a worker measures many points. Any failure (no package, no driver, no GPU)
    means "no NVML"; it is cached, so neither retried nor reported per point.
    """
    if pynvml is None:
        return None, "the nvidia-ml-py package (import pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"nvmlInit failed: {exc}"
    return pynvml, ""


def call(function: Callable[..., Any] | None, *args: Any) -> Any:
    """``function(*args)``; LookupError when this pynvml lacks the function (None).

    For callers that report why a value is missing (the doctor): NVML's own errors
    (``NVMLError_NotSupported`` ...) propagate with their message.
    """
    if function is None:
        raise LookupError("not in this pynvml version")
    return function(*args)


def read(function: Callable[..., Any] | None, *args: Any) -> Any:
    """``function(*args)``, or None when the function is missing or raises.

    NVML raises ``NVMLError_NotSupported`` for sensors a board lacks (power on some
    boards, clocks under MIG): for the sampler that reading is absent, the others go on.
    """
    if function is None:
        return None
    try:
        return function(*args)
    except Exception:
        return None


def running_processes(nvml: Any, handle: Any, *, strict: bool = False) -> list[Any]:
    """Compute and graphics processes on the GPU of ``handle`` (NVML process infos).

    ``strict``: a missing or failing listing raises (see :func:`call`); otherwise it
    contributes nothing and the other listing still counts.
    """
    found: list[Any] = []
    for name in PROCESS_FUNCTIONS:
        function = getattr(nvml, name, None)
        found.extend((call(function, handle) if strict else read(function, handle)) or [])
    return found


def process_name(pid: int) -> str | None:
    """The name of process ``pid``, or None when it is gone or in another PID namespace."""
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return None


def driver_version(nvml: Any) -> str | None:
    """The NVIDIA driver version (``"550.54.15"``), or None without NVML or on failure."""
    if nvml is None:
        return None
    version = read(getattr(nvml, "nvmlSystemGetDriverVersion", None))
    if version is None:
        return None
    return version.decode() if isinstance(version, bytes) else str(version)
