"""`benchbench time` prints its points' warnings once per kind, with how many had it."""

from __future__ import annotations

from benchbench.cli.time import warning_lines
from benchbench.core.values import Point, Result


def _result(*warnings: str) -> Result:
    return Result(Point("time", "time", "x", 8, (8,), "float32", "cpu"), "ok", warnings=warnings)


def test_one_line_per_kind_with_the_first_full_text_and_a_count() -> None:
    results = [
        _result("2 torch threads but only 1 of 2 cores were idle during the point (a)", "noisy"),
        _result("2 torch threads but only 1 of 2 cores were idle during the point (b)"),
        _result("sample < 1 ms: 0.2 ms", "sample < 1 ms: 0.2 ms"),  # one result: counted once
    ]
    assert warning_lines(results) == [
        "2 torch threads but only 1 of 2 cores were idle during the point (a) (2 result(s))",
        "noisy",
        "sample < 1 ms: 0.2 ms",
    ]
    assert warning_lines([_result()]) == []


def test_other_processes_are_one_line_naming_the_busiest() -> None:
    busy = "another process was busy during the point: {} (pid {}) at {}% CPU (max {}%)"
    results = [
        _result(busy.format("python", 17, 32, 40), busy.format("callgrind", 16, 19, 25)),
        _result(busy.format("python", 17, 35, 41), busy.format("python3", 99, 81, 95)),
    ]
    assert warning_lines(results) == [
        busy.format("python3", 99, 81, 95) + " (and 2 more) (2 result(s))"
    ]


def _row(median: float, low: float, high: float, ratio: tuple[float, float, float]):
    from benchbench.analysis.variants import Row

    return Row(
        "cpu", "float32", 1024, "x ** 0.5", "torch.sqrt(x)", "ok",
        median_s=median, ci_low_s=low, ci_high_s=high,
        ratio=ratio[0], ratio_ci_low=ratio[1], ratio_ci_high=ratio[2], verdict="not significant",
    )  # fmt: skip


def test_an_interval_wider_than_run_s_unstable_bound_reads_unstable() -> None:
    """As `run`'s table: a cell of ±5,061,205,553 % (two processes that disagree, t with one
    degree of freedom) says ``unstable``; an interval within ±50 % keeps its figure."""
    from benchbench.cli.time import _ratio_cell, _time_cell

    wild = _row(24.2e-6, 0.0, 2.45e-3, (0.574, 0.0, 1032397.474))
    assert _time_cell(wild).plain == "24.2 µs unstable"
    assert _ratio_cell(wild).plain == "0.574 [unstable] not significant"
    sound = _row(4.59e-6, 4.56e-6, 4.62e-6, (4.160, 4.116, 4.203))
    assert _time_cell(sound).plain == "4.59 µs ±0.7%"
    assert _ratio_cell(sound).plain == "4.160 [4.116, 4.203] not significant"
