"""NVIDIA's management library (NVML, through ``pynvml``): loaded once, called safely.

    nvml, why_not = load_nvml()            # (initialised pynvml, "") or (None, reason)
    if nvml is not None:
        handle = nvml_handle(nvml, cuda_uuid(torch, 0))     # cuda:0's NVML handle, or None
        clocks = call(nvml.nvmlDeviceGetApplicationsClock, handle, 1)  # raises

The telemetry sampler, the doctor, the environment fingerprint, the CUDA timer's
clock guard (:func:`sm_clock_reader`) and ``run --lock-clocks`` (:func:`locked_clocks`)
all reach NVML through this module. Every function takes the module as an argument, so tests pass
a fake; none of them assumes a GPU (the normal case on a CPU machine is no NVML).

**CUDA index is not NVML index.** NVML numbers every GPU of the machine in PCI order;
CUDA numbers the GPUs ``CUDA_VISIBLE_DEVICES`` lets the process see (every Slurm
``--gres`` job sets it), fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. So a
CUDA device is matched to its NVML handle by UUID, in :func:`nvml_handle` and nowhere
else: ``torch.cuda.get_device_properties(i).uuid`` prefixed with ``GPU-`` is the UUID
NVML knows (checked on an H100). A process that must not start CUDA (the runner, the
doctor) learns the CUDA UUIDs from a child process (:func:`visible_cuda_uuids`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
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


def cuda_uuid(torch: Any, index: int) -> str | None:
    """The UUID torch gives CUDA device ``index`` (``str(props.uuid)``), or None.

    Starts CUDA in the calling process: a worker's, never the runner's or the zygote's
    (they use :func:`visible_cuda_uuids`).
    """
    try:
        return str(torch.cuda.get_device_properties(index).uuid)
    except Exception:
        return None


def nvml_handle(nvml: Any, uuid: str | None) -> Any:
    """The NVML handle of the CUDA device whose torch UUID is ``uuid``; None when NVML
    does not know it (or this pynvml lacks ``nvmlDeviceGetHandleByUUID``).

    The one mapping from CUDA devices to NVML devices. NVML names a GPU ``GPU-<uuid>``
    and a MIG instance ``MIG-<uuid>``; torch's UUID has no prefix (ROCm's may), so each
    form is tried.
    """
    if nvml is None or not uuid:
        return None
    by_uuid = getattr(nvml, "nvmlDeviceGetHandleByUUID", None)
    names = (uuid,) if uuid.startswith(("GPU-", "MIG-")) else (f"GPU-{uuid}", f"MIG-{uuid}")
    for name in names:
        handle = read(by_uuid, name)
        if handle is not None:
            return handle
    return None


#: What the child of :func:`visible_cuda_uuids` runs: CUDA index -> torch UUID.
_UUIDS_CHILD = (
    "import json, torch\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "print(json.dumps([str(torch.cuda.get_device_properties(i).uuid) for i in range(n)]))\n"
)


#: The variables that decide which GPUs CUDA (or ROCm) shows a process, and in what order.
VISIBILITY_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)


def visible_cuda_uuids(timeout_s: float = 120.0) -> dict[int, str] | None:
    """``{CUDA index: torch UUID}`` as this process's workers see the GPUs, or None.

    Read in a child process with this process's environment (``CUDA_VISIBLE_DEVICES``,
    ``CUDA_DEVICE_ORDER``), so that the caller starts no CUDA context: a context in the
    runner would hold ~500 MiB of every GPU and show as a process on it. Costs one
    ``import torch`` (~1-3 s), once per process and value of those variables. None when
    the child fails.
    """
    key = tuple(os.environ.get(name) for name in VISIBILITY_VARIABLES)
    return _uuids_seen_with(key, timeout_s)


@functools.lru_cache(maxsize=8)
def _uuids_seen_with(key: tuple[str | None, ...], timeout_s: float) -> dict[int, str] | None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _UUIDS_CHILD],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
        uuids = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return {i: str(u) for i, u in enumerate(uuids)}


def cuda_handles(nvml: Any, uuids: Mapping[int, str]) -> dict[int, Any]:
    """``{CUDA index: NVML handle}`` of the devices in ``uuids`` NVML knows."""
    handles = {i: nvml_handle(nvml, u) for i, u in uuids.items()}
    return {i: h for i, h in handles.items() if h is not None}


def _reasons_function(nvml: Any) -> Callable[..., Any] | None:
    # Newer drivers call them "clock event reasons"; older pynvml only has "throttle".
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )


#: The ``gpu_idle`` bit of NVML's clock event reasons (nvmlClocksEventReasonGpuIdle).
GPU_IDLE = 0x1


@dataclass(frozen=True)
class ClockReading:
    """One read of a GPU's SM clock beside its reference clock, and the reason mask.

    ``reference_mhz`` is the application SM clock (what the board runs at under load
    unless it is held back), or its default where the current one is unreadable.
    """

    sm_mhz: int
    reference_mhz: int | None
    reasons_mask: int | None

    @property
    def idle(self) -> bool:
        """NVML says the GPU had no work: its clock then says nothing about a kernel's
        (an H100 read 345 MHz idle against 1980 under load)."""
        return bool(self.reasons_mask and self.reasons_mask & GPU_IDLE)


def sm_clock_reader(nvml: Any, gpu: int | str | None) -> Callable[[], ClockReading | None] | None:
    """A function that reads a GPU's SM clock now, or None without NVML or GPU.

    ``gpu`` is a CUDA device's torch UUID (:func:`cuda_uuid`; matched by
    :func:`nvml_handle`), or an NVML index for callers that hold one. The reference clock
    is read once here (it changes only when someone sets it); the returned function
    costs two NVML calls (~10-50 µs, not measured here) and returns None when the clock is
    unreadable (MIG instances, some boards).
    """
    if nvml is None or gpu is None:
        return None
    if isinstance(gpu, str):
        handle = nvml_handle(nvml, gpu)
    else:
        handle = read(getattr(nvml, "nvmlDeviceGetHandleByIndex", None), gpu)
    if handle is None:
        return None
    sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    reference = read(getattr(nvml, "nvmlDeviceGetApplicationsClock", None), handle, sm) or read(
        getattr(nvml, "nvmlDeviceGetDefaultApplicationsClock", None), handle, sm
    )
    reasons = _reasons_function(nvml)
    clock_info = getattr(nvml, "nvmlDeviceGetClockInfo", None)

    def read_clock() -> ClockReading | None:
        mhz = read(clock_info, handle, sm)
        if mhz is None:
            return None
        return ClockReading(int(mhz), int(reference) if reference else None, read(reasons, handle))

    return read_clock


def _lock_error(name: str, exc: BaseException | str) -> UsageError:
    text = str(exc) or type(exc).__name__
    if "permission" in text.lower() or "NoPermission" in type(exc).__name__:
        fix = (
            "run as root, or lock them beforehand with `sudo nvidia-smi -i <GPU UUID> "
            "-lgc base` and run without --lock-clocks"
        )
    else:
        fix = "this GPU or driver does not allow it: run without --lock-clocks"
    return UsageError(f"--lock-clocks: cannot lock the clocks of {name} ({text}); {fix}")


#: ``nvmlDeviceSetGpuLockedClocks``' symbolic "base clock" (nvml.h ``nvmlClockLimitId_t``
#: ``NVML_CLOCK_LIMIT_ID_TDP``): the clock the board sustains at its TDP, which power-cap
#: dips do not undercut. nvbench's ``--lock-gpu-clocks base`` passes it as min and max.
CLOCK_LIMIT_ID_TDP = 0xFFFFFF01


@contextlib.contextmanager
def locked_clocks(
    nvml: Any, why_not: str, devices: Mapping[int, str | None]
) -> Iterator[dict[int, int | None]]:
    """CUDA devices ``devices`` (``{CUDA index: torch UUID}``) locked to their base
    clock; reset after.

    The base clock, not the default application clock: on an H100 SXM the default
    application clock is the maximum boost (1980 MHz), which a power-cap dip undercuts
    under load. Yields ``{index: SM MHz read just after locking, or None}``. Raises
    :class:`UsageError` before anything is locked when NVML is missing (``why_not``
    says why) or a device has no NVML handle (its UUID unknown: never lock a GPU
    chosen by index, it may be someone else's), and, with every lock made so far
    reset, when locking is refused (not root, unsupported board).
    ``nvmlDeviceSetGpuLockedClocks`` needs root and a Volta or newer GPU.
    """
    if nvml is None:
        raise UsageError(
            f"--lock-clocks needs NVML: {why_not}; install nvidia-ml-py on a machine with "
            "an NVIDIA driver, or run without --lock-clocks"
        )
    handles = {}
    for index, uuid in devices.items():
        handle = nvml_handle(nvml, uuid)
        if handle is None:
            raise _lock_error(
                f"cuda:{index}",
                f"NVML knows no GPU with its UUID {uuid!r}" if uuid else "its UUID is unknown",
            )
        handles[index] = handle
    tdp = getattr(nvml, "NVML_CLOCK_LIMIT_ID_TDP", CLOCK_LIMIT_ID_TDP)
    sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    locked: dict[int, Any] = {}
    mhz: dict[int, int | None] = {}
    try:
        for index, handle in handles.items():
            try:
                call(getattr(nvml, "nvmlDeviceSetGpuLockedClocks", None), handle, tdp, tdp)
            except Exception as exc:
                raise _lock_error(f"cuda:{index}", exc) from exc
            locked[index] = handle
            now = read(getattr(nvml, "nvmlDeviceGetClockInfo", None), handle, sm)
            mhz[index] = int(now) if now is not None else None
        yield mhz
    finally:
        for handle in locked.values():
            read(getattr(nvml, "nvmlDeviceResetGpuLockedClocks", None), handle)
