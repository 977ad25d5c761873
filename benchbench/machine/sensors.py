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
from typing import Any, Protocol

import psutil

from benchbench.machine.nvml import cuda_handles, process_name, read, running_processes

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


#: Linux's kernel thread daemon: kernel threads (``kworker``, ``ksoftirqd``, ...) are its
#: children. They run I/O and timers for every process, the benchmark's included, so one at
#: 11 % of a core on an idle machine is the kernel, not "another process".
KTHREADD_PID = 2
#: How far up the parent chain a process is followed to find whether it is ours (the
#: runner's zygote forks workers, a callgrind launcher runs its worker: depth 3 here).
_MAX_ANCESTRY = 32


class ProcessTable(Protocol):
    """The processes of the machine, as the scanner reads them; psutil by default
    (:class:`PsutilTable`), a fake list in tests. Each method raises ``psutil.Error`` (or
    OSError) for a process that is gone or unreadable."""

    def pids(self) -> Iterable[int]: ...

    def cpu_percent(self, pid: int) -> float | None:
        """CPU use since the previous call for ``pid``, in % of one core; None at the first."""

    def name(self, pid: int) -> str | None: ...

    def ppid(self, pid: int) -> int | None: ...


class PsutilTable:
    """:class:`ProcessTable` over psutil, one ``psutil.Process`` kept per pid for its
    CPU counter (a process's first reading only primes it)."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def pids(self) -> Iterable[int]:
        alive = set(psutil.pids())
        for pid in self._procs.keys() - alive:
            del self._procs[pid]
        return alive

    def cpu_percent(self, pid: int) -> float | None:
        proc = self._procs.get(pid)
        if proc is None:
            self._procs[pid] = proc = psutil.Process(pid)
            proc.cpu_percent(None)
            return None
        try:
            return float(proc.cpu_percent(None))
        except psutil.Error:
            self._procs.pop(pid, None)
            raise

    def name(self, pid: int) -> str | None:
        return self._process(pid).name()

    def ppid(self, pid: int) -> int | None:
        return self._process(pid).ppid()

    def _process(self, pid: int) -> psutil.Process:
        return self._procs.get(pid) or psutil.Process(pid)


class ProcessScanner:
    """CPU use of every other process, from the delta of its CPU times between scans.

    A process's first scan only primes its counter (its value is meaningless), so a
    process contributes from its second scan on. Not "other processes", and never
    reported: ``exclude_pids``; on Linux the kernel's threads (``kthreadd``, pid 2, and
    its children); and with ``own_root`` that process and every descendant of it (the
    runner passes its own pid: its zygote, workers and the callgrind worker are ours).
    Whose a process is is read once per pid, only for processes worth reporting (>= 1 %
    of a core), from the parent chain of ``table`` (psutil unless a test gives a fake).
    """

    def __init__(
        self,
        exclude_pids: frozenset[int],
        *,
        own_root: int | None = None,
        table: ProcessTable | None = None,
        kthreadd_pid: int | None = KTHREADD_PID if psutil.LINUX else None,
    ) -> None:
        self._exclude = exclude_pids
        self._own_root = own_root
        self._table: ProcessTable = table or PsutilTable()
        self._kthreadd = kthreadd_pid
        self._usage: dict[int, list[float]] = {}
        self._names: dict[int, str | None] = {}
        self._ignored: dict[int, bool] = {}

    def scan(self) -> None:
        """Read every other process's CPU use since the previous scan."""
        try:
            alive = set(self._table.pids()) - self._exclude
        except (OSError, psutil.Error):
            return  # no process table (a sandbox without /proc): no process telemetry
        for pid in alive:
            try:
                percent = self._table.cpu_percent(pid)
                if percent is None:
                    continue
                # Whose it is and its name cost more reads: only for processes worth reporting.
                if percent >= _REPORTED_PROCESS_CPU_PERCENT and self._ignore(pid):
                    continue
                self._usage.setdefault(pid, []).append(percent)
                if percent >= _REPORTED_PROCESS_CPU_PERCENT and pid not in self._names:
                    self._names[pid] = self._table.name(pid)
            except (OSError, psutil.Error):
                continue

    def ours(self, pid: int) -> bool:
        """True for an excluded pid, a kernel thread or (with ``own_root``) one of ours;
        False for a process that cannot be read. The GPU reader asks it too."""
        try:
            return pid in self._exclude or self._ignore(pid)
        except (OSError, psutil.Error):
            return False

    def _ignore(self, pid: int) -> bool:
        """True for a kernel thread or a process of ours (decided once per pid)."""
        if pid not in self._ignored:
            self._ignored[pid] = self._kernel_or_ours(pid)
            if self._ignored[pid]:
                self._usage.pop(pid, None)
        return self._ignored[pid]

    def _kernel_or_ours(self, pid: int) -> bool:
        kthreadd = self._kthreadd
        if kthreadd is not None and (pid == kthreadd or self._table.ppid(pid) == kthreadd):
            return True
        current: int | None = pid
        for _ in range(_MAX_ANCESTRY):
            if self._own_root is None or current is None or current <= 1:  # init, or pid 0
                return False
            if current == self._own_root:
                return True
            current = self._table.ppid(current)
        return False

    def busiest(self, count: int) -> tuple[ProcessUsage, ...]:
        """The ``count`` processes with the highest mean CPU use that reached 1 %."""
        usages = [
            ProcessUsage(pid, self._names.get(pid), statistics.fmean(v), max(v))
            for pid, v in self._usage.items()
            if max(v) >= _REPORTED_PROCESS_CPU_PERCENT and not self._ignored.get(pid, False)
        ]
        usages.sort(key=lambda u: u.cpu_percent_mean, reverse=True)
        return tuple(usages[:count])


class NvmlReader:
    """Reads one sample of every selected GPU through an (initialised) ``pynvml`` module.

    ``gpus`` (``{CUDA index: torch UUID}``) selects the GPUs the run's workers see,
    matched to NVML by UUID and named by CUDA index (``gpu1_...`` is ``cuda:1``); None
    reads every GPU NVML sees, named by NVML index.
    """

    def __init__(
        self,
        nvml: Any,
        gpus: Mapping[int, str] | None,
        exclude_pids: Iterable[int],
        ours: Callable[[int], bool] | None = None,
    ) -> None:
        self._nvml = nvml
        if gpus is not None:
            self._handles = cuda_handles(nvml, gpus)
        else:
            count = read(getattr(nvml, "nvmlDeviceGetCount", None)) or 0
            by_index = getattr(nvml, "nvmlDeviceGetHandleByIndex", None)
            handles = {i: read(by_index, i) for i in range(count)}
            self._handles = {i: h for i, h in handles.items() if h is not None}
        self._exclude = frozenset(exclude_pids)
        # ``ab``'s two workers share a GPU: the other side's is the runner's, not another's.
        self._ours = ours or (lambda pid: False)
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
                if self._ours(proc.pid):
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
