"""Machine telemetry sampled in a background thread of the runner while a worker measures.

    sampler = TelemetrySampler(measured_pid=worker.pid, exclude_pids={os.getpid(), worker.pid})
    with sampler:
        ask_the_worker_to_measure_a_point()
    telemetry = sampler.telemetry          # frozen summary, stored with the point
    for line in warnings(telemetry): ...   # travels with the result

psutil and NVML see the whole machine, so the sampler runs in the runner, outside the
timed process: no thread of ours takes the worker's GIL or a core's cache mid-sample.
Every ``interval_s`` (default 50 ms) it reads the cheap sources: CPU frequency per core
(``psutil.cpu_freq(percpu=True)``: ~80 µs on our 2-core machine), the load average (~1 µs)
and, through NVML, each GPU's SM and memory clocks, power, temperature, utilisation and
clock throttle reasons. Every ``slow_interval_s`` (default 0.5 s) it also reads the
expensive ones: temperatures (~130 µs) and the CPU use of every other process (~25 µs per
process: ~2 ms for the 70 processes of our machine) and the processes on each GPU. The
thread's own CPU time is recorded (``Telemetry.sampler_cpu_s``) so its cost is known.

At :meth:`~TelemetrySampler.start` and :meth:`~TelemetrySampler.stop` it reads each core's
busy and idle time and the measured process's CPU time and affinity: the per-core idle
share during the point, and how many of the measured process's cores other processes
left idle (:attr:`Telemetry.idle_cores`, the rule in :mod:`benchbench.machine.cpus`).

A value that cannot be read is absent (no key), never zero. Without ``nvidia-ml-py`` or
without a GPU, NVML is skipped silently: that is the normal case on a CPU machine.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import psutil

from benchbench.core.errors import BundleError, UsageError
from benchbench.core.notes import BUSY_PROCESS
from benchbench.machine.cpus import idle_cores, threads_warning
from benchbench.machine.nvml import load_nvml
from benchbench.machine.sensors import (
    CpuReader,
    GpuProcess,
    NvmlReader,
    ProcessScanner,
    ProcessTable,
    ProcessUsage,
    cpu_freqs_mhz,
    cpu_temperature_c,
    throttling_reasons,
)

FREQUENCY_DROP_FRACTION = 0.10
BUSY_PROCESS_CPU_PERCENT = 10.0  # mean % of one core; below this a neighbour is noise
#: The kernel counts CPU time in 10 ms ticks: over a shorter window than this the idle
#: share of a core is too coarse (5 % steps) to count idle cores from.
MIN_CPU_WINDOW_S = 0.2


@dataclass(frozen=True)
class MetricSummary:
    """Minimum, mean and maximum of one metric over the ``n`` samples that could read it."""

    min: float
    mean: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> MetricSummary:
        """Summarise a non-empty series of readings."""
        series = list(values)
        return cls(min(series), statistics.fmean(series), max(series), len(series))


@dataclass(frozen=True)
class Telemetry:
    """Summary of the samples taken during one point.

    ``metrics`` keys carry their unit: ``cpu_freq_mhz`` (mean over cores, per sample),
    ``cpu_freq_max_mhz`` (fastest core, per sample), ``cpu{i}_freq_mhz``, ``load_1m``,
    ``cpu_temp_c``, and per GPU ``gpu{i}_sm_clock_mhz``, ``gpu{i}_mem_clock_mhz``,
    ``gpu{i}_power_w``, ``gpu{i}_temp_c``, ``gpu{i}_util_percent``, ``gpu{i}_mem_util_percent``.

    ``cpu_idle_share`` is each core's idle share (0 to 1) over ``cpu_window_s``; ``cpus``
    the cores the measured process could run on and ``measured_cpu_s`` the CPU seconds it
    used meanwhile; from them :attr:`others_cpu_cores` and :attr:`idle_cores`.
    """

    duration_s: float
    n_samples: int
    metrics: Mapping[str, MetricSummary] = field(default_factory=dict)
    busy_processes: tuple[ProcessUsage, ...] = ()
    gpu_throttle_reasons: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    gpu_processes: tuple[GpuProcess, ...] = ()
    sampler_cpu_s: float | None = None
    cpus: tuple[int, ...] = ()
    cpu_idle_share: Mapping[int, float] = field(default_factory=dict)
    measured_cpu_s: float | None = None
    cpu_window_s: float | None = None

    @property
    def others_cpu_cores(self) -> float | None:
        """CPU use of other processes on :attr:`cpus`, in cores (1.0: one busy core).

        The busy share of those cores minus what the measured process used; None when a
        reading is missing or the window is under :data:`MIN_CPU_WINDOW_S`.
        """
        window = self.cpu_window_s
        if not self.cpus or self.measured_cpu_s is None or window is None:
            return None
        if window < MIN_CPU_WINDOW_S or any(c not in self.cpu_idle_share for c in self.cpus):
            return None
        busy = sum(1.0 - self.cpu_idle_share[c] for c in self.cpus)
        return max(0.0, busy - self.measured_cpu_s / window)

    @property
    def idle_cores(self) -> int | None:
        """How many of :attr:`cpus` others left idle (the rule: :mod:`benchbench.machine.cpus`)."""
        others = self.others_cpu_cores
        return None if others is None else idle_cores(len(self.cpus), others)

    def metric(self, name: str) -> MetricSummary | None:
        """The summary of ``name``, or None when it could not be read."""
        return self.metrics.get(name)

    @property
    def sampler_cpu_fraction(self) -> float | None:
        """CPU seconds the sampler thread used per second of sampling (its overhead)."""
        if self.sampler_cpu_s is None or self.duration_s <= 0:
            return None
        return self.sampler_cpu_s / self.duration_s

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe document; :meth:`from_dict` reads it back."""
        return {
            "duration_s": self.duration_s,
            "n_samples": self.n_samples,
            "metrics": {
                name: {"min": s.min, "mean": s.mean, "max": s.max, "n": s.n}
                for name, s in sorted(self.metrics.items())
            },
            "busy_processes": [vars(p).copy() for p in self.busy_processes],
            "gpu_throttle_reasons": {
                str(gpu): list(names) for gpu, names in sorted(self.gpu_throttle_reasons.items())
            },
            "gpu_processes": [vars(p).copy() for p in self.gpu_processes],
            "sampler_cpu_s": self.sampler_cpu_s,
            "cpus": list(self.cpus),
            "cpu_idle_share": {str(c): v for c, v in sorted(self.cpu_idle_share.items())},
            "measured_cpu_s": self.measured_cpu_s,
            "cpu_window_s": self.cpu_window_s,
            # Derived, written for readers of the stored document (not read back).
            "others_cpu_cores": self.others_cpu_cores,
            "idle_cores": self.idle_cores,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Telemetry:
        """Rebuild from :meth:`to_dict` output; a malformed document raises BundleError."""
        try:
            return cls(
                duration_s=float(data["duration_s"]),
                n_samples=int(data["n_samples"]),
                metrics={
                    str(name): MetricSummary(
                        float(s["min"]), float(s["mean"]), float(s["max"]), int(s["n"])
                    )
                    for name, s in data["metrics"].items()
                },
                busy_processes=tuple(
                    ProcessUsage(
                        int(p["pid"]),
                        None if p["name"] is None else str(p["name"]),
                        float(p["cpu_percent_mean"]),
                        float(p["cpu_percent_max"]),
                    )
                    for p in data["busy_processes"]
                ),
                gpu_throttle_reasons={
                    int(gpu): tuple(str(n) for n in names)
                    for gpu, names in data["gpu_throttle_reasons"].items()
                },
                gpu_processes=tuple(GpuProcess.from_dict(p) for p in data["gpu_processes"]),
                sampler_cpu_s=_optional_float(data["sampler_cpu_s"]),
                # Absent from documents written before the runner sampled CPU time.
                cpus=tuple(int(c) for c in data.get("cpus", ())),
                cpu_idle_share={
                    int(c): float(v) for c, v in (data.get("cpu_idle_share") or {}).items()
                },
                measured_cpu_s=_optional_float(data.get("measured_cpu_s")),
                cpu_window_s=_optional_float(data.get("cpu_window_s")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BundleError(
                f"telemetry document is malformed ({type(exc).__name__}: {exc}); expected the "
                f"keys written by Telemetry.to_dict(), got keys {sorted(data)!r}"
            ) from exc


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


class TelemetrySampler:
    """Samples machine telemetry in a daemon thread between :meth:`start` and :meth:`stop`.

    ``nvml`` is an initialised ``pynvml`` module; ``"auto"`` (the default) imports and
    initialises it once per process, None disables GPU telemetry, tests pass a fake.
    ``gpu_uuids`` (``{CUDA index: torch UUID}``) selects the GPUs read (default: all NVML
    sees). :meth:`sample` takes one synchronously, for tests and callers without the thread.
    ``slow_in_thread=False`` reads the slow sources (process scan, temperatures, GPU
    processes) only in :meth:`start` and :meth:`stop`, in the caller's thread: a
    process scan holds the GIL for milliseconds (hundreds on a loaded machine), which
    would stall a timed Python loop if the thread did it mid-measurement, and takes a
    core from the measured process on a small machine.

    ``measured_pid`` is the process being measured (the worker): its CPU time and
    affinity are read at :meth:`start` and :meth:`stop`, beside every core's busy and
    idle time, through ``cpu`` (a :class:`~benchbench.machine.sensors.CpuReader`; tests
    pass fakes). Those reads come after the slow sources at the start and before them at
    the stop, so a process scan's own CPU time does not count as another process's.

    Other processes: all but ``exclude_pids`` (default this one), kernel threads and, with
    ``own_root``, its descendants; read from ``processes`` (psutil unless a test's fake).
    """

    def __init__(
        self,
        interval_s: float = 0.05,
        slow_interval_s: float = 0.5,
        *,
        nvml: Any = "auto",
        gpu_uuids: Mapping[int, str] | None = None,
        top_processes: int = 5,
        exclude_pids: Iterable[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        slow_in_thread: bool = True,
        measured_pid: int | None = None,
        cpu: CpuReader | None = None,
        own_root: int | None = None,
        processes: ProcessTable | None = None,
    ) -> None:
        if not interval_s > 0 or not slow_interval_s >= interval_s:
            raise UsageError(
                "TelemetrySampler: need 0 < interval_s <= slow_interval_s, got "
                f"interval_s={interval_s!r}, slow_interval_s={slow_interval_s!r}"
            )
        self.interval_s = interval_s
        self.slow_interval_s = slow_interval_s
        self.slow_in_thread = slow_in_thread
        self._clock = clock
        self._top = top_processes
        own = {os.getpid()} if exclude_pids is None else set(exclude_pids)
        self._processes = ProcessScanner(frozenset(own), own_root=own_root, table=processes)
        module = load_nvml()[0] if isinstance(nvml, str) and nvml == "auto" else nvml
        self._gpu = NvmlReader(module, gpu_uuids, own, self._processes.ours) if module else None
        self._values: dict[str, list[float]] = {}
        self._n_samples = 0
        self._last_slow: float | None = None
        self._started: float | None = None
        self._stopped: float | None = None
        self._cpu_s: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.telemetry: Telemetry | None = None
        self._measured_pid = measured_pid
        self._cpu = cpu or CpuReader()
        self._cpu_marks: list[tuple[list[tuple[float, float]], float | None]] = []
        self._cpus: tuple[int, ...] = ()

    def _mark_cpu_time(self) -> None:
        """Read every core's busy and idle time and the measured process's CPU time."""
        pid = self._measured_pid
        if pid is not None and not self._cpu_marks:
            self._cpus = self._cpu.process_cpus(pid) or ()
        measured = self._cpu.process_cpu_s(pid) if pid is not None else None
        self._cpu_marks.append((self._cpu.per_cpu(), measured))

    def _record(self, name: str, value: float | None) -> None:
        if value is not None:
            self._values.setdefault(name, []).append(float(value))

    def sample(self, slow: bool | None = None) -> None:
        """Take one sample now; ``slow`` forces (or skips) the expensive sources."""
        now = self._clock()
        if slow is None:
            slow = self._last_slow is None or now - self._last_slow >= self.slow_interval_s
        self._n_samples += 1
        freqs = cpu_freqs_mhz()
        for index, mhz in enumerate(freqs):
            self._record(f"cpu{index}_freq_mhz", mhz)
        if freqs:
            self._record("cpu_freq_mhz", statistics.fmean(freqs))
            self._record("cpu_freq_max_mhz", max(freqs))
        with contextlib.suppress(OSError, AttributeError):  # no load average: absent
            self._record("load_1m", psutil.getloadavg()[0])
        if self._gpu is not None:
            for name, value in self._gpu.sample().items():
                self._record(name, value)
        if slow:
            self._last_slow = now
            self._record("cpu_temp_c", cpu_temperature_c())
            self._processes.scan()
            if self._gpu is not None:
                self._gpu.scan_processes()

    def start(self) -> TelemetrySampler:
        """Start the sampling thread (one sample is taken at once)."""
        if self._thread is not None:
            raise RuntimeError("TelemetrySampler.start: already started; use a new sampler")
        self._started = self._clock()
        if not self.slow_in_thread:
            self.sample(slow=True)
        self._mark_cpu_time()
        self._thread = threading.Thread(target=self._run, name="benchbench-telemetry", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        cpu_start = time.thread_time()
        while True:
            tick = self._clock()
            self.sample(slow=None if self.slow_in_thread else False)
            if self._stop.wait(max(0.0, self.interval_s - (self._clock() - tick))):
                break
        self.sample(slow=False)  # the end of the point, however short it was
        self._cpu_s = time.thread_time() - cpu_start

    def stop(self) -> Telemetry:
        """Stop the thread and return (and keep in ``.telemetry``) the summary."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        self._mark_cpu_time()
        if not self.slow_in_thread:
            self.sample(slow=True)
        self._stopped = self._clock()
        self.telemetry = self.summary()
        return self.telemetry

    def summary(self) -> Telemetry:
        """Summary of the samples taken so far."""
        start = self._started if self._started is not None else self._clock()
        end = self._stopped if self._stopped is not None else self._clock()
        gpu = self._gpu
        return Telemetry(
            duration_s=end - start,
            n_samples=self._n_samples,
            metrics={k: MetricSummary.of(v) for k, v in self._values.items()},
            busy_processes=self._processes.busiest(self._top),
            gpu_throttle_reasons=gpu.throttle_reasons() if gpu else {},
            gpu_processes=gpu.processes() if gpu else (),
            sampler_cpu_s=self._cpu_s,
            **self._cpu_summary(),
        )

    def _cpu_summary(self) -> dict[str, Any]:
        """Per-core idle shares and the measured process's CPU time between the marks.

        The window is read from the cores' own counters (the longest core's busy + idle
        time), in the kernel's units, like the measured process's CPU time.
        """
        if len(self._cpu_marks) < 2:
            return {}
        (cores0, measured0), (cores1, measured1) = self._cpu_marks[0], self._cpu_marks[-1]
        shares: dict[int, float] = {}
        window = 0.0
        for core, ((busy0, idle0), (busy1, idle1)) in enumerate(zip(cores0, cores1, strict=False)):
            busy, idle = busy1 - busy0, idle1 - idle0
            if busy + idle > 0:
                shares[core] = min(1.0, max(0.0, idle / (busy + idle)))
                window = max(window, busy + idle)
        measured = None
        if measured0 is not None and measured1 is not None:
            measured = max(0.0, measured1 - measured0)
        return {
            "cpus": self._cpus,
            "cpu_idle_share": shares,
            "measured_cpu_s": measured,
            "cpu_window_s": window if shares else None,
        }

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def warnings(telemetry: Telemetry, baseline_freq: float | None = None) -> list[str]:
    """Human-readable warnings about conditions that make the point's numbers suspect.

    ``baseline_freq`` (MHz) is the CPU frequency of an idle, unthrottled machine; without it
    a drop is measured against the highest frequency seen during the point. The fastest
    core is compared, not the mean: idle cores clock down under ``powersave`` and a
    one-thread benchmark would otherwise warn on every point.
    """
    lines: list[str] = []
    freq = telemetry.metric("cpu_freq_max_mhz")
    if freq is not None:
        reference = baseline_freq if baseline_freq is not None else freq.max
        if reference > 0 and freq.min < (1 - FREQUENCY_DROP_FRACTION) * reference:
            drop = 1 - freq.min / reference
            against = "baseline" if baseline_freq is not None else "highest seen"
            lines.append(
                f"CPU frequency dropped {drop:.0%} during the point: {freq.min:.0f} MHz vs "
                f"{against} {reference:.0f} MHz (thermal or power limit, or a governor "
                "other than 'performance'; see `benchbench doctor`)"
            )
    for gpu, names in sorted(telemetry.gpu_throttle_reasons.items()):
        throttling = throttling_reasons(names)
        if throttling:
            lines.append(f"GPU {gpu} clocks throttled during the point: {', '.join(throttling)}")
    for proc in telemetry.busy_processes:
        if proc.cpu_percent_mean >= BUSY_PROCESS_CPU_PERCENT:
            lines.append(
                f"{BUSY_PROCESS}: {proc.name or '?'} "
                f"(pid {proc.pid}) at {proc.cpu_percent_mean:.0f}% CPU "
                f"(max {proc.cpu_percent_max:.0f}%)"
            )
    for gproc in telemetry.gpu_processes:
        lines.append(
            f"GPU {gproc.gpu} is also used by another process: {gproc.name or '?'} "
            f"(pid {gproc.pid})"
        )
    return lines


def thread_warnings(telemetry: Telemetry, threads: int | None) -> list[str]:
    """A warning when ``threads`` intra-op threads exceed the cores left idle during the point.

    Nothing when the thread count or the idle cores are unknown (a short point, a
    platform without per-core times).
    """
    idle, others = telemetry.idle_cores, telemetry.others_cpu_cores
    if threads is None or idle is None or others is None:
        return []
    line = threads_warning(threads, idle, len(telemetry.cpus), others)
    return [] if line is None else [line]
