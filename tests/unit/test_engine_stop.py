"""The engine's cooperative cancellation hook: stop after the current sample."""

from benchbench.measure.policy import INTERRUPTED, Policy, Subject, measure
from benchbench.measure.timers import CpuTimer
from tests.unit.fakes import VirtualMachine


def test_should_stop_ends_sampling_after_the_sample_in_flight():
    vm = VirtualMachine(cost_ns=2_000, noise=2.0, seed=4)  # too noisy to converge on its own
    samples_when_stopped: list[int] = []
    sampled = {"n": 0}

    class CountingTimer(CpuTimer):
        def measure(self, blocks):  # type: ignore[no-untyped-def]
            sampled["n"] += 1
            return super().measure(blocks)

    def should_stop() -> bool:
        # Ask for a stop once 15 blocks were timed (calibration and samples alike).
        if sampled["n"] >= 15 and not samples_when_stopped:
            samples_when_stopped.append(sampled["n"])
        return bool(samples_when_stopped)

    policy = Policy(max_time_s=100.0, target_rel_ci=1e-6)
    (result,) = measure(
        [Subject("op", vm.loop)], CountingTimer(vm.clock), policy, vm.clock, should_stop
    )
    assert result.stop_reason == INTERRUPTED
    assert not result.converged
    # Exactly one more block was timed after the request: the sample in flight.
    assert sampled["n"] <= samples_when_stopped[0] + 1
    assert 0 < len(result.samples_s) < policy.min_samples + 15


def test_should_stop_cuts_the_warm_up_short():
    vm = VirtualMachine(cost_ns=50_000_000)  # 50 ms a call: warm-up would take ~1 s
    (result,) = measure(
        [Subject("op", vm.loop)], CpuTimer(vm.clock), Policy(), vm.clock, lambda: True
    )
    assert result.warmup["time_s"] < 0.2
    assert result.stop_reason == INTERRUPTED
    assert len(result.samples_s) == 1


def test_without_a_stop_request_the_hook_changes_nothing():
    runs = []
    for hook in (None, lambda: False):
        vm = VirtualMachine(cost_ns=2_000, noise=0.01, seed=1)
        kwargs = {} if hook is None else {"should_stop": hook}
        (result,) = measure(
            [Subject("op", vm.loop)], CpuTimer(vm.clock), Policy(), vm.clock, **kwargs
        )
        runs.append(result)
    assert runs[0].samples_s == runs[1].samples_s
    assert runs[0].converged and runs[0].stop_reason != INTERRUPTED
