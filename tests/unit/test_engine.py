from collections.abc import Sequence
from dataclasses import replace

import pytest

from benchbench.measure.policy import (
    Block,
    Policy,
    Subject,
    calibrate,
    measure,
    warm_up,
    warnings_for,
)
from benchbench.measure.timers import CpuTimer
from tests.unit.fakes import VirtualMachine


def _subject(vm: VirtualMachine, name: str = "op") -> Subject:
    return Subject(name, vm.loop)


def test_calibration_reaches_one_millisecond_per_sample():
    vm = VirtualMachine(cost_ns=1_000)  # 1 µs per call
    calls, note = calibrate(_subject(vm), CpuTimer(vm.clock), Policy(), overhead_s=50e-9)
    assert note is None
    assert 1_000 <= calls <= 12_000  # >= 1 ms, overshoot bounded by the 10x growth cap


def test_calibration_honours_timer_overhead_rule():
    vm = VirtualMachine(cost_ns=1_000)
    # a 5 µs timer overhead needs samples of >= 5 ms to stay <= 0.1 %
    calls, _ = calibrate(_subject(vm), CpuTimer(vm.clock), Policy(), overhead_s=5e-6)
    assert calls * 1e-6 >= 5e-3


def test_calibration_terminates_on_a_coarse_clock():
    vm = VirtualMachine(cost_ns=100, resolution_ns=15_600_000)  # 15.6 ms ticks
    calls, note = calibrate(_subject(vm), CpuTimer(vm.clock), Policy(), overhead_s=0.0)
    assert calls >= 1
    assert note is None  # a tick was eventually seen, >= 1 ms
    assert vm.calls < 10**9


def test_calibration_terminates_on_a_jumping_clock():
    for seed in range(20):
        vm = VirtualMachine(cost_ns=500, jumps=0.3, seed=seed)
        rounds_before = vm.clock_reads
        calls, _ = calibrate(_subject(vm), CpuTimer(vm.clock), Policy(), overhead_s=0.0)
        assert calls >= 1
        assert vm.clock_reads - rounds_before <= 2 * Policy().max_calibration_rounds


def test_calibration_gives_up_on_a_clock_that_never_moves():
    class Frozen:
        def clock(self) -> int:
            return 42

    frozen = Frozen()
    calls, note = calibrate(Subject("op", lambda n: None), CpuTimer(frozen.clock), Policy(), 0.0)
    assert note is not None and "calibration stopped" in note
    assert calls > 1


def test_fixed_calls_skip_calibration():
    vm = VirtualMachine(cost_ns=1_000)
    calls, note = calibrate(_subject(vm), CpuTimer(vm.clock), Policy(fixed_calls=1), 0.0)
    assert (calls, note) == (1, None)
    assert vm.calls == 0


def test_warm_up_runs_at_least_ten_calls_and_a_tenth_of_a_second():
    vm = VirtualMachine(cost_ns=1_000)
    info = warm_up(_subject(vm), CpuTimer(vm.clock), Policy(), vm.clock)
    assert info["calls"] >= 10
    assert info["time_s"] >= 0.1
    assert info["time_s"] < 0.5


def test_warm_up_is_capped_near_one_second_for_slow_calls():
    vm = VirtualMachine(cost_ns=300_000_000)  # 0.3 s per call
    info = warm_up(_subject(vm), CpuTimer(vm.clock), Policy(), vm.clock)
    assert info["calls"] < 10
    assert 1.0 <= info["time_s"] <= 2.5


def test_quiet_measurement_converges_with_the_true_median():
    vm = VirtualMachine(cost_ns=2_000, noise=0.01, seed=1)
    (result,) = measure([_subject(vm)], CpuTimer(vm.clock), Policy(), vm.clock)
    assert result.converged
    assert "CI within" in result.stop_reason
    assert result.stats.n >= Policy().min_samples
    assert result.stats.median_s == pytest.approx(2e-6, rel=0.02)
    assert result.stats.rel_ci_half_width <= 0.01
    assert warnings_for(result, Policy()) == []


def test_noisy_measurement_stops_at_the_time_cap_and_says_so():
    vm = VirtualMachine(cost_ns=2_000, noise=2.0, seed=2)
    policy = Policy(max_time_s=0.2, target_rel_ci=0.001)
    (result,) = measure([_subject(vm)], CpuTimer(vm.clock), policy, vm.clock)
    assert not result.converged
    assert "time cap" in result.stop_reason
    warnings = warnings_for(result, policy)
    assert any(w.startswith("not converged") for w in warnings)


def test_a_precise_measurement_samples_on_to_the_time_cap_when_told_to():
    # ab's lockstep: a side that stopped once precise would leave the other sampling
    # alone, at other moments of a machine whose speed moves under both.
    vm = VirtualMachine(cost_ns=2_000, noise=0.01, seed=1)
    policy = Policy(max_time_s=0.3, stop_when_precise=False)
    (result,) = measure([_subject(vm)], CpuTimer(vm.clock), policy, vm.clock)
    # Precise all the same: converged, with no warning, though it stopped at the cap.
    assert result.converged and "time cap" in result.stop_reason
    assert warnings_for(result, policy) == []
    (early,) = measure(
        [_subject(vm)], CpuTimer(vm.clock), replace(policy, stop_when_precise=True), vm.clock
    )
    assert early.converged and early.stats.n < result.stats.n
    noisy = VirtualMachine(cost_ns=2_000, noise=2.0, seed=2)
    imprecise = replace(policy, target_rel_ci=0.001)
    (wide,) = measure([_subject(noisy)], CpuTimer(noisy.clock), imprecise, noisy.clock)
    assert not wide.converged and "time cap" in wide.stop_reason


def test_sample_cap_stops_sampling():
    vm = VirtualMachine(cost_ns=2_000, noise=1.0, seed=3)
    policy = Policy(max_samples=12, target_rel_ci=1e-6, max_time_s=100)
    (result,) = measure([_subject(vm)], CpuTimer(vm.clock), policy, vm.clock)
    assert result.stats.n == 12
    assert "sample cap" in result.stop_reason


def test_interleaved_subjects_alternate_within_rounds():
    order: list[str] = []

    class RecordingTimer(CpuTimer):
        def measure(self, blocks: Sequence[Block]) -> list[float]:
            for block in blocks:
                order.append("a" if block.loop is loop_a else "b")
            return super().measure(blocks)

    vm = VirtualMachine(cost_ns=1_000, noise=0.01)

    def loop_a(n: int) -> None:
        vm.loop(n)

    def loop_b(n: int) -> None:
        vm.loop(2 * n)

    results = measure(
        [Subject("a", loop_a), Subject("b", loop_b)], RecordingTimer(vm.clock), Policy(), vm.clock
    )
    sampled = order[-2 * results[0].stats.n :]
    for i in range(0, len(sampled), 2):
        assert sorted(sampled[i : i + 2]) == ["a", "b"]  # one of each per round
    assert results[0].stats.n == results[1].stats.n
    assert results[1].stats.median_s == pytest.approx(2 * results[0].stats.median_s, rel=0.05)


def test_pre_runs_before_every_sample_outside_the_timed_region():
    vm = VirtualMachine(cost_ns=1_000)
    flushes: list[float] = []

    def flush() -> None:
        flushes.append(vm.now_ns)
        vm.now_ns += 5_000_000  # an expensive flush must not show in the samples

    policy = Policy(fixed_calls=1, max_time_s=0.5)
    (result,) = measure([Subject("op", vm.loop, pre=flush)], CpuTimer(vm.clock), policy, vm.clock)
    # one flush per sample, and one per warm-up call (the warm-up runs as samples do)
    assert len(flushes) == result.stats.n + 1 + result.warmup["calls"]
    assert result.stats.max_s < 1e-5


def test_warm_up_runs_pre_before_each_chunk_no_larger_than_a_sample():
    vm = VirtualMachine(cost_ns=1_000)
    chunks: list[int] = []
    pres: list[int] = []

    def loop(n: int) -> None:
        chunks.append(n)
        vm.loop(n)

    policy = Policy(fixed_calls=4)
    info = warm_up(
        Subject("op", loop, pre=lambda: pres.append(1)), CpuTimer(vm.clock), policy, vm.clock
    )
    assert max(chunks) == 4 and chunks[:4] == [1, 1, 2, 4]
    assert len(pres) == len(chunks)  # every chunk on freshly prepared state
    assert info["calls"] == sum(chunks) - 1


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError, match="min_samples"):
        Policy(min_samples=1)
    with pytest.raises(ValueError, match="max_time_s"):
        Policy(max_time_s=0)


def test_time_cap_waits_for_the_minimum_samples():
    vm = VirtualMachine(cost_ns=40_000_000, noise=0.5, seed=4)  # 40 ms calls
    policy = Policy(max_time_s=0.05, target_rel_ci=1e-6)
    (result,) = measure([_subject(vm)], CpuTimer(vm.clock), policy, vm.clock)
    assert result.stats.n == policy.min_samples
    assert "time cap" in result.stop_reason


def test_time_cap_gives_up_on_minimum_samples_for_very_slow_calls():
    vm = VirtualMachine(cost_ns=300_000_000)  # 0.3 s calls: 10 samples would take 3 s
    policy = Policy(max_time_s=0.1)
    (result,) = measure([_subject(vm)], CpuTimer(vm.clock), policy, vm.clock)
    assert result.stats.n < policy.min_samples
    assert "time cap" in result.stop_reason


def test_one_preempted_block_does_not_fool_calibration():
    vm = VirtualMachine(cost_ns=20_000)  # 20 µs calls
    hiccups = [5_000_000]  # the first block is descheduled for 5 ms

    def loop(n: int) -> None:
        if hiccups:
            vm.now_ns += hiccups.pop()
        vm.loop(n)

    calls, note = calibrate(Subject("op", loop), CpuTimer(vm.clock), Policy(), overhead_s=0.0)
    assert note is None
    assert calls * 20e-6 >= 1e-3  # 50+ calls per sample, not the 1 the slow block suggested


def test_a_stalled_first_sample_of_short_calls_does_not_end_sampling():
    vm = VirtualMachine(cost_ns=2_000)  # 2 µs calls: hundreds to a sample
    blocks: list[int] = []

    def loop(n: int) -> None:
        # Calibration confirms its count with two blocks in a row; the next block of
        # that count is the first sample: it is descheduled for 0.6 s.
        if blocks[-2:] == [n, n] and blocks.count(n) == 2:
            vm.now_ns += 600_000_000
        blocks.append(n)
        vm.loop(n)

    policy = Policy(max_time_s=0.05, target_rel_ci=1e-6)
    (result,) = measure([Subject("op", loop)], CpuTimer(vm.clock), policy, vm.clock)
    assert result.calls_per_sample > 1 and result.samples_s[0] > 0.5
    assert result.stats.n == policy.min_samples  # not the one sample the stall left


def test_a_machine_that_keeps_stalling_still_ends_sampling():
    vm = VirtualMachine(cost_ns=2_000)

    def loop(n: int) -> None:
        vm.now_ns += 2_000_000_000 if n > 1 else 0  # every block of 2+ calls: 2 s more
        vm.loop(n)

    policy = Policy(max_time_s=0.05, target_rel_ci=1e-6)
    (result,) = measure([Subject("op", loop)], CpuTimer(vm.clock), policy, vm.clock)
    assert result.calls_per_sample > 1
    # A hundredfold cap is 5 s: three blocks of 2 s, not the ten samples asked for.
    assert result.stats.n == 3
    assert "time cap" in result.stop_reason
