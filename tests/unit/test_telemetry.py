"""Telemetry sampling: NVML logic against a fake module, psutil for real (structure only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import psutil
import pynvml
import pytest

from benchbench.core.errors import BundleError, UsageError
from benchbench.machine.sensors import (
    THROTTLE_REASON_BITS,
    CpuReader,
    GpuProcess,
    decode_throttle_reasons,
)
from benchbench.machine.telemetry import (
    MetricSummary,
    ProcessUsage,
    Telemetry,
    TelemetrySampler,
    thread_warnings,
    warnings,
)

NO_SUCH_PID = 999_999_999  # above Linux's pid_max (4,194,304): never a real process


class FakeNvmlError(Exception):
    """Stands for pynvml.NVMLError_NotSupported in the fake."""


@dataclass
class FakeUtilization:
    gpu: int
    memory: int


@dataclass
class FakeProcessInfo:
    pid: int
    usedGpuMemory: int | None


@dataclass
class FakeGpu:
    """Scripted readings, one entry per sample; a missing list means "not supported"."""

    sm_mhz: list[int] = field(default_factory=list)
    mem_mhz: list[int] = field(default_factory=list)
    power_mw: list[int] | None = None
    temp_c: list[int] = field(default_factory=list)
    util: list[FakeUtilization] = field(default_factory=list)
    reasons: list[int] = field(default_factory=list)
    processes: list[FakeProcessInfo] = field(default_factory=list)


class FakeNvml:
    """A stand-in for an initialised ``pynvml`` module; never reported as real data."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.calls: dict[tuple[int, str], int] = {}

    def _next(self, handle: int, name: str, series: list[Any] | None) -> Any:
        if series is None:
            raise FakeNvmlError(f"{name} not supported")
        index = self.calls.get((handle, name), 0)
        self.calls[(handle, name)] = index + 1
        return series[min(index, len(series) - 1)]

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        # NVML's GPU i is "GPU-nvml<i>"; anything else is unknown to NVML.
        if not uuid.startswith("GPU-nvml") or int(uuid[8:]) >= len(self.gpus):
            raise FakeNvmlError("Not Found")
        return int(uuid[8:])

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        gpu = self.gpus[handle]
        if clock == self.NVML_CLOCK_SM:
            return int(self._next(handle, "sm", gpu.sm_mhz))
        return int(self._next(handle, "mem", gpu.mem_mhz))

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self._next(handle, "power", self.gpus[handle].power_mw))

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return int(self._next(handle, "temp", self.gpus[handle].temp_c))

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> FakeUtilization:
        return self._next(handle, "util", self.gpus[handle].util)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return int(self._next(handle, "reasons", self.gpus[handle].reasons))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[FakeProcessInfo]:
        return self.gpus[handle].processes

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[FakeProcessInfo]:
        raise FakeNvmlError("graphics processes not supported")


def _two_fake_gpus() -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                sm_mhz=[1800, 1500, 1700],
                mem_mhz=[9000],
                power_mw=[250_000, 300_000, 200_000],
                temp_c=[70, 80, 75],
                util=[FakeUtilization(99, 40)],
                reasons=[0x0, 0x4, 0x1],
                processes=[
                    FakeProcessInfo(os.getpid(), 1 << 30),
                    FakeProcessInfo(NO_SUCH_PID, 512 << 20),
                ],
            ),
            FakeGpu(sm_mhz=[1200], mem_mhz=[5000], power_mw=None, temp_c=[50], reasons=[0x0]),
        ]
    )


def _sampled(nvml: Any, samples: int = 3, **kwargs: Any) -> Telemetry:
    sampler = TelemetrySampler(nvml=nvml, **kwargs)
    for _ in range(samples):
        sampler.sample(slow=True)
    return sampler.summary()


# --- throttle reason decoding ------------------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0x0, ()),
        (0x1, ("gpu_idle",)),
        (0x4 | 0x40, ("sw_power_cap", "hw_thermal_slowdown")),
        (0x8 | 0x20 | 0x80, ("hw_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")),
        (0x8 | 0x1000 | 0x4000, ("hw_slowdown", "unknown_0x5000")),
    ],
)
def test_decode_throttle_reasons(mask: int, names: tuple[str, ...]) -> None:
    assert decode_throttle_reasons(mask) == names


def test_reason_bits_match_the_installed_pynvml_constants() -> None:
    for bit, name in THROTTLE_REASON_BITS:
        camel = "".join(word.capitalize() for word in name.split("_"))
        assert getattr(pynvml, f"nvmlClocksThrottleReason{camel}") == bit, name


# --- the sampler with a fake NVML ----------------------------------------------------------


def test_gpu_metrics_are_summarised_per_gpu() -> None:
    telemetry = _sampled(_two_fake_gpus())
    assert telemetry.n_samples == 3
    sm = telemetry.metric("gpu0_sm_clock_mhz")
    assert sm is not None
    assert (sm.min, sm.max, sm.n) == (1500, 1800, 3)
    assert sm.mean == pytest.approx(5000 / 3)
    assert telemetry.metric("gpu0_power_w") == MetricSummary(200.0, 250.0, 300.0, 3)
    assert telemetry.metric("gpu0_util_percent") == MetricSummary(99, 99, 99, 3)
    assert telemetry.metric("gpu0_mem_util_percent") == MetricSummary(40, 40, 40, 3)
    assert telemetry.metric("gpu1_temp_c") == MetricSummary(50, 50, 50, 3)


def test_unreadable_gpu_values_are_absent_not_zero() -> None:
    telemetry = _sampled(_two_fake_gpus())
    assert "gpu1_power_w" not in telemetry.metrics  # the fake's GPU 1 has no power sensor
    assert "gpu1_util_percent" not in telemetry.metrics
    assert telemetry.metric("gpu1_sm_clock_mhz") is not None


def test_throttle_reasons_accumulate_over_samples() -> None:
    telemetry = _sampled(_two_fake_gpus())
    assert telemetry.gpu_throttle_reasons == {0: ("gpu_idle", "sw_power_cap"), 1: ()}


def test_other_gpu_processes_are_reported_and_ours_is_not() -> None:
    telemetry = _sampled(_two_fake_gpus())
    assert telemetry.gpu_processes == (GpuProcess(0, NO_SUCH_PID, None, 512 << 20),)


def test_the_gpus_read_are_the_workers_matched_by_uuid_and_named_by_cuda_index() -> None:
    # CUDA_VISIBLE_DEVICES=1: the workers' cuda:0 is NVML's GPU 1. Only it is read, and
    # its metrics are cuda:0's; NVML's GPU 0 (with another process on it) is not the run's.
    telemetry = _sampled(_two_fake_gpus(), gpu_uuids={0: "nvml1"})
    assert sorted(n for n in telemetry.metrics if n.startswith("gpu")) == [
        "gpu0_mem_clock_mhz", "gpu0_sm_clock_mhz", "gpu0_temp_c",
    ]  # fmt: skip
    assert telemetry.metrics["gpu0_sm_clock_mhz"].mean == 1200  # GPU 1's clock
    assert telemetry.gpu_processes == ()
    assert not _sampled(_two_fake_gpus(), gpu_uuids={0: "elsewhere"}).metrics.get(
        "gpu0_sm_clock_mhz"
    )


class BrokenNvml(FakeNvml):
    def nvmlDeviceGetCount(self) -> int:
        raise FakeNvmlError("driver/library version mismatch")


@pytest.mark.parametrize("nvml", [None, FakeNvml([]), BrokenNvml([])])
def test_no_gpu_means_no_gpu_output_and_no_crash(nvml: Any) -> None:
    telemetry = _sampled(nvml)
    assert not any(name.startswith("gpu") for name in telemetry.metrics)
    assert telemetry.gpu_throttle_reasons == {}
    assert telemetry.gpu_processes == ()


# --- warnings ------------------------------------------------------------------------------


def _with(**fields: Any) -> Telemetry:
    return Telemetry(duration_s=1.0, n_samples=10, **fields)


def _freq(low: float, high: float) -> dict[str, MetricSummary]:
    return {"cpu_freq_max_mhz": MetricSummary(low, (low + high) / 2, high, 10)}


def test_frequency_drop_over_ten_percent_warns() -> None:
    (line,) = warnings(_with(metrics=_freq(2000, 3000)))
    assert "CPU frequency dropped 33%" in line and "2000 MHz" in line and "3000 MHz" in line
    assert warnings(_with(metrics=_freq(2800, 3000))) == []  # 6.7 %: within noise


def test_frequency_drop_against_a_baseline() -> None:
    (line,) = warnings(_with(metrics=_freq(3100, 3100)), baseline_freq=3500)
    assert "11%" in line and "baseline 3500 MHz" in line
    assert warnings(_with(metrics=_freq(3300, 3400)), baseline_freq=3500) == []


def test_no_frequency_reading_means_no_frequency_warning() -> None:
    assert warnings(_with(), baseline_freq=3500) == []


def test_gpu_throttling_warns_with_reason_names_but_idle_does_not() -> None:
    (line,) = warnings(
        _with(gpu_throttle_reasons={0: ("gpu_idle",), 1: ("gpu_idle", "hw_thermal_slowdown")})
    )
    assert line == "GPU 1 clocks throttled during the point: hw_thermal_slowdown"


def test_busy_process_warns_with_name_and_cpu_percent() -> None:
    busy = ProcessUsage(4321, "ffmpeg", 55.0, 98.0)
    quiet = ProcessUsage(99, "sshd", 3.0, 9.0)
    (line,) = warnings(_with(busy_processes=(busy, quiet)))
    assert "ffmpeg (pid 4321) at 55% CPU" in line
    assert "sshd" not in line


def test_gpu_used_by_another_process_warns() -> None:
    (line,) = warnings(_with(gpu_processes=(GpuProcess(2, 777, "python", None),)))
    assert line == "GPU 2 is also used by another process: python (pid 777)"


def test_warnings_from_a_throttled_fake_gpu() -> None:
    lines = warnings(_sampled(_two_fake_gpus()))
    assert "GPU 0 clocks throttled during the point: sw_power_cap" in lines
    assert f"GPU 0 is also used by another process: ? (pid {NO_SUCH_PID})" in lines


# --- serialisation ----------------------------------------------------------------------------


def test_to_dict_is_json_safe_and_round_trips() -> None:
    telemetry = _sampled(_two_fake_gpus())
    telemetry = Telemetry(
        duration_s=telemetry.duration_s,
        n_samples=telemetry.n_samples,
        metrics=telemetry.metrics,
        busy_processes=(ProcessUsage(12, None, 20.0, 40.0),),
        gpu_throttle_reasons=telemetry.gpu_throttle_reasons,
        gpu_processes=telemetry.gpu_processes,
        sampler_cpu_s=0.25,
    )
    document = json.loads(json.dumps(telemetry.to_dict(), allow_nan=False))
    assert Telemetry.from_dict(document) == telemetry


def test_from_dict_rejects_a_malformed_document() -> None:
    document = _with().to_dict()
    del document["metrics"]
    with pytest.raises(BundleError, match=r"telemetry document is malformed.*metrics"):
        Telemetry.from_dict(document)


def test_sampler_cpu_fraction() -> None:
    assert _with(sampler_cpu_s=0.02).sampler_cpu_fraction == pytest.approx(0.02)
    assert _with().sampler_cpu_fraction is None


def test_bad_intervals_are_rejected() -> None:
    with pytest.raises(UsageError, match="interval_s=0"):
        TelemetrySampler(interval_s=0, nvml=None)
    with pytest.raises(UsageError, match=r"slow_interval_s=0\.01"):
        TelemetrySampler(interval_s=0.05, slow_interval_s=0.01, nvml=None)


# --- real psutil (structure only: this machine's values are whatever they are) --------------


def test_real_sampler_thread_produces_a_well_formed_summary() -> None:
    with TelemetrySampler(interval_s=0.01, slow_interval_s=0.05, nvml=None) as sampler:
        time.sleep(0.15)
    telemetry = sampler.telemetry
    assert telemetry is not None
    assert telemetry.n_samples >= 2  # one at start, one at stop, whatever the timing
    assert telemetry.sampler_cpu_s is not None and telemetry.sampler_cpu_s >= 0
    assert "load_1m" in telemetry.metrics
    for name, summary in telemetry.metrics.items():
        assert summary.min <= summary.mean <= summary.max, name
        assert 1 <= summary.n <= telemetry.n_samples, name
        if name.endswith("_mhz"):
            assert summary.min > 0, name  # unreadable is absent, never zero
    assert all(proc.pid != os.getpid() for proc in telemetry.busy_processes)
    json.dumps(telemetry.to_dict(), allow_nan=False)


def test_a_busy_child_process_is_reported() -> None:
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        # A large top-N: other jobs on this shared machine may be busier than the child.
        sampler = TelemetrySampler(nvml=None, top_processes=1000)
        sampler.sample(slow=True)  # primes the per-process CPU counters
        time.sleep(0.3)
        sampler.sample(slow=True)
    finally:
        child.kill()
        child.wait()
    busy = {proc.pid: proc for proc in sampler.summary().busy_processes}
    assert child.pid in busy
    name = busy[child.pid].name
    assert name is not None and "python" in name.lower()


def test_slow_sources_outside_the_thread_are_read_at_start_and_stop_only():
    import time

    from benchbench.machine.telemetry import TelemetrySampler

    sampler = TelemetrySampler(interval_s=0.01, nvml=None, slow_in_thread=False)
    slow_calls: list[bool | None] = []
    original = sampler.sample

    def recording(slow: bool | None = None) -> None:
        slow_calls.append(slow)
        original(slow)

    sampler.sample = recording  # type: ignore[method-assign]
    with sampler:
        time.sleep(0.1)
    assert slow_calls[0] is True and slow_calls[-1] is True
    assert all(s is False for s in slow_calls[1:-1])
    assert len(slow_calls) >= 4


# --- CPU time of every core and of the measured process (fake readings) -------------------


class FakeCpu:
    """Scripted ``(busy_s, idle_s)`` per core and measured-process CPU seconds, per read."""

    def __init__(
        self,
        cores: list[list[tuple[float, float]]],
        measured: list[float | None],
        affinity: tuple[int, ...] | None = (0, 1),
    ) -> None:
        self.cores, self.measured, self.affinity = cores, measured, affinity
        self.pids: list[int] = []

    def reader(self) -> CpuReader:
        return CpuReader(
            per_cpu=lambda: self.cores.pop(0),
            process_cpu_s=self._measured,
            process_cpus=lambda pid: self.affinity,
        )

    def _measured(self, pid: int) -> float | None:
        self.pids.append(pid)
        return self.measured.pop(0)


def _cpu_sampled(fake: FakeCpu, pid: int | None = 4242) -> Telemetry:
    sampler = TelemetrySampler(
        interval_s=60.0,  # the thread takes its first sample, then waits for the stop
        slow_interval_s=60.0,
        nvml=None,
        slow_in_thread=False,
        measured_pid=pid,
        cpu=fake.reader(),
    )
    sampler.start()
    return sampler.stop()


# Core 0: the worker alone (busy 1.9 s of 2); core 1: another process 1.5 s of 2.
_LOADED = [[(100.0, 500.0), (200.0, 400.0)], [(101.9, 500.1), (201.5, 400.5)]]


def test_per_core_idle_share_and_the_measured_process_cpu_time() -> None:
    fake = FakeCpu([list(c) for c in _LOADED], [7.0, 9.0])
    telemetry = _cpu_sampled(fake)
    assert fake.pids == [4242, 4242]
    assert telemetry.cpus == (0, 1)
    assert telemetry.cpu_idle_share == pytest.approx({0: 0.05, 1: 0.25})
    assert telemetry.measured_cpu_s == pytest.approx(2.0)
    assert telemetry.cpu_window_s == pytest.approx(2.0)
    # busy 0.95 + 0.75 cores, the worker used 1.0: others 0.7 cores, one core taken
    assert telemetry.others_cpu_cores == pytest.approx(0.7)
    assert telemetry.idle_cores == 1


def test_thread_warning_fires_when_threads_exceed_the_idle_cores() -> None:
    telemetry = _cpu_sampled(FakeCpu([list(c) for c in _LOADED], [7.0, 9.0]))
    (line,) = thread_warnings(telemetry, threads=2)
    assert line.startswith("2 torch threads but only 1 of 2 cores were idle")
    assert "other processes used 0.7 cores" in line and "--threads 1" in line
    assert thread_warnings(telemetry, threads=1) == []
    assert thread_warnings(telemetry, threads=None) == []


def test_no_thread_warning_on_a_quiet_machine() -> None:
    quiet = [[(100.0, 500.0), (200.0, 400.0)], [(101.9, 500.1), (200.1, 401.9)]]
    telemetry = _cpu_sampled(FakeCpu(quiet, [7.0, 9.0]))
    assert telemetry.others_cpu_cores == pytest.approx(0.0, abs=1e-9)
    assert telemetry.idle_cores == 2
    assert thread_warnings(telemetry, threads=2) == []


def test_only_the_measured_process_cores_count() -> None:
    # Pinned to core 0: the other process on core 1 leaves core 0 idle.
    fake = FakeCpu([list(c) for c in _LOADED], [7.0, 8.9], affinity=(0,))
    telemetry = _cpu_sampled(fake)
    assert telemetry.cpus == (0,)
    assert telemetry.idle_cores == 1
    assert thread_warnings(telemetry, threads=1) == []
    (line,) = thread_warnings(telemetry, threads=2)
    assert "only 1 of 1 cores" in line


def test_idle_cores_are_unknown_without_the_readings_they_need() -> None:
    brief = [[(100.0, 500.0), (200.0, 400.0)], [(100.09, 500.01), (200.05, 400.05)]]
    short = _cpu_sampled(FakeCpu(brief, [7.0, 7.1]))
    assert short.cpu_window_s == pytest.approx(0.1)  # under MIN_CPU_WINDOW_S: 10 ms ticks
    assert short.cpu_idle_share  # still recorded
    assert short.idle_cores is None and thread_warnings(short, threads=64) == []
    gone = _cpu_sampled(FakeCpu([list(c) for c in _LOADED], [7.0, None]))
    assert gone.measured_cpu_s is None and gone.idle_cores is None
    no_pid = _cpu_sampled(FakeCpu([list(c) for c in _LOADED], []), pid=None)
    assert no_pid.cpus == () and no_pid.idle_cores is None
    assert no_pid.cpu_idle_share == pytest.approx({0: 0.05, 1: 0.25})
    no_cores = _cpu_sampled(FakeCpu([[], []], [7.0, 9.0]))
    assert no_cores.cpu_idle_share == {} and no_cores.idle_cores is None


def test_cpu_fields_round_trip_and_old_documents_still_read() -> None:
    telemetry = _cpu_sampled(FakeCpu([list(c) for c in _LOADED], [7.0, 9.0]))
    document = json.loads(json.dumps(telemetry.to_dict(), allow_nan=False))
    assert document["cpus"] == [0, 1]
    assert document["cpu_idle_share"] == pytest.approx({"0": 0.05, "1": 0.25})
    assert document["idle_cores"] == 1
    assert document["others_cpu_cores"] == pytest.approx(0.7)
    assert Telemetry.from_dict(document) == telemetry
    old = {k: v for k, v in document.items() if k not in ("cpus", "cpu_idle_share",
           "measured_cpu_s", "cpu_window_s", "others_cpu_cores", "idle_cores")}  # fmt: skip
    before = Telemetry.from_dict(old)
    assert before.cpus == () and before.cpu_idle_share == {} and before.idle_cores is None


# --- whose a process is: injected process tables ---------------------------------------------


class FakeTable:
    """A machine's processes: pid -> (parent pid, name, CPU % at each scan after the first)."""

    def __init__(self, procs: dict[int, tuple[int, str, list[float]]]) -> None:
        self.procs = procs
        self.scans: dict[int, int] = {}

    def pids(self) -> list[int]:
        return list(self.procs)

    def cpu_percent(self, pid: int) -> float | None:
        seen = self.scans.get(pid, 0)
        self.scans[pid] = seen + 1
        return None if seen == 0 else self.procs[pid][2][seen - 1]

    def name(self, pid: int) -> str:
        return self.procs[pid][1]

    def ppid(self, pid: int) -> int:
        return self.procs[pid][0]


RUNNER = 500
#: An idle machine but for the benchmark's own processes, a kernel worker thread and one
#: real neighbour. CPU figures are injected; no clock is read.
MACHINE = {
    1: (0, "systemd", [0.0, 0.0]),
    2: (0, "kthreadd", [3.0, 3.0]),
    17: (2, "kworker/0:1-events", [11.0, 12.0]),
    RUNNER: (1, "benchbench", [30.0, 30.0]),
    501: (RUNNER, "python3", [15.0, 15.0]),  # the zygote
    502: (501, "python3", [99.0, 99.0]),  # a worker it forked (not the measured one)
    503: (RUNNER, "valgrind.bin", [60.0, 60.0]),  # the instrumented worker
    6750: (1, "python3", [81.0, 79.0]),  # another user's job
}


def _scanned(**kwargs: Any) -> Telemetry:
    sampler = TelemetrySampler(nvml=None, processes=FakeTable(MACHINE), top_processes=100, **kwargs)
    for _ in range(3):  # primes, then two readings
        sampler.sample(slow=True)
    return sampler.summary()


def test_kernel_threads_and_the_runners_processes_are_not_another_process() -> None:
    telemetry = _scanned(exclude_pids={RUNNER}, own_root=RUNNER)
    assert [(p.pid, p.name) for p in telemetry.busy_processes] == [(6750, "python3")]
    assert warnings(telemetry) == [
        "another process was busy during the point: python3 (pid 6750) at 80% CPU (max 81%)"
    ]


def test_without_a_root_only_kernel_threads_are_left_out() -> None:
    # doctor and a plain sampler: a process's children are other processes to them.
    busy = {p.pid for p in _scanned(exclude_pids={RUNNER}).busy_processes}
    assert busy == {501, 502, 503, 6750}


def test_off_linux_no_pid_is_taken_for_kthreadd() -> None:
    from benchbench.machine.sensors import ProcessScanner

    scanner = ProcessScanner(frozenset(), table=FakeTable(MACHINE), kthreadd_pid=None)
    for _ in range(2):
        scanner.scan()
    assert {2, 17} <= {p.pid for p in scanner.busiest(100)}


def test_a_process_gone_mid_scan_is_skipped() -> None:
    table = FakeTable({6750: (1, "python3", [50.0]), 6751: (1, "gone", [50.0])})

    def ppid(pid: int) -> int:
        if pid == 6751:
            raise psutil.NoSuchProcess(pid)
        return 1

    table.ppid = ppid  # type: ignore[method-assign]
    sampler = TelemetrySampler(nvml=None, processes=table, own_root=RUNNER)
    sampler.sample(slow=True)
    sampler.sample(slow=True)
    assert [p.pid for p in sampler.summary().busy_processes] == [6750]


def test_a_gpu_process_of_the_runner_is_not_another_process() -> None:
    # ab's other side: a worker of the same runner with a context on the same GPU.
    machine = {**MACHINE, NO_SUCH_PID: (501, "python3", [0.0, 0.0])}  # the zygote's child
    ours = _sampled(_two_fake_gpus(), processes=FakeTable(machine), own_root=RUNNER)
    assert ours.gpu_processes == ()
    theirs = _sampled(_two_fake_gpus(), processes=FakeTable(machine))
    assert [p.pid for p in theirs.gpu_processes] == [NO_SUCH_PID]
