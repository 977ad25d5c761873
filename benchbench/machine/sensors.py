"""What the telemetry sampler reads: CPU clocks and temperature, other processes, GPUs.

Each source is read by one function or small class, cheap enough to call every 50 ms
(CPU clocks ~80 µs, a GPU's readings through NVML) or every 0.5 s (temperatures ~130
µs, a scan of every other process ~25 µs per process). A value that cannot be read is
None or absent, never zero. :mod:`benchbench.machine.telemetry` samples them in a
thread and summarises; :mod:`benchbench.machine.nvml` loads NVML and calls it safely.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

from benchbench.machine.nvml import process_name, read, running_processes

# Chips whose sensors are the CPU package/cores (Intel, AMD, Raspberry Pi-style SoCs).
CPU_TEMPERATURE_CHIPS = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "cpu-thermal")
# Processes below this mean CPU use (% of one core) are neither named nor reported.
_REPORTED_PROCESS_CPU_PERCENT = 1.0

# NVML clock event ("throttle") reason bits, from nvml.h (nvmlClocksEventReason*).
THROTTLE_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
_KNOWN_REASON_BITS = sum(bit for bit, _ in THROTTLE_REASON_BITS)
# Reasons that hold clocks below what the workload could get. The others are not throttling:
# idle (the GPU waits for work), clocks the user set, sync boost and display clocks.
THROTTLING_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
     "hw_power_brake_slowdown"}
)  # fmt: skip


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Names of the reason bits set in an NVML clock event mask, lowest bit first.

    Bits this table does not know appear as one ``unknown_0x...`` entry, never dropped.
    """
    names = [name for bit, name in THROTTLE_REASON_BITS if mask & bit]
    unknown = mask & ~_KNOWN_REASON_BITS
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return tuple(names)


def throttling_reasons(names: Iterable[str]) -> tuple[str, ...]:
    """The subset of decoded reason names that mean the clocks were throttled."""
    return tuple(name for name in names if name in THROTTLING_REASONS)


@dataclass(frozen=True)
class ProcessUsage:
    """Another process's CPU use during the point, in % of one core (100 = one busy core)."""

    pid: int
    name: str | None
    cpu_percent_mean: float
    cpu_percent_max: float


@dataclass(frozen=True)
class GpuProcess:
    """A process other than ours with a context on GPU ``gpu`` during the point."""

    gpu: int
    pid: int
    name: str | None
    used_memory_bytes: int | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuProcess:
        """Rebuild from ``vars(process)``."""
        used = data["used_memory_bytes"]
        name = data["name"]
        return cls(
            int(data["gpu"]),
            int(data["pid"]),
            None if name is None else str(name),
            None if used is None else int(used),
        )


class ProcessScanner:
    """CPU use of every other process, from the delta of its CPU times between scans.

    A process's first scan only primes psutil's counter (its value is meaningless), so a
    process contributes from its second scan on.
    """

    def __init__(self, exclude_pids: frozenset[int]) -> None:
        self._exclude = exclude_pids
        self._procs: dict[int, psutil.Process] = {}
        self._usage: dict[int, list[float]] = {}
        self._names: dict[int, str | None] = {}

    def scan(self) -> None:
        """Read every other process's CPU use since the previous scan."""
        try:
            alive = set(psutil.pids()) - self._exclude
        except (OSError, psutil.Error):
            return  # no process table (a sandbox without /proc): no process telemetry
        for pid in self._procs.keys() - alive:
            del self._procs[pid]
        for pid in alive:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    self._procs[pid] = proc = psutil.Process(pid)
                    proc.cpu_percent(None)
                    continue
                percent = proc.cpu_percent(None)
                self._usage.setdefault(pid, []).append(percent)
                # The name costs another read, so only for processes worth reporting.
                if percent >= _REPORTED_PROCESS_CPU_PERCENT and pid not in self._names:
                    self._names[pid] = proc.name()
            except psutil.Error:
                self._procs.pop(pid, None)

    def busiest(self, count: int) -> tuple[ProcessUsage, ...]:
        """The ``count`` processes with the highest mean CPU use that reached 1 %."""
        usages = [
            ProcessUsage(pid, self._names.get(pid), statistics.fmean(v), max(v))
            for pid, v in self._usage.items()
            if max(v) >= _REPORTED_PROCESS_CPU_PERCENT
        ]
        usages.sort(key=lambda u: u.cpu_percent_mean, reverse=True)
        return tuple(usages[:count])


class NvmlReader:
    """Reads one sample of every selected GPU through an (initialised) ``pynvml`` module."""

    def __init__(
        self, nvml: Any, gpu_indices: Iterable[int] | None, exclude_pids: Iterable[int]
    ) -> None:
        self._nvml = nvml
        count = read(nvml.nvmlDeviceGetCount) or 0
        wanted = range(count) if gpu_indices is None else [i for i in gpu_indices if i < count]
        handles = {i: read(nvml.nvmlDeviceGetHandleByIndex, i) for i in wanted}
        self._handles = {i: h for i, h in handles.items() if h is not None}
        self._exclude = frozenset(exclude_pids)
        # Newer drivers call them "clock event reasons"; older pynvml only has "throttle".
        self._reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
            getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        )
        self._masks: dict[int, int] = {}
        self._procs: dict[tuple[int, int], GpuProcess] = {}

    def sample(self) -> dict[str, float | None]:
        """One reading of every metric of every GPU (None: not readable on that board)."""
        nvml, out = self._nvml, {}
        for i, handle in self._handles.items():
            sm = read(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
            mem = read(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM)
            power_mw = read(nvml.nvmlDeviceGetPowerUsage, handle)
            temp = read(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
            util = read(nvml.nvmlDeviceGetUtilizationRates, handle)
            out[f"gpu{i}_sm_clock_mhz"] = sm
            out[f"gpu{i}_mem_clock_mhz"] = mem
            out[f"gpu{i}_power_w"] = None if power_mw is None else power_mw / 1000
            out[f"gpu{i}_temp_c"] = temp
            out[f"gpu{i}_util_percent"] = None if util is None else util.gpu
            out[f"gpu{i}_mem_util_percent"] = None if util is None else util.memory
            mask = read(self._reasons_fn, handle)
            if mask is not None:
                self._masks[i] = self._masks.get(i, 0) | int(mask)
        return out

    def scan_processes(self) -> None:
        """Record the processes other than ours with a context on each GPU."""
        nvml = self._nvml
        for i, handle in self._handles.items():
            for proc in running_processes(nvml, handle):
                if proc.pid in self._exclude or (i, proc.pid) in self._procs:
                    continue
                used = getattr(proc, "usedGpuMemory", None)
                self._procs[(i, proc.pid)] = GpuProcess(
                    i, proc.pid, process_name(proc.pid), None if used is None else int(used)
                )

    def throttle_reasons(self) -> dict[int, tuple[str, ...]]:
        """Per GPU, every reason seen in any sample (an empty tuple: read, none set)."""
        return {i: decode_throttle_reasons(mask) for i, mask in self._masks.items()}

    def processes(self) -> tuple[GpuProcess, ...]:
        """Every other process seen on a GPU by :meth:`scan_processes`."""
        return tuple(self._procs.values())


def cpu_freqs_mhz() -> list[float]:
    """Current clock of each core in MHz; [] where the platform does not say."""
    # Per-core frequency is missing on some platforms (Apple silicon, some VMs and
    # sandboxes), and a 0.0 reading means "not known" there: both are absent, not zero.
    try:
        freqs = psutil.cpu_freq(percpu=True) or []
    except (OSError, NotImplementedError, AttributeError, RuntimeError):
        return []
    return [f.current for f in freqs if f.current and f.current > 0]


def cpu_temperature_c() -> float | None:
    """The hottest CPU package/core sensor in °C, or None where there is none."""
    read = getattr(psutil, "sensors_temperatures", None)  # absent on macOS and Windows
    if read is None:
        return None
    try:
        chips = read()
    except (OSError, RuntimeError):
        return None
    readings = [
        sensor.current
        for chip in CPU_TEMPERATURE_CHIPS
        for sensor in chips.get(chip, [])
        if sensor.current is not None and sensor.current > 0
    ]
    return max(readings) if readings else None


def per_cpu_times() -> list[tuple[float, float]]:
    """``(busy_s, idle_s)`` of each core since boot (index = core number); [] if unknown.

    Idle is ``idle + iowait`` (a core waiting on the disk is free to run a thread); busy
    is the rest but ``guest`` and ``guest_nice``, which the kernel already counts in
    ``user``. One read of ``/proc/stat`` (~50 µs), counted in 10 ms ticks.
    """
    try:
        times = psutil.cpu_times(percpu=True)
    except (OSError, NotImplementedError, AttributeError, RuntimeError):
        return []
    out = []
    for cpu in times:
        fields = cpu._asdict()
        idle = fields.get("idle", 0.0) + fields.get("iowait", 0.0)
        total = sum(fields.values()) - fields.get("guest", 0.0) - fields.get("guest_nice", 0.0)
        out.append((total - idle, idle))
    return out


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds process ``pid`` has used (all its threads); None if gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return float(times.user + times.system)


def process_cpus(pid: int) -> tuple[int, ...] | None:
    """The cores process ``pid`` may run on (its affinity); None where it cannot be read."""
    try:
        return tuple(sorted(psutil.Process(pid).cpu_affinity() or ()))
    except (psutil.Error, OSError, AttributeError):  # no cpu_affinity on macOS
        return None


@dataclass(frozen=True)
class CpuReader:
    """Where the sampler reads CPU time and affinity; tests give fakes for each field."""

    per_cpu: Callable[[], list[tuple[float, float]]] = per_cpu_times
    process_cpu_s: Callable[[int], float | None] = process_cpu_s
    process_cpus: Callable[[int], tuple[int, ...] | None] = process_cpus
