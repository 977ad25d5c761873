"""NVIDIA's management library (NVML, through ``pynvml``): loaded once, called safely.

    nvml, why_not = load_nvml()            # (initialised pynvml, "") or (None, reason)
    if nvml is not None:
        handle = read(nvml.nvmlDeviceGetHandleByIndex, 0)   # None when it fails
        clocks = call(nvml.nvmlDeviceGetApplicationsClock, handle, 0)  # raises

The telemetry sampler, the doctor, the environment fingerprint, the CUDA timer's
clock guard (:func:`sm_clock_reader`) and ``run --lock-clocks`` (:func:`locked_clocks`)
all reach NVML through this module. Every function takes the module as an argument, so tests pass
a fake; none of them assumes a GPU (the normal case on a CPU machine is no NVML).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import psutil

from benchbench.core.errors import UsageError

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


def _reasons_function(nvml: Any) -> Callable[..., Any] | None:
    # Newer drivers call them "clock event reasons"; older pynvml only has "throttle".
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )


@dataclass(frozen=True)
class ClockReading:
    """One read of a GPU's SM clock beside its reference clock, and the reason mask.

    ``reference_mhz`` is the application SM clock (what the board runs at under load
    unless it is held back), or its default where the current one is unreadable.
    """

    sm_mhz: int
    reference_mhz: int | None
    reasons_mask: int | None


def sm_clock_reader(nvml: Any, index: int) -> Callable[[], ClockReading | None] | None:
    """A function that reads GPU ``index``'s SM clock now, or None without NVML or GPU.

    The reference clock is read once here (it changes only when someone sets it); the
    returned function costs two NVML calls (~10-50 µs, not measured here) and returns
    None when the clock is unreadable (MIG instances, some boards).
    """
    if nvml is None:
        return None
    handle = read(nvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return None
    sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    reference = read(getattr(nvml, "nvmlDeviceGetApplicationsClock", None), handle, sm) or read(
        getattr(nvml, "nvmlDeviceGetDefaultApplicationsClock", None), handle, sm
    )
    reasons = _reasons_function(nvml)

    def read_clock() -> ClockReading | None:
        mhz = read(nvml.nvmlDeviceGetClockInfo, handle, sm)
        if mhz is None:
            return None
        return ClockReading(int(mhz), int(reference) if reference else None, read(reasons, handle))

    return read_clock


def _lock_error(index: int, exc: BaseException) -> UsageError:
    text = str(exc) or type(exc).__name__
    if "permission" in text.lower() or "NoPermission" in type(exc).__name__:
        fix = (
            "run as root, or lock them beforehand with `sudo nvidia-smi -i "
            f"{index} -lgc <MHz>` and run without --lock-clocks"
        )
    else:
        fix = "this GPU or driver does not allow it: run without --lock-clocks"
    return UsageError(f"--lock-clocks: cannot lock the clocks of GPU {index} ({text}); {fix}")


@contextlib.contextmanager
def locked_clocks(nvml: Any, why_not: str, indices: Sequence[int]) -> Iterator[dict[int, int]]:
    """GPUs ``indices`` locked to their default application SM clock; reset after.

    Yields ``{index: MHz}``. Raises :class:`UsageError` before anything is locked when
    NVML is missing (``why_not`` says why) and, with every lock made so far reset, when
    a GPU's default clock is unreadable or locking is refused (not root, unsupported
    board). ``nvmlDeviceSetGpuLockedClocks`` needs root and a Volta or newer GPU.
    """
    if nvml is None:
        raise UsageError(
            f"--lock-clocks needs NVML: {why_not}; install nvidia-ml-py on a machine with "
            "an NVIDIA driver, or run without --lock-clocks"
        )
    sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    locked: dict[int, Any] = {}
    mhz: dict[int, int] = {}
    try:
        for index in indices:
            try:
                handle = call(nvml.nvmlDeviceGetHandleByIndex, index)
                default = int(call(getattr(nvml, "nvmlDeviceGetDefaultApplicationsClock", None),
                                   handle, sm))  # fmt: skip
                call(getattr(nvml, "nvmlDeviceSetGpuLockedClocks", None), handle, default, default)
            except Exception as exc:
                raise _lock_error(index, exc) from exc
            locked[index], mhz[index] = handle, default
        yield mhz
    finally:
        for handle in locked.values():
            read(getattr(nvml, "nvmlDeviceResetGpuLockedClocks", None), handle)
