"""The engine holds the garbage collector and counts page faults, for every caller."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest

from benchbench.core.values import Point
from benchbench.measure.faults import fault_warning
from benchbench.measure.pipeline import ok_result
from benchbench.measure.policy import (
    GC_NOTE,
    Block,
    Measured,
    Policy,
    Subject,
    gc_disabled,
    measure,
    warnings_for,
)
from benchbench.measure.timers import CpuTimer
from tests.unit.fakes import VirtualMachine

FAST = Policy(min_samples=3, max_samples=6, min_time_s=0.0, max_time_s=0.01)


class GcWatchingTimer:
    """A CPU timer over a virtual clock that notes ``gc.isenabled()`` inside each block."""

    name = "fake"

    def __init__(self, vm: VirtualMachine) -> None:
        self._inner = CpuTimer(vm.clock)
        self.enabled_inside: list[bool] = []

    def sync(self) -> None:
        return None

    def measure(self, blocks: Sequence[Block]) -> list[float]:
        self.enabled_inside.append(gc.isenabled())
        return self._inner.measure(blocks)


def test_the_garbage_collector_is_off_in_every_timed_block_and_back_on_after():
    vm = VirtualMachine(cost_ns=100_000)
    timer = GcWatchingTimer(vm)
    assert gc.isenabled()
    (measured,) = measure([Subject("op", vm.loop)], timer, FAST, clock=vm.clock)
    assert timer.enabled_inside and not any(timer.enabled_inside)
    assert gc.isenabled()
    assert measured.gc == GC_NOTE


def test_the_garbage_collector_comes_back_when_a_timed_block_raises():
    vm = VirtualMachine(cost_ns=100_000)

    class Failing(GcWatchingTimer):
        def measure(self, blocks: Sequence[Block]) -> list[float]:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        measure([Subject("op", vm.loop)], Failing(vm), FAST, clock=vm.clock)
    assert gc.isenabled()


def test_a_collector_disabled_by_the_caller_stays_disabled():
    gc.disable()
    try:
        with gc_disabled():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_garbage_is_collected_before_sampling(monkeypatch: pytest.MonkeyPatch):
    vm = VirtualMachine(cost_ns=100_000)
    timer = GcWatchingTimer(vm)
    events: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda *a: events.append("collect") or 0)
    original = timer.measure

    def noting(blocks: Sequence[Block]) -> list[float]:
        events.append("block")
        return original(blocks)

    monkeypatch.setattr(timer, "measure", noting)
    measure([Subject("op", vm.loop)], timer, FAST, clock=vm.clock)
    # calibration's blocks, then one collection, then the samples
    assert events.count("collect") == 1
    assert events.index("collect") < len(events) - 1
    assert "block" in events[events.index("collect") :]


class FaultingMachine(VirtualMachine):
    """Each call of ``loop`` adds ``faults_per_call`` to a fault counter."""

    def __init__(self, faults_per_call: int, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.faults = 0
        self.faults_per_call = faults_per_call

    def faulting_loop(self, n: int) -> None:
        self.loop(n)
        self.faults += n * self.faults_per_call


def test_page_faults_are_counted_per_call_for_each_interleaved_subject():
    vm = FaultingMachine(4096, cost_ns=100_000)  # "b" runs on the same clock, faulting nothing
    measured = measure(
        [Subject("a", vm.faulting_loop), Subject("b", vm.loop)],
        CpuTimer(vm.clock),
        FAST,
        clock=vm.clock,
        faults=lambda: vm.faults,
    )
    by_name = {m.name: m.minor_faults_per_call for m in measured}
    # warm-up and calibration faulted too; only the sampled blocks count
    assert by_name == {"a": 4096.0, "b": 0.0}


def test_heavy_faulting_warns_with_the_mapped_size_and_the_fix():
    # 4096 faults of ~2.5 µs = 10 ms in a 25 ms call: 40 % of it
    warning = fault_warning(4096.0, 25e-3)
    assert warning == (
        "each call maps ~16 MiB (4096 page faults per call): much of the time is the "
        "kernel zeroing fresh pages; see --allocator"
    )


@pytest.mark.parametrize(
    ("faults", "median_s"),
    [(None, 1e-3), (0.0, 1e-3), (8.0, 1e-6), (4096.0, 1.0)],
)
def test_few_or_cheap_faults_do_not_warn(faults: float | None, median_s: float):
    assert fault_warning(faults, median_s) is None


def test_the_fault_warning_and_the_process_state_travel_with_the_result():
    point = Point("s", "w", "v", 2**22, (2**22,), "float32", "cpu")
    measured = Measured("v", (25e-3,) * 10, 1, converged=True, minor_faults_per_call=4096.0)
    assert any("page faults per call" in w for w in warnings_for(measured, Policy()))
    result = ok_result(point, measured, Policy(), extra={"reference": "x"})
    assert result.extra == {
        "gc": GC_NOTE,
        "minor_faults_per_call": 4096.0,
        "reference": "x",
    }
    assert any("see --allocator" in w for w in result.warnings)
