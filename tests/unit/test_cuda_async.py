"""The engine's CUDA paths on a fake GPU that runs asynchronously (tests/unit/fake_cuda.py):
the bugs that a fake returning at once would hide."""

from __future__ import annotations

import pytest

from benchbench.measure.policy import Policy, Subject, measure, warm_up
from benchbench.measure.timers import CudaTimer
from tests.unit.fake_cuda import FakeGpu


@pytest.fixture(autouse=True)
def _no_sleep_rate_left(monkeypatch):
    """The fake GPU's sleep rate stays in these tests, not in the process's cache."""
    from benchbench.measure import pipeline

    monkeypatch.setattr(pipeline, "_SLEEP_RATE", {})


def _kernels(gpu: FakeGpu, kernel_ns: float) -> Subject:
    def loop(calls: int) -> None:
        for _ in range(calls):
            gpu.launch(kernel_ns)

    return Subject("kernel", loop)


def test_the_fake_refuses_events_the_device_has_not_reached():
    gpu = FakeGpu()
    start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
    start.record()
    gpu.launch(1e6)
    end.record()
    with pytest.raises(RuntimeError, match="not ready"):
        start.elapsed_time(end)
    gpu.synchronize()
    assert start.elapsed_time(end) == pytest.approx(1.0, rel=0.01)


@pytest.mark.parametrize("kernel_ms", [0.01, 1.0, 10.0, 100.0])
def test_warm_up_on_cuda_stays_within_its_design_however_long_the_kernel(kernel_ms):
    """Chunks grow on device time, not on launch time: the host queues ~1,024 launches
    in a few ms, and without a synchronize per chunk the warm-up then waited for all of
    them (~2 s for a 1 ms kernel, ~20 s for 10 ms)."""
    gpu = FakeGpu()
    policy = Policy()
    info = warm_up(_kernels(gpu, kernel_ms * 1e6), CudaTimer(gpu, gpu.clock), policy, gpu.clock)
    wall_s = info["time_s"]
    assert wall_s >= min(policy.warmup_min_s, 10 * kernel_ms * 1e-3)
    # The design: at least 10 calls or 0.1 s, capped near 1 s; one call may overrun it.
    assert wall_s <= policy.warmup_max_s + 2 * kernel_ms * 1e-3 + 0.01
    assert info["calls"] >= 1


def test_cuda_samples_read_the_device_time_of_back_to_back_kernels():
    gpu = FakeGpu()
    (result,) = measure(
        [_kernels(gpu, 200_000)], CudaTimer(gpu, gpu.clock), Policy(max_time_s=0.5), gpu.clock
    )
    assert result.stats.median_s == pytest.approx(200e-6, rel=0.01)


def test_a_lockstep_side_on_cuda_hands_the_turn_over_only_once_its_kernels_finished():
    """ab's two sides take turns on one GPU: a turn passed while this side's batch is
    still queued lets both sides' kernels run at once."""
    from benchbench.measure.pipeline import gated

    gpu = FakeGpu()
    queued_at_turn: list[int] = []

    def gate() -> None:
        gpu.retire()
        queued_at_turn.append(len(gpu.pending))

    side = gated(_kernels(gpu, 200_000), gate, "cuda:0", lambda _device: gpu.synchronize())
    policy = Policy(max_time_s=0.2, rounds_per_batch=10)
    measure([side], CudaTimer(gpu, gpu.clock), policy, gpu.clock)
    assert len(queued_at_turn) > 10
    assert set(queued_at_turn) == {0}
    on_cpu: list[int] = []
    cpu_side = gated(_kernels(gpu, 1_000), lambda: on_cpu.append(1), "cpu", lambda _d: 1 / 0)
    measure([cpu_side], CudaTimer(gpu, gpu.clock), Policy(max_time_s=0.01), gpu.clock)
    assert on_cpu  # the CPU never synchronizes (the synchronize given here would raise)


@pytest.mark.parametrize(
    ("kernel_us", "launch_us", "bound"),
    [
        (1.0, 5.0, True),  # a tiny kernel: the GPU waits on the host between calls
        (10.0, 5.0, False),  # device-bound: the queue fills, the host waits on the device
        (200.0, 5.0, False),
    ],
)
def test_the_launch_share_tells_launch_gaps_from_a_full_queue(kernel_us, launch_us, bound):
    """Host time beside device time cannot tell the two apart once the launch queue
    fills (host waits on device: host ≈ device); the same block queued behind a blocking
    kernel can."""
    from benchbench.measure.pipeline import device_checks

    gpu = FakeGpu(launch_ns=launch_us * 1e3)
    subject = _kernels(gpu, kernel_us * 1e3)
    (measured,) = measure([subject], CudaTimer(gpu, gpu.clock), Policy(max_time_s=0.3), gpu.clock)
    result = device_checks(subject, measured, "cuda:0", cuda=gpu, clock=gpu.clock)
    share = result.device_extra["launch_overhead"]
    assert result.device_extra["untimed_share"] == 0.0
    assert result.device_extra["launch_bound"] is bound
    expected = max(0.0, 1 - kernel_us / max(kernel_us, launch_us))
    assert share == pytest.approx(expected, abs=0.05)
    assert any(w.startswith("launch-bound") for w in result.device_warnings) is bound


def test_no_launch_share_where_a_block_needs_its_pre():
    from benchbench.measure.pipeline import device_checks

    gpu = FakeGpu()
    flushed = Subject("kernel", _kernels(gpu, 1e3).loop, pre=lambda: gpu.launch(50e3))
    (measured,) = measure([flushed], CudaTimer(gpu, gpu.clock), Policy(max_time_s=0.05), gpu.clock)
    result = device_checks(flushed, measured, "cuda:0", cuda=gpu)
    assert result.device_extra == {"launch_overhead": None, "launch_bound": False}


def test_work_put_on_another_stream_is_named_as_untimed():
    """The events time the current stream; kernels a workload puts on its own stream
    escape them, and only a device-wide synchronize waits for them."""
    from benchbench.measure.pipeline import device_checks

    gpu = FakeGpu()

    def sneaky(calls: int) -> None:
        for _ in range(calls):
            gpu.launch(1e3)  # 1 µs on the timed stream
            gpu.side_launch(30e3)  # 30 µs on another one

    subject = Subject("sneaky", sneaky)
    (measured,) = measure([subject], CudaTimer(gpu, gpu.clock), Policy(max_time_s=0.1), gpu.clock)
    result = device_checks(subject, measured, "cuda:0", cuda=gpu, clock=gpu.clock)
    assert result.device_extra["untimed_share"] > 1.0
    assert any(w.startswith("untimed work: the GPU stayed busy") for w in result.device_warnings)
