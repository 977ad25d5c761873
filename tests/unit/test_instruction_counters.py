"""Which counter counted a point's instructions (``run --counter callgrind|pmu``): the
request and the record that name it, the comparison that never mixes two counters, the
runner's refusal of a PMU that is not there, and the hardware counter itself where the
machine has one."""

from __future__ import annotations

import pytest

from benchbench.analysis.compare import UNTIMED, compare_point, compare_rows
from benchbench.analysis.sides import COUNTERS_DIFFER, counter_of
from benchbench.core.defaults import COUNTERS, DEFAULT_COUNTER
from benchbench.core.errors import UsageError
from benchbench.machine import pmu
from benchbench.measure.instructions import Counted, CountError, Hardware, count_subject
from benchbench.measure.policy import Subject
from benchbench.run.instrumented import (
    InstrumentedLauncher,
    check_counter,
    count_request,
    counting_launcher,
    slowdown,
)
from benchbench.run.runner import RunConfig
from tests.unit.test_instructions import _row as instruction_row


def _row(counts: list[float], tool: str | None, samples: list[float] | None = None) -> dict:
    return instruction_row(counts, samples, tool=tool)


def test_a_count_records_its_counter():
    counted = Counted(per_call=10.0, counts=(10.0,), calls=5, loop_per_call=1.0)
    assert counted.extra("process")["tool"] == "callgrind"
    assert counted.extra("process", "pmu")["tool"] == "pmu"
    assert counted.extra("process", "pmu")["allocator_per_call"] is None  # in the count
    assert counter_of(_row([1.0], "pmu")) == "pmu"
    assert counter_of(_row([1.0], None)) == "callgrind"  # rows from before the choice


def test_two_counters_are_never_compared():
    # A count of the CPU's counter holds the C allocator's instructions: 30 % more here
    # would be a regression between two callgrind counts.
    point = compare_point(_row([10_000.0], "callgrind"), _row([13_000.0], "pmu"))
    assert point.mark == UNTIMED
    assert point.instructions_mark == COUNTERS_DIFFER
    assert point.instructions_ratio is None and point.base_instructions is None
    assert not point.regressed
    samples = [1e-3 * (1 + k / 1000) for k in range(20)]
    timed = compare_rows(
        [_row([10_000.0], None, samples)], [_row([13_000.0], "pmu", samples)]
    ).points[0]
    assert timed.ratio is not None  # the times are still compared
    assert timed.instructions_mark == COUNTERS_DIFFER and not timed.regressed
    alike = compare_point(_row([10_000.0], None), _row([13_000.0], "callgrind"))
    assert alike.regressed  # the control: the same counts from one counter are a regression


def test_the_count_request_names_its_counter_and_the_timeout_follows_it():
    request = {"op": "measure", "threads": 4, "check": True, "profile_dir": "/p"}
    assert count_request(request, timed=True)["counter"] == "callgrind"
    assert count_request(request, timed=True, counter="pmu")["counter"] == "pmu"
    assert slowdown("callgrind") > 1 and slowdown("pmu") == 1.0


def test_the_counter_is_checked_by_name_and_callgrind_stays_the_default():
    assert COUNTERS[0] == DEFAULT_COUNTER == "callgrind"
    assert check_counter("callgrind") == "callgrind"
    with pytest.raises(UsageError, match="--counter must be one of callgrind, pmu"):
        check_counter("cycles")
    with pytest.raises(UsageError, match="--counter must be one of"):
        RunConfig(suites=(), metrics=("instructions",), counter="cycles")
    assert RunConfig(suites=()).counter == "callgrind"


def test_a_pmu_that_is_not_there_is_a_usage_error_naming_why_and_the_fix():
    counter, why = pmu.instruction_counter()
    if counter is not None:
        counter.close()
        pytest.skip("this machine has hardware counters")
    for refused in (lambda: check_counter("pmu"), lambda: counting_launcher("pmu")):
        with pytest.raises(UsageError) as raised:
            refused()
        text = str(raised.value)
        assert why in text and "--counter callgrind" in text
    with pytest.raises(CountError, match="no hardware instruction counts here"):
        Hardware()


def test_callgrind_keeps_its_instrumented_launcher(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    launcher = counting_launcher("callgrind")
    try:
        assert isinstance(launcher, InstrumentedLauncher)
        assert launcher.prefix[0] == "/usr/bin/valgrind"
    finally:
        launcher.close()


def test_the_hardware_counter_counts_a_loop_less_its_idle_twin():
    """Where the machine has a PMU: a loop of 3 additions a call counts more than one of
    1, each less the same loop over a callable that does nothing."""
    counter, why = pmu.instruction_counter()
    if counter is None:
        pytest.skip(f"no hardware instruction counts on this machine: {why}")
    counter.close()

    def loop(work: int) -> Subject:
        def run(calls: int) -> None:
            for _ in range(calls):
                for _ in range(work):
                    pass

        return Subject(f"work {work}", run)

    hardware = Hardware()
    small = count_subject(loop(1), loop(0), hardware)
    large = count_subject(loop(30), loop(0), hardware)
    assert 0 < small.per_call < large.per_call
    assert small.extra("process", "pmu")["tool"] == "pmu"


def test_a_counted_run_starts_a_counting_worker_per_usable_core_up_to_four(monkeypatch):
    from benchbench.run import instrumented

    for cores, workers in [(1, 1), (2, 2), (3, 3), (16, instrumented.MAX_COUNTING_WORKERS)]:
        monkeypatch.setattr(instrumented, "usable_cpus", lambda n=cores: tuple(range(n)))
        assert instrumented.counting_workers() == workers
