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
