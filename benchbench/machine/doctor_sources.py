"""What ``benchbench doctor`` reads the system through, and what a check returns.

:class:`SystemSources` bundles every reader the checks use (files, CPU counts, load,
swap, other processes, the environment, torch, NVML); tests replace any field with a
fake, so the checks' logic runs on made-up machines. :class:`Check` is one line of the
report.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import psutil

from benchbench.machine.cpus import usable_cpus
from benchbench.machine.nvml import load_nvml, visible_cuda_uuids
from benchbench.machine.pmu import availability
from benchbench.machine.telemetry import ProcessUsage, Telemetry, TelemetrySampler

Status = Literal["ok", "warn", "info", "unknown"]
# Long enough for a busy neighbour to show (psutil's CPU percent is a delta over it),
# short enough that `benchbench doctor` answers at once.
_PROCESS_WINDOW_S = 0.5
_window: list[tuple[float, Telemetry]] = []  # the last window and when it ended


@dataclass(frozen=True)
class Check:
    """The result of one system check: ``advice`` is the fix (empty when nothing to do)."""

    name: str
    status: Status
    value: str
    advice: str = ""

    def to_dict(self) -> dict[str, str]:
        """JSON-safe form, for ``benchbench doctor --json``."""
        return {
            "name": self.name,
            "status": self.status,
            "value": self.value,
            "advice": self.advice,
        }


@dataclass(frozen=True)
class TorchInfo:
    """What the thread and build checks need from torch."""

    version: str
    num_threads: int
    debug_build: bool
    cuda: str | None = None  # torch.version.cuda: the CUDA toolkit torch was built with
    hip: str | None = None  # torch.version.hip: the ROCm (HIP) version of a ROCm build


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


def _torch_info() -> TorchInfo:
    import torch  # seconds to import: only when the thread or build checks run

    return TorchInfo(
        torch.__version__,
        torch.get_num_threads(),
        bool(torch.version.debug),
        cuda=torch.version.cuda,
        hip=getattr(torch.version, "hip", None),
    )


def _cpu_window() -> Telemetry:
    """Other processes' and every core's CPU use over one 0.5 s window, shared by the
    checks that read it (a window younger than 5 s is reused)."""
    if _window and time.monotonic() - _window[-1][0] < 5.0:
        return _window[-1][1]
    sampler = TelemetrySampler(nvml=None, top_processes=10, slow_in_thread=False)
    sampler.start()  # primes the per-process CPU counters; the stop reads them
    time.sleep(_PROCESS_WINDOW_S)
    telemetry = sampler.stop()
    _window[:] = [(time.monotonic(), telemetry)]
    return telemetry


def _busy_processes() -> Sequence[ProcessUsage]:
    return _cpu_window().busy_processes


def _busy_cores() -> float:
    """CPU use of every process on the cores this one may use, in cores (1.0: one core)."""
    shares = _cpu_window().cpu_idle_share
    cpus = [c for c in usable_cpus() if c in shares]
    if not cpus:
        raise OSError("per-core CPU times are not readable here")
    return sum(1.0 - shares[c] for c in cpus)


def _swap_bytes() -> tuple[int, int]:
    swap = psutil.swap_memory()
    return int(swap.used), int(swap.total)


@dataclass(frozen=True)
class SystemSources:
    """Where the checks read the system; every field can be replaced by a fake in tests.

    ``read_text`` raises OSError for a missing or unreadable file; ``busy_cores`` (the
    CPU use of every process now, in cores) raises OSError where it cannot be read;
    ``torch_info`` raises ImportError without torch; ``nvml`` returns
    ``(initialised pynvml, "")`` or ``(None, reason)``; ``cuda_uuids`` returns
    ``{CUDA index: torch UUID}`` (None where it cannot be read); ``pmu`` says whether
    hardware instruction counts open (:func:`benchbench.machine.pmu.availability`).
    """

    read_text: Callable[[str], str] = _read_text
    list_paths: Callable[[str], list[str]] = field(default=lambda pattern: glob.glob(pattern))
    logical_cpus: Callable[[], int | None] = os.cpu_count
    physical_cpus: Callable[[], int | None] = field(default=lambda: psutil.cpu_count(logical=False))
    load_average: Callable[[], tuple[float, float, float]] = os.getloadavg
    swap_bytes: Callable[[], tuple[int, int]] = _swap_bytes
    busy_processes: Callable[[], Sequence[ProcessUsage]] = _busy_processes
    usable_cpus: Callable[[], tuple[int, ...]] = usable_cpus
    busy_cores: Callable[[], float] = _busy_cores
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    torch_info: Callable[[], TorchInfo] = _torch_info
    nvml: Callable[[], tuple[Any, str]] = load_nvml
    cuda_uuids: Callable[[], Mapping[int, str] | None] = visible_cuda_uuids
    pmu: Callable[[], str] = availability
    own_pid: int = field(default_factory=os.getpid)
