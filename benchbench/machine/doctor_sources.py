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

from benchbench.machine.nvml import load_nvml
from benchbench.machine.telemetry import ProcessUsage, TelemetrySampler

Status = Literal["ok", "warn", "info", "unknown"]
# Long enough for a busy neighbour to show (psutil's CPU percent is a delta over it),
# short enough that `benchbench doctor` answers at once.
_PROCESS_WINDOW_S = 0.5


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


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


def _torch_info() -> TorchInfo:
    import torch  # seconds to import: only when the thread or build checks run

    return TorchInfo(torch.__version__, torch.get_num_threads(), bool(torch.version.debug))


def _busy_processes() -> Sequence[ProcessUsage]:
    sampler = TelemetrySampler(nvml=None, top_processes=10)
    sampler.sample(slow=True)  # primes the per-process CPU counters
    time.sleep(_PROCESS_WINDOW_S)
    sampler.sample(slow=True)
    return sampler.summary().busy_processes


def _swap_bytes() -> tuple[int, int]:
    swap = psutil.swap_memory()
    return int(swap.used), int(swap.total)


@dataclass(frozen=True)
class SystemSources:
    """Where the checks read the system; every field can be replaced by a fake in tests.

    ``read_text`` raises OSError for a missing or unreadable file; ``torch_info`` raises
    ImportError without torch; ``nvml`` returns ``(initialised pynvml, "")`` or
    ``(None, reason)``.
    """

    read_text: Callable[[str], str] = _read_text
    list_paths: Callable[[str], list[str]] = field(default=lambda pattern: glob.glob(pattern))
    logical_cpus: Callable[[], int | None] = os.cpu_count
    physical_cpus: Callable[[], int | None] = field(default=lambda: psutil.cpu_count(logical=False))
    load_average: Callable[[], tuple[float, float, float]] = os.getloadavg
    swap_bytes: Callable[[], tuple[int, int]] = _swap_bytes
    busy_processes: Callable[[], Sequence[ProcessUsage]] = _busy_processes
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    torch_info: Callable[[], TorchInfo] = _torch_info
    nvml: Callable[[], tuple[Any, str]] = load_nvml
    own_pid: int = field(default_factory=os.getpid)
