"""Instruction counts: the counting protocol on fake counters, the dump reader, the
verdict on counts, the merge into a timed result, and ``--metric`` parsing."""

from __future__ import annotations

import os

import pytest

from benchbench.analysis.compare import UNTIMED, compare_point, compare_rows
from benchbench.analysis.verdict import (
    FASTER,
    NOT_SIGNIFICANT,
    SAME,
    SLOWER,
    CountEstimate,
    estimate_counts,
    mark_counts,
)
from benchbench.core.errors import UsageError
from benchbench.core.values import Point, Result
from benchbench.measure import instructions
from benchbench.measure.instructions import (
    Callgrind,
    Count,
    CountError,
    allocator_instructions,
    count_subject,
    read_total,
)
from benchbench.measure.policy import Subject
from benchbench.run.instrumented import count_request, parse_metrics, with_counts

#: What a call of the fake subject executes, and what one call of the idle loop does.
PER_CALL, LOOP = 5_000, 700
#: What a switch of collection costs in a count, whatever was counted.
SWITCH = 4_000


class FakeCounter:
    """Counts the instructions the fake loops report while 'collection' is on."""

    def __init__(self, allocator_per_call: int = 0) -> None:
        self.executed = 0
        self.counts: list[int] = []
        self.allocator_per_call = allocator_per_call
        self.allocated = 0

    def count(self, run) -> Count:
        before, allocated = self.executed, self.allocated
        run()
        counted = self.executed - before + SWITCH
        self.counts.append(counted)
        return Count(counted, self.allocated - allocated)


def loops(counter: FakeCounter, per_call: int = PER_CALL, pre=None) -> tuple[Subject, Subject]:
    def subject(n: int) -> None:
        counter.executed += n * (per_call + LOOP)
        counter.allocated += n * counter.allocator_per_call

    def idle(n: int) -> None:
        counter.executed += n * LOOP

    return Subject("op", subject, pre), Subject("idle", idle)


def test_the_count_per_call_subtracts_the_loop_and_the_switches():
    counter = FakeCounter()
    subject, idle = loops(counter)
    counted = count_subject(subject, idle, counter)
    assert counted.per_call == pytest.approx(PER_CALL)
    assert counted.loop_per_call == pytest.approx(LOOP + SWITCH / counted.calls)
    assert counted.spread == 0.0
    assert len(counted.counts) == instructions.REPEATS


def test_a_pilot_chooses_enough_calls_for_the_target():
    counter = FakeCounter()
    subject, idle = loops(counter)
    counted = count_subject(subject, idle, counter)
    # 2e6 instructions at 5,000 a call: 400 calls.
    assert counted.calls == 400
    assert counted.calls * PER_CALL >= instructions.TARGET_INSTRUCTIONS
    big = count_subject(*loops(counter, per_call=10**9), counter)
    assert big.calls == 1


def test_fixed_calls_sum_several_counts_each_after_its_restore():
    counter = FakeCounter()
    restores: list[int] = []
    subject, idle = loops(counter, pre=lambda: restores.append(counter.executed))
    counted = count_subject(subject, idle, counter, fixed_calls=4)
    assert counted.per_call == pytest.approx(PER_CALL)
    # The K=4 copies are fixed, so counts are summed: 2e6 / (4 * 5,000) = 100 of them.
    assert counted.calls == 4 * instructions.MAX_TIMES
    assert len(restores) >= instructions.MAX_TIMES * instructions.REPEATS


def test_a_count_that_moves_between_repeats_has_a_spread():
    counter = FakeCounter()
    extra = iter([0, 50_000, 0])  # the second of the three repeated counts runs long

    def subject(n: int) -> None:
        counter.executed += n * (PER_CALL + LOOP) + (next(extra, 0) if n > 1 else 0)

    def idle(n: int) -> None:
        counter.executed += n * LOOP

    counted = count_subject(Subject("op", subject), Subject("idle", idle), counter)
    assert counted.spread > 0
    assert counted.per_call == pytest.approx(PER_CALL)  # the median ignores the odd count


def test_callgrind_reads_the_one_dump_each_count_leaves_and_deletes_it(tmp_path):
    out = tmp_path / "callgrind.123"
    written = iter([1_500, 2_500])

    def dump() -> None:
        index = len(list(tmp_path.iterdir())) + 7  # callgrind numbers dumps per process
        (tmp_path / f"callgrind.123.{index}").write_text(
            f"version: 1\nevents: Ir\nsummary: {next(written)}\ntotals: 0\n"
        )

    counter = Callgrind(str(out), toggle=lambda: None, toggle_and_dump=dump)
    assert counter.count(lambda: None) == Count(1_500, 0)
    assert counter.count(lambda: None) == Count(2_500, 0)
    assert list(tmp_path.iterdir()) == []


#: A callgrind dump as ``--dump-line=no --dump-instr=no`` writes it, names compressed:
#: an op calling c10's allocation (which calls posix_memalign, which calls glibc's
#: internals) and free; malloc called recursively from inside free; Python calling malloc.
DUMP = """version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 10000
totals: 10000

ob=(1) libtorch_cpu.so
fl=(1) ???
fn=(1) at::native::sqrt_out
0 6000
cob=(1)
cfi=(1)
cfn=(2) c10::alloc_cpu(unsigned long)
calls=1 0
0 1200
cob=(2) libc.so.6
cfi=(1)
cfn=(3) free
calls=1 0
0 700

fn=(2)
0 100
cob=(2)
cfi=(1)
cfn=(4) posix_memalign
calls=1 0
0 1100

ob=(2)
fn=(4)
0 50
cfn=(5) _int_memalign
calls=1 0
0 1050

fn=(3)
0 400
cfn=(6) free'2
calls=1 0
0 300

fn=(7) _PyEval_EvalFrameDefault
0 1000
cfn=(8) malloc
calls=2 0
0 250
"""


def test_the_allocator_share_is_the_calls_into_its_entry_points_from_outside():
    # posix_memalign from c10 (1,100), free from the op (700: its recursive free'2 inside
    # it is not counted again), malloc from Python (250); c10's own 100 is not the C
    # allocator's.
    assert allocator_instructions(DUMP) == 1_100 + 700 + 250
    assert read_total(DUMP) == 10_000
    assert allocator_instructions("events: Ir\ntotals: 5\n") == 0


def test_callgrind_counts_leave_the_allocator_out(tmp_path):
    out = tmp_path / "callgrind.9"

    def dump() -> None:
        (tmp_path / "callgrind.9.1").write_text(DUMP)

    counter = Callgrind(str(out), toggle=lambda: None, toggle_and_dump=dump)
    assert counter.count(lambda: None) == Count(10_000 - 2_050, 2_050)


def test_the_allocator_per_call_is_recorded_apart_from_the_count():
    counter = FakeCounter(allocator_per_call=300)
    subject, idle = loops(counter)
    counted = count_subject(subject, idle, counter)
    assert counted.per_call == pytest.approx(PER_CALL)
    assert counted.allocator_per_call == pytest.approx(300)
    assert counted.extra("process")["allocator_per_call"] == pytest.approx(300)


def test_callgrind_without_a_dump_is_a_count_error(tmp_path):
    counter = Callgrind(str(tmp_path / "cg"), toggle=lambda: None, toggle_and_dump=lambda: None)
    with pytest.raises(CountError, match="expected one callgrind dump"):
        counter.count(lambda: None)


def test_a_worker_not_under_callgrind_says_how_to_count(monkeypatch):
    monkeypatch.delenv(instructions.OUT_FILE_VARIABLE, raising=False)
    with pytest.raises(CountError, match="--metric instructions"):
        Callgrind.from_environment()


def _control(tmp_path, body: str) -> str:
    """A stand-in for ``callgrind_control``: a script that records its arguments."""
    script = tmp_path / "callgrind_control"
    script.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\n{body}\n')
    script.chmod(0o755)
    return str(script)


def test_instrumentation_is_switched_on_once_per_process(tmp_path, monkeypatch):
    monkeypatch.setattr(instructions, "_instrumented", False)
    monkeypatch.setenv(instructions.OUT_FILE_VARIABLE, str(tmp_path / "cg.%p"))
    control = _control(tmp_path, "echo 'sending command instrumentation on'; echo '  OK.'")
    monkeypatch.setenv(instructions.CONTROL_VARIABLE, control)
    Callgrind.from_environment()
    assert (tmp_path / "args").read_text().split() == ["-i", "on", str(os.getpid())]
    (tmp_path / "args").unlink()
    Callgrind.from_environment()
    assert not (tmp_path / "args").exists()  # once per process


def test_instrumentation_that_does_not_switch_on_is_a_count_error_with_its_output(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(instructions, "_instrumented", False)
    monkeypatch.setenv(instructions.OUT_FILE_VARIABLE, str(tmp_path / "cg.%p"))
    control = _control(tmp_path, "echo 'Error: no process with pid 1'; exit 1")
    monkeypatch.setenv(instructions.CONTROL_VARIABLE, control)
    with pytest.raises(CountError, match=r"exit 1\): Error: no process with pid 1"):
        Callgrind.from_environment()
    assert not instructions._instrumented


def test_read_total_takes_the_totals_or_summary_line():
    assert read_total("events: Ir\ntotals: 42\n") == 42
    assert read_total("events: Ir\nsummary: 7\n") == 7
    with pytest.raises(CountError, match="no totals line"):
        read_total("events: Ir\n")


@pytest.mark.parametrize(
    ("ratio", "noise", "expected"),
    [
        (1.10, 0.0, SLOWER),
        (1.011, 0.001, SLOWER),
        (1.009, 0.001, SAME),
        (1 / 1.011, 0.001, FASTER),
        (1.10, 0.006, NOT_SIGNIFICANT),  # counts moving by 0.6 % cannot judge 1 %
    ],
)
def test_the_instruction_verdict(ratio, noise, expected):
    assert mark_counts(CountEstimate(ratio, noise), 0.01) == expected


def test_the_instruction_verdict_is_symmetric_in_log_space():
    assert mark_counts(CountEstimate(1 / 1.01, 0.0), 0.01) == FASTER
    assert mark_counts(CountEstimate(1 / 1.0099, 0.0), 0.01) == SAME


def test_count_estimates_take_the_spread_between_processes():
    found = estimate_counts([1000.0, 1002.0], [1100.0], 0.0001, 0.0)
    assert found.ratio == pytest.approx(1100 / 1001)
    assert found.noise == pytest.approx(2 / 1001)
    with pytest.raises(ValueError, match="finite and > 0"):
        estimate_counts([0.0], [1.0])
    with pytest.raises(ValueError, match=">= 1 count"):
        estimate_counts([], [1.0])


def _row(
    counts: list[float] | None,
    samples: list[float] | None = None,
    spread: float = 0.0,
    tool: str | None = None,
):
    """A stored row of instruction counts (``tool``: the counter that took them; None:
    a row from before a run named its counter)."""
    counted = {"spread": spread} | ({"tool": tool} if tool else {})
    return {
        "benchmark_id": "b1",
        "suite": "s",
        "workload": "w",
        "variant": "v",
        "device": "cpu",
        "dtype": "float32",
        "size": 8,
        "shape": [8],
        "params": {},
        "status": "ok",
        "samples_s": samples or [],
        "calls_per_sample": 1,
        "median_s": None,
        "instructions_per_call": counts[0] if counts else None,
        "instruction_counts": counts,
        "extra": {"instructions": counted} if counts else {},
    }


def test_compare_marks_an_instruction_regression_on_untimed_runs():
    point = compare_point(_row([10_000.0]), _row([11_000.0]))
    assert point.mark == UNTIMED
    assert point.instructions_mark == SLOWER
    assert point.instructions_ratio == pytest.approx(1.1)
    assert point.regressed
    same = compare_rows([_row([10_000.0])], [_row([10_010.0])])
    assert same.points[0].instructions_mark == SAME
    assert not same.regressions
    assert same.to_dict()["instructions"]["counts"] == {SAME: 1}


def test_compare_judges_time_and_instructions_side_by_side():
    samples = [1e-3 * (1 + k / 1000) for k in range(20)]
    point = compare_point(_row([10_000.0], samples), _row([10_500.0], samples))
    assert point.mark not in (SLOWER, FASTER)  # the times are identical
    assert point.instructions_mark == SLOWER  # 5 % more instructions
    assert point.regressed
    timed_only = compare_point(_row(None, samples), _row([10_500.0], samples))
    assert timed_only.instructions_mark is None


def _result(**kw) -> Result:
    return Result(point=Point("s", "w", "v", 8, (8,), "float32", "cpu"), **kw)


def test_counts_merge_into_the_timed_result_and_a_failed_count_warns():
    timed = _result(status="ok", samples_s=(1e-3,), warnings=("noisy",))
    counted = _result(
        status="ok",
        instructions_per_call=123.0,
        instruction_counts=(123.0,),
        extra={"instructions": {"calls": 10}},
        warnings=("instruction count unstable: x", "not converged"),
    )
    merged = with_counts(timed, counted)
    assert merged.instructions_per_call == 123.0
    assert merged.samples_s == (1e-3,)
    assert merged.extra["instructions"] == {"calls": 10}
    assert merged.warnings == ("noisy", "instruction count unstable: x")
    failed = with_counts(timed, _result(status="error", reason="boom"))
    assert failed.instructions_per_call is None
    assert failed.warnings[-1] == "instructions not counted: boom"
    assert with_counts(_result(status="error", reason="x"), counted).status == "error"


def test_a_result_round_trips_its_counts():
    result = _result(status="ok", instructions_per_call=5.0, instruction_counts=(5.0, 6.0))
    again = Result.from_dict(result.to_dict())
    assert again.instruction_counts == (5.0, 6.0)
    assert again.instructions_per_call == 5.0


def test_the_instrumented_request_has_one_thread_and_checks_only_when_untimed():
    request = {"op": "measure", "threads": 4, "check": True, "profile_dir": "/p"}
    timed = count_request(request, timed=True)
    assert timed["metric"] == "instructions"
    assert timed["threads"] == 1
    assert timed["check"] is False
    assert timed["profile_dir"] is None
    assert count_request(request, timed=False)["check"] is True


def test_metric_parsing():
    assert parse_metrics(None) == ("time",)
    assert parse_metrics("instructions") == ("instructions",)
    assert parse_metrics("time, instructions,time") == ("time", "instructions")
    with pytest.raises(UsageError, match="--metric must be time, instructions"):
        parse_metrics("cycles")
    with pytest.raises(UsageError):
        parse_metrics("")


def test_a_device_sync_runs_after_each_count_outside_it():
    """A CUDA point counts its host's launch path: the sync that waits for the kernels
    comes after the collection is switched off, never inside a count."""
    counter = FakeCounter()
    subject, idle = loops(counter)
    inside: list[bool] = []
    collecting = [False]
    original = counter.count

    def count(run) -> Count:
        collecting[0] = True
        try:
            return original(run)
        finally:
            collecting[0] = False

    counter.count = count  # type: ignore[method-assign]
    count_subject(subject, idle, counter, after=lambda: inside.append(collecting[0]))
    assert inside and not any(inside)
    assert len(inside) >= 1 + 2 * instructions.REPEATS  # after every count and the warm-up
