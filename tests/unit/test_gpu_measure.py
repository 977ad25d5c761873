"""Host time beside event time, launch-bound, the SM clock guard and CUDA graphs in a
point, on injected fakes of torch.cuda and NVML (no GPU result is claimed)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from benchbench.core.values import Point, Result
from benchbench.machine.nvml import ClockReading
from benchbench.measure import point as point_module
from benchbench.measure.cuda_graph import GraphCaptureError
from benchbench.measure.gpu import (
    LAUNCH_BOUND_SHARE,
    ClockGuard,
    host_extra,
    launch_facts,
    launch_share,
    merge_extra,
)
from benchbench.measure.pipeline import clock_guard, ok_result
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Block, Measured, Policy, Subject, measure
from benchbench.measure.timers import CudaTimer, MpsTimer
from benchbench.run.merge import merge
from benchbench.suite.declare import Suite, Variant
from tests.unit.test_devices import FakeCuda

CUDA = Point("s", "w", "v", 64, (64,), "float32", "cuda:0")
CPU = Point("s", "w", "v", 64, (64,), "float32", "cpu")


def test_cuda_timer_notes_the_host_time_each_block_took_to_enqueue() -> None:
    cuda = FakeCuda()
    now = [0]

    def clock() -> int:
        return now[0]

    def loop(n: int) -> None:
        now[0] += 3_000 * n  # 3 µs of host time per launch
        cuda.now_ms += 0.001 * n  # 1 µs of device time per call

    timer = CudaTimer(cuda, clock=clock)
    device = timer.measure([Block(loop, 2), Block(loop, 5)])
    assert device == pytest.approx([2e-6, 5e-6])
    assert timer.host_block_s == pytest.approx([6e-6, 15e-6])


def test_host_time_per_call_is_recorded_per_sample() -> None:
    # 10 calls per sample; host 12 µs per call.
    extra = host_extra([1e-4] * 3, [1.2e-4, 1.1e-4, 1.3e-4], 10)
    assert extra["host_samples_s"] == pytest.approx([1.2e-5, 1.1e-5, 1.3e-5])
    assert extra["host_s_per_call"] == pytest.approx(1.2e-5)
    # Host samples that do not pair with the samples record nothing.
    assert host_extra([1.0, 1.0], [1.0], 1) == {}


def test_launch_facts_flag_a_point_whose_time_is_mostly_launch_gap() -> None:
    extra, warnings = launch_facts(0.85)
    assert extra == {"launch_overhead": 0.85, "launch_bound": True}
    assert len(warnings) == 1 and warnings[0].startswith("launch-bound: 85% of each call")
    assert launch_facts(LAUNCH_BOUND_SHARE * 0.99)[0]["launch_bound"] is False
    assert launch_facts(LAUNCH_BOUND_SHARE)[0]["launch_bound"] is True
    assert launch_facts(None) == ({"launch_overhead": None, "launch_bound": False}, [])
    assert launch_share(10.0, 1.5) == pytest.approx(0.85)
    assert launch_share(10.0, 11.0) == 0.0  # blocked slower (noise): no gap, not negative


def test_ok_result_records_host_facts_for_cuda_and_none_for_cpu() -> None:
    measured = Measured(
        "v",
        (2e-3,) * 10,
        100,
        converged=True,
        host_samples_s=(3e-3,) * 10,
        discarded_samples=4,
        device_extra={"launch_overhead": 0.9, "launch_bound": True},
        device_warnings=("launch-bound: 90% of each call's time ...",),
    )
    cuda = ok_result(CUDA, measured, Policy())
    assert len(cuda.extra["host_samples_s"]) == len(cuda.samples_s)
    assert cuda.extra["host_s_per_call"] == pytest.approx(3e-5)
    assert cuda.extra["launch_bound"] is True and cuda.extra["discarded_samples"] == 4
    assert any(w.startswith("launch-bound") for w in cuda.warnings)
    cpu = ok_result(CPU, Measured("v", (2e-3,) * 10, 100, converged=True), Policy())
    assert "launch_bound" not in cpu.extra and "host_samples_s" not in cpu.extra


def _readings(*mhz: int, reference: int = 1980, mask: int = 0):
    values = iter(mhz)

    def read() -> ClockReading | None:
        return ClockReading(next(values), reference, mask)

    return read


def test_clock_guard_retakes_a_low_clock_after_a_growing_back_off() -> None:
    slept: list[float] = []
    guard = ClockGuard(_readings(1980, 1000, 1200, 1900), sleep=slept.append, backoff_s=0.05)
    assert guard.retake() is False  # full clock: kept
    assert guard.retake() is True  # 1000 MHz < 75 % of 1980 (1485): retaken
    assert guard.retake() is True
    assert guard.retake() is False  # recovered
    assert slept == [0.05, 0.1]
    assert guard.warnings() == []


def test_clock_guard_keeps_the_batch_and_warns_after_the_last_retake() -> None:
    slept: list[float] = []
    guard = ClockGuard(
        _readings(900, 900, 900, 900, 900, mask=0x20),
        sleep=slept.append,
        max_retakes=3,
    )
    assert [guard.retake() for _ in range(5)] == [True, True, True, False, False]
    assert len(slept) == 3  # then no more retakes for this point: it stays throttled
    (warning,) = guard.warnings()
    assert warning.startswith("GPU clocks throttled: 2 batch(es) kept at down to 900 MHz")
    assert "1980 MHz application clock" in warning and "sw_thermal_slowdown" in warning
    assert guard.extra(30) == {
        "discarded_samples": 30,
        "throttle_reasons": ["sw_thermal_slowdown"],
        "sm_clock_mhz": 900,
    }


def test_clock_guard_keeps_batches_it_cannot_judge() -> None:
    assert ClockGuard(lambda: None).retake() is False
    assert ClockGuard(_readings(10, reference=0)).retake() is False  # no reference clock


class FlakyGuard:
    """Discards the first ``bad`` batches."""

    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.asked = 0

    def retake(self) -> bool:
        self.asked += 1
        return self.asked <= self.bad


def test_the_engine_drops_discarded_batches_and_counts_them() -> None:
    cuda = FakeCuda()
    timer = CudaTimer(cuda)

    def loop(n: int) -> None:
        cuda.now_ms += 0.5 * n

    policy = Policy(min_samples=10, min_time_s=0.0, max_time_s=1.0, rounds_per_batch=10)
    guard = FlakyGuard(bad=2)
    (m,) = measure([Subject("k", loop)], timer, policy, guard=guard)
    assert m.discarded_samples == 20  # two batches of 10 thrown away
    assert len(m.samples_s) >= 10 and len(m.host_samples_s) == len(m.samples_s)
    assert guard.asked >= 3


def test_clock_guard_for_a_cuda_device_reads_the_gpu_with_its_uuid() -> None:
    class Nvml:
        NVML_CLOCK_SM = 1

        def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
            raise AssertionError("an NVML index is not a CUDA index")

        def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
            return {"GPU-1111": "gpu1", "GPU-0000": "gpu0"}[uuid]

        def nvmlDeviceGetApplicationsClock(self, handle: str, kind: int) -> int:
            return 1755

        def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
            return 1000 if handle == "gpu1" else 1755

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: str) -> int:
            return 0x4

    # cuda:1 is NVML's GPU 1 here only because its torch UUID says so.
    guard = clock_guard("cuda:1", Nvml(), uuid="1111")
    assert guard is not None
    assert guard.retake() is True  # GPU 1 is read, and it is low
    assert guard.reasons == {"sw_power_cap": None}
    assert clock_guard("cpu", Nvml()) is None


def test_mps_overhead_is_the_synchronize_bracketed_empty_block() -> None:
    now = [0]
    syncs: list[int] = []

    def synchronize() -> None:
        syncs.append(1)
        now[0] += 20_000  # 20 µs per synchronize, the part a bare clock pair would miss

    from types import SimpleNamespace

    timer = MpsTimer(SimpleNamespace(synchronize=synchronize), clock=lambda: now[0])
    assert timer.overhead_s(pairs=5) == pytest.approx(20e-6)
    assert len(syncs) == 10


def test_the_mps_overhead_sets_the_calibration_target() -> None:
    class SlowSyncTimer:
        """Blocks cost 1 µs per call; the timer's own overhead is 10 µs."""

        name = "fake"

        def __init__(self) -> None:
            self.calls: list[int] = []

        def sync(self) -> None:
            return None

        def overhead_s(self) -> float:
            return 1e-5

        def measure(self, blocks):  # type: ignore[no-untyped-def]
            self.calls.extend(b.calls for b in blocks)
            return [1e-6 * b.calls for b in blocks]

    timer = SlowSyncTimer()
    policy = Policy(min_samples=2, min_time_s=0.0, max_time_s=0.01, warmup_min_s=0.0)
    (m,) = measure([Subject("k", lambda n: None)], timer, policy)
    # Target = 10 µs / 0.1 % = 10 ms: 10,000 calls of 1 µs, not the 1 ms floor.
    assert m.calls_per_sample * 1e-6 >= 1e-2


def _result(host: list[float], samples: list[float], extra: dict | None = None) -> Result:
    return Result(
        point=CUDA,
        status="ok",
        samples_s=tuple(samples),
        calls_per_sample=1,
        converged=True,
        warnings=("launch-bound: stale",),
        extra={"host_samples_s": host, "discarded_samples": 2, "throttle_reasons": ["x"]}
        | (extra or {}),
    )


def test_rounds_merge_concatenates_host_samples_and_takes_the_median_launch_share() -> None:
    first = _result([9e-6] * 3, [1e-5] * 3, {"launch_overhead": 0.9})
    second = _result([1e-6] * 4, [1e-5] * 4, {"throttle_reasons": ["y"], "launch_overhead": 0.1})
    third = _result([1e-6] * 4, [1e-5] * 4, {"launch_overhead": 0.2})
    merged = merge([first, second, third], None)
    assert len(merged.extra["host_samples_s"]) == len(merged.samples_s) == 11
    assert merged.extra["host_s_per_call"] == pytest.approx(1e-6)
    assert merged.extra["launch_overhead"] == pytest.approx(0.2)
    assert merged.extra["launch_bound"] is False
    assert not any(w.startswith("launch-bound") for w in merged.warnings)
    assert merged.extra["discarded_samples"] == 6
    assert merged.extra["throttle_reasons"] == ["x", "y"]
    extra, warnings = merge_extra({}, [], [{"launch_overhead": 0.7}], 1.0)
    assert extra["launch_bound"] is True and warnings[0].startswith("launch-bound")


def _graph_workload():  # type: ignore[no-untyped-def]
    suite = Suite("s")
    return suite.workload(
        "w",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[Variant("sqrt", torch.sqrt, cuda_graph=True)],
        sizes=[64],
    )


def test_a_graph_point_records_calls_per_replay_and_counts_calls(monkeypatch) -> None:
    captured: list[int] = []

    def fake_graph_subject(
        subject: Subject, cuda: object, cold: bool, copies: int
    ) -> tuple[Subject, int]:
        captured.append(1)
        return Subject(subject.name, lambda n: subject.loop(4 * n), subject.pre), 4

    # The point runs on the CPU; only the graph decision and capture are faked.
    monkeypatch.setattr(point_module, "graph_mode", lambda *a, **k: (True, None))
    monkeypatch.setattr(point_module, "graph_subject", fake_graph_subject)
    workload = _graph_workload()
    (point,) = workload.points()
    result = measure_point(workload, point, Options(policy=Policy(max_time_s=0.01)))
    assert result.status == "ok" and captured == [1]
    assert result.extra["cuda_graph"] == {"calls_per_replay": 4}
    assert result.calls_per_sample % 4 == 0


def test_a_failed_capture_skips_the_point_with_the_reason(monkeypatch) -> None:
    def failing(subject: Subject, cuda: object, cold: bool, copies: int) -> tuple[Subject, int]:
        raise GraphCaptureError("operation not permitted when stream is capturing")

    monkeypatch.setattr(point_module, "graph_mode", lambda *a, **k: (True, None))
    monkeypatch.setattr(point_module, "graph_subject", failing)
    workload = _graph_workload()
    (point,) = workload.points()
    result = measure_point(workload, point, Options(policy=Policy(max_time_s=0.01)))
    assert result.status == "skipped"
    assert result.reason == (
        "CUDA graph capture failed: operation not permitted when stream is capturing"
    )


def test_cuda_graph_on_a_cpu_point_is_ignored_with_a_note() -> None:
    workload = _graph_workload()
    (point,) = workload.points()
    result = measure_point(workload, point, Options(policy=Policy(max_time_s=0.01)))
    assert result.status == "ok" and "cuda_graph" not in result.extra
    assert result.extra["cuda_graph_note"] == "CUDA graph not used: cpu is not a CUDA device"


def test_run_cuda_graph_gives_cuda_points_their_own_history() -> None:
    from pathlib import Path

    from benchbench.run.runner import RunConfig, plan
    from benchbench.suite.load import Selection

    tiny = (Path(__file__).parents[1] / "integration" / "suites" / "tiny.py",)
    devices = Selection(devices=("cpu", "cuda"))
    eager = plan(RunConfig(suites=tiny, selection=devices))
    graph = plan(RunConfig(suites=tiny, selection=devices, policy=Policy(cuda_graph=True)))
    assert len(eager) == len(graph) > 0
    for planned_before, planned_after in zip(eager, graph, strict=True):
        before, after = planned_before.point, planned_after.point
        same = planned_before.benchmark_id == planned_after.benchmark_id
        if before.device == "cpu":
            assert after == before and same
        else:
            assert after.params == (*before.params, ("cuda_graph", True)) and not same
            assert after.label.endswith("cuda_graph=True)")


def _busy_gpu_point(monkeypatch):  # type: ignore[no-untyped-def]
    """A CUDA point timed through the pipeline on the asynchronous fake GPU, its clock
    guard on a fake NVML whose SM clock is 1980 MHz under load and 345 idle."""
    from benchbench.measure import pipeline
    from tests.unit.fake_cuda import FakeGpu
    from tests.unit.fakes import BusyClockNvml

    gpu = FakeGpu()
    nvml = BusyClockNvml(gpu, uuids=("GPU-0000",))
    guard = clock_guard("cuda:0", nvml, uuid="0000")
    timer = CudaTimer(gpu, clock=gpu.clock)
    monkeypatch.setattr(pipeline.timers, "timer_for", lambda device, torch: timer)
    monkeypatch.setattr(pipeline, "clock_guard", lambda device: guard)
    monkeypatch.setattr(pipeline, "device_checks", lambda subject, measured, device: measured)

    def loop(n: int) -> None:
        for _ in range(n):
            gpu.launch(100_000)  # 100 µs kernels, queued: the launch returns at once

    policy = Policy(min_samples=10, min_time_s=0.0, max_time_s=0.05, warmup_min_s=0.0)
    used, (measured,) = pipeline.time_subjects(CUDA, [Subject("k", loop)], policy)
    return nvml, guard, used, measured


def test_the_clock_guard_reads_the_clock_while_the_gpu_runs_the_batch(monkeypatch) -> None:
    nvml, guard, policy, measured = _busy_gpu_point(monkeypatch)
    # Every read came while the batch was queued: the load clock, never gpu_idle. Read
    # after the synchronize (as before), every read was 345 MHz with gpu_idle.
    assert nvml.reads and set(nvml.reads) == {"busy"}
    assert guard.reasons == {} and measured.discarded_samples == 0
    assert measured.device_extra["sm_clock_mhz"] == 1980
    per_call = measured.stats.median_s
    assert per_call == pytest.approx(1e-4, rel=0.05)
    # Cycles per call: the event time per call at 1980 MHz (~198,000 for 100 µs).
    result = ok_result(CUDA, measured, policy)
    assert result.extra["cycles_per_call"] == pytest.approx(per_call * 1980e6)


def test_a_clock_read_from_an_idle_gpu_is_ignored_not_judged() -> None:
    from tests.unit.fake_cuda import FakeGpu
    from tests.unit.fakes import BusyClockNvml

    gpu = FakeGpu()
    guard = clock_guard("cuda:0", BusyClockNvml(gpu), uuid="0000")
    assert guard is not None
    gpu.launch(1_000_000)
    gpu.synchronize()  # read after the synchronize: idle, 345 MHz, gpu_idle
    assert guard.retake() is False  # not retaken as "throttled" ...
    assert guard.reasons == {} and guard.extra(0) == {  # ... nor recorded
        "discarded_samples": 0,
        "throttle_reasons": [],
    }
    gpu.launch(1_000_000)
    guard.note()  # read while the kernel is queued
    gpu.synchronize()
    assert guard.retake() is False and guard.extra(0)["sm_clock_mhz"] == 1980


def test_a_clock_held_low_on_purpose_is_kept_and_a_power_cap_dip_retaken() -> None:
    # Locked to a 1125 MHz base clock (57 % of 1980): NVML names no throttle, kept.
    held = ClockGuard(_readings(1125, mask=0x2), sleep=lambda s: None)
    assert held.retake() is False
    dipped = ClockGuard(_readings(1125, mask=0x4), sleep=lambda s: None)
    assert dipped.retake() is True  # sw_power_cap: a dip, retaken


def test_the_merged_point_keeps_the_median_clock_and_its_cycles() -> None:
    extra, _ = merge_extra({}, [], [{"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1900}], 1e-5)
    assert extra["sm_clock_mhz"] == 1940
    assert extra["cycles_per_call"] == pytest.approx(1e-5 * 1940e6)
    assert "cycles_per_call" not in merge_extra({}, [], [{}], 1e-5)[0]


def test_without_an_nvml_clock_the_cycles_come_from_the_sleep_kernels_clock(monkeypatch) -> None:
    from benchbench.measure import pipeline

    monkeypatch.setattr(pipeline, "_SLEEP_RATE", {})  # no rate another test measured
    measured = Measured("v", (1e-3,) * 10, 100, converged=True)  # 10 µs per call
    assert "cycles_per_call" not in ok_result(CUDA, measured, Policy()).extra
    monkeypatch.setitem(pipeline._SLEEP_RATE, CUDA.device, 1.98e9)
    extra = ok_result(CUDA, measured, Policy()).extra
    assert extra["sm_clock_from"] == "torch.cuda._sleep" and extra["sm_clock_mhz"] == 1980
    assert extra["cycles_per_call"] == pytest.approx(1e-5 * 1.98e9)
    nvml = replace(measured, device_extra={"sm_clock_mhz": 1755})
    extra = ok_result(CUDA, nvml, Policy()).extra  # NVML's read under load comes first
    assert extra["sm_clock_from"] == "nvml"
    assert extra["cycles_per_call"] == pytest.approx(1e-5 * 1755e6)
