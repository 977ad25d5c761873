"""A run's table in a word per row and its footer once: unstable rows, busy processes named
once, the verdict and the drift between runs; no line of it wider than 160 characters."""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import re
from typing import Any

import pytest

from benchbench.analysis.rerun import Shift
from benchbench.views.results import results_grid
from benchbench.views.run_notes import (
    NOTES_WIDTH,
    PRIORITY,
    drift_line,
    footer,
    note_word,
    notes_cell,
    row_words,
    threads_phrase,
    verdict,
)
from benchbench.views.tables import plain, write

THREADS_2 = (
    "2 torch threads but only 1 of 2 cores were idle during the point (other processes used "
    "1.3 cores): a parallel region waits for a descheduled thread; measure with --threads 1 "
    "or --cpus naming idle cores"
)
RETAKE = (
    "retaken: process 2 of 4 ran on a crowded core (1 torch thread but none of 2 cores was "
    "idle during the point (other processes used 1.4 cores)); a fresh process took its place"
)
AT = dt.datetime(2026, 11, 27, 3, 1, 10, tzinfo=dt.UTC)


def _busy(name: str, pid: int, cpu: float) -> str:
    return (
        f"another process was busy during the point: {name} (pid {pid}) at {cpu:.0f}% CPU "
        f"(max {cpu + 10:.0f}%)"
    )


def _row(size: int = 1024, half: float = 0.02, warnings: Any = (), **kw: Any) -> dict[str, Any]:
    median = 1e-5 * size / 1024
    return {
        "suite": "quick",
        "workload": "sum",
        "variant": "torch.sum",
        "dtype": "float32",
        "device": "cpu",
        "size": size,
        "shape": [size],
        "status": "ok",
        "median_s": median,
        "ci_low_s": median * (1 - half),
        "ci_high_s": median * (1 + half),
        "min_s": median * 0.9,
        "max_s": median * (1 + 3 * half),
        "process_medians_s": [median, median * 1.01, median * 0.99],
        "threads": 1,
        "extra": {},
        "warnings": list(warnings),
        "created_at": AT,
        **kw,
    }


def test_each_warning_gets_a_word_or_two_and_not_converged_none():
    assert note_word(THREADS_2) == "busy core"
    assert note_word(RETAKE) == "retaken"
    assert note_word(_busy("python3", 7175, 91)) == "neighbour"
    assert note_word("sample < 1 ms (24 µs, 1 call(s) per sample): timer overhead ...") == (
        "< 1 ms sample"
    )
    assert note_word("not converged: ±3.1 % after 3 processes (target ±3 %)") is None
    assert note_word("bimodal: 3 processes at 1.21 µs, 2 at 1.83 µs (all kept)") == "bimodal"
    assert note_word("outlier: 4 processes at 24.0 µs, 1 at 19.8 ms (all kept)") == (
        "outlier process"
    )


def test_no_printed_interval_is_wider_than_half_the_median():
    widths = [0.01, 0.2, 0.49, 0.51, 3.0, 4694.0]
    rows = [_row(1024 << k, half=w) for k, w in enumerate(widths)]
    rows[-1]["process_medians_s"] = [24e-6, 19.8e-3, 25e-6]
    grid = results_grid(rows, title="run x", footer=footer(rows))
    cells = [plain(row[6]) for row in grid.rows]
    printed = [float(c.strip("±%")) for c in cells if c.startswith("±")]
    assert printed == [1.0, 20.0, 49.0] and max(printed) <= 50
    assert cells[-1] == "24 µs–19.8 ms"  # the processes' range instead
    notes = [plain(row[-1]) for row in grid.rows]
    assert notes[3:] == ["unstable"] * 3
    unstable_line = next(n for n in grid.notes if n.startswith("unstable (3 point(s)"))
    assert "24 µs–19.8 ms over 3 processes" in " ".join(grid.notes)
    assert unstable_line


def test_an_unstable_range_in_one_unit_names_it_once():
    # The table keeps to 160 characters: "9.59 µs–23.6 µs" made a quick run's table 163.
    rows = [_row(1024, half=3.0)]
    rows[0]["process_medians_s"] = [9.59e-6, 23.6e-6, 12e-6]
    grid = results_grid(rows, title="run x", footer=footer(rows))
    assert plain(grid.rows[0][6]) == "9.59–23.6 µs"
    assert "9.59–23.6 µs over 3 processes" in " ".join(grid.notes)


@pytest.mark.parametrize(
    ("medians", "cell"),
    [
        ([390e-6, 1.19e-3, 500e-6], "0.39–1.19 ms"),  # 390 µs–1.19 ms made a table 162 wide
        ([814e-6, 5.11e-3, 1e-3], "0.81–5.11 ms"),
        ([0.39, 1.19, 0.5], "0.39–1.19 s"),
        ([24e-6, 19.8e-3, 1e-3], "24 µs–19.8 ms"),  # under 0.1 ms: both units say more
    ],
)
def test_an_unstable_range_across_units_is_in_the_upper_unit_where_it_reads(medians, cell):
    rows = [_row(1024, half=3.0)]
    rows[0]["process_medians_s"] = medians
    grid = results_grid(rows, title="run x", footer=footer(rows))
    assert plain(grid.rows[0][6]) == cell
    assert f"{cell} over 3 processes" in " ".join(grid.notes)


def test_the_title_says_the_cpu_threads():
    assert results_grid([_row()], title="run x").title == "run x · 1 thread"
    assert threads_phrase([_row(threads=2), _row(threads=1)]) == "1-2 threads"
    assert threads_phrase([_row(device="cuda")]) is None


def test_a_busy_process_is_named_once_with_when_and_the_rows_say_a_word():
    rows = [_row(1024 << k, warnings=[_busy("benchbench", 7175, 80 + k)]) for k in range(12)]
    lines = footer(rows)
    text = "\n".join(lines)
    assert text.count("pid 7175") == 1
    assert "benchbench (pid 7175) at 80-91% CPU during 12 point(s), 03:01:10" in text
    grid = results_grid(rows, title="t")
    assert {plain(r[-1]) for r in grid.rows} == {"neighbour"}


def test_the_verdict_counts_widths_and_says_what_to_do_next():
    rows = [_row(half=0.02), _row(half=0.05), _row(half=0.2), _row(half=0.9, threads=2)]
    rows[3]["warnings"] = [THREADS_2]
    line = verdict(rows, target=0.03)
    assert line.startswith("verdict: 1 of 4 points within ±3 %, 2 within ±10 %, 1 unstable; next:")
    assert "--threads 1" in line and "--rounds 6" in line and "benchbench ab" in line
    quiet = verdict([_row(half=0.01)] * 10, target=0.03)
    assert "--threads 1" not in quiet and "--rounds 6" not in quiet


def test_retaken_points_are_listed_once_in_the_footer():
    rows = [_row(4096, warnings=[RETAKE]), _row(8192)]
    text = "\n".join(footer(rows))
    assert "retaken (1 point(s)" in text and "sum torch.sum 2^12" in text
    assert [plain(r[-1]) for r in results_grid(rows).rows] == ["retaken", ""]


def test_the_shift_from_the_previous_run_is_said_when_intervals_miss_it():
    now = [_row(1024 << k, half=0.02) for k in range(10)]
    before = [{**r, "median_s": r["median_s"] / 1.10, "run_id": "abcdef123"} for r in now]
    line = drift_line(now, before)
    assert line is not None
    # The signed median of the points' ratios, not the median of their absolute changes.
    assert "from run abcdef12: every point x1.100 together (median of 10; too few" in line
    assert "holds its median at 0 of 10" in line and "beyond their intervals" in line
    close = [{**r, "median_s": r["median_s"] * 1.005} for r in now]
    assert "beyond" not in (drift_line(now, close) or "")
    assert drift_line(now, []) is None
    # Half the points 10 % faster, half 10 % slower: nothing moved together.
    mixed = [
        {**r, "median_s": r["median_s"] * (1.1 if k % 2 else 1 / 1.1), "run_id": "abcdef123"}
        for k, r in enumerate(now)
    ]
    assert "every point x1.000 together" in (drift_line(now, mixed) or "")
    # With the shift judged against earlier runs (compare's), its line is the one shown.
    shift = Shift(1.1, 1.05, 1.15, 10, 4, 0.02, 0.001, "slower")
    assert shift.line in (drift_line(now, before, shift) or "")


def test_a_run_of_realistic_rows_fits_160_columns_in_a_file():
    long_warnings = [
        "not converged: ±469434.0 % after 3 processes (target ±3 %)",
        THREADS_2,
        _busy("benchbench", 7175, 91),
        "sample < 1 ms (24 µs, 1 call(s) per sample): timer overhead may be visible",
        "noisy: IQR is 40% of the median",
        "each call maps ~420 KiB (105 page faults per call): much of the time is the kernel",
    ]
    rows = []
    for k in range(53):
        row = _row(1024 << (k % 13), half=[0.01, 0.3, 4694.0][k % 3], warnings=long_warnings)
        row["variant"] = ["torch.sum", "1 / torch.sqrt(x)", "x.sqrt_()"][k % 3]
        row["warnings"] = [*long_warnings, _busy(f"proc{k}", 1000 + k, 40)]
        rows.append(row)
    out, err = io.StringIO(), io.StringIO()
    grid = results_grid(rows, title="run 51947597-d690-4693-a460-1ed56f3e5e45", footer=footer(rows))
    write([grid], "table", out, err)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 160, max(lines, key=len)
    assert not any(re.search(r"±\d{3,}", line) for line in lines)


def test_the_notes_column_keeps_to_its_width_whatever_two_words_a_row_holds(monkeypatch):
    """Two words that do not fit on one line of :data:`NOTES_WIDTH` take a line each; a
    quick run beside a busy CI printed ``outlier process, < 1 ms sample`` on one line and
    its table was 154 wide where quieter runs' were 150."""
    monkeypatch.delenv("COLUMNS", raising=False)  # a CI log's table: as wide as it needs
    words = [*PRIORITY, "another process"]
    for first, second in itertools.permutations(words, 2):
        cell = notes_cell(_row(), [first, second])
        assert all(len(line) <= NOTES_WIDTH for line in cell.splitlines()), cell
        assert cell.replace(",\n", ", ") == ", ".join(row_words(_row(), [first, second]))
    assert notes_cell(_row(), ["< 1 ms sample", "page faults"]) == "page faults, < 1 ms sample"
    outlier = "outlier: 4 processes at 24.0 µs, 1 at 19.8 ms (all kept)"
    small = "sample < 1 ms (24 µs, 1 call(s) per sample): timer overhead may be visible"
    rows = [_row(warnings=[outlier, small]), _row(warnings=[small])]
    grid = results_grid(rows, title="run x")
    out, err = io.StringIO(), io.StringIO()
    write([grid], "table", out, err)
    body = [line for line in out.getvalue().splitlines() if line.startswith("│")]
    notes = [line.rsplit("│", 2)[1].strip() for line in body]
    assert notes == ["outlier process,", "< 1 ms sample", "< 1 ms sample"]
    write([grid], "csv", out := io.StringIO(), err)
    records = list(csv.reader(io.StringIO(out.getvalue())))
    assert [r[-1] for r in records] == ["notes", "outlier process, < 1 ms sample", "< 1 ms sample"]


def test_the_footer_fits_160_columns_with_the_longest_content_it_can_hold():
    """Every line under the table, whatever a machine puts there: busy processes with the
    longest names a process can have (a comm is 15 characters, a psutil name can be a
    whole command line), every word on every row, points with long labels, a previous
    run, and notes longer than a line with words longer than a line."""
    long_name = "python3 -m some.very.long.module.name --with --many --arguments " * 4
    warnings = [
        "not converged: ±469434.0 % after 3 processes (target ±3 %)",
        THREADS_2,
        RETAKE,
        "wild process: process 3 of 5 at 1.83 ms, the others 1.21-1.25 ms",
        "process 2 of 5 failed: worker died (SIGKILL) " + "x" * 300,
        "sample < 1 ms (24 µs, 1 call(s) per sample): timer overhead may be visible",
        "noisy: IQR is 40% of the median",
        "each call maps ~420 KiB (105 page faults per call): much of the time is the kernel",
        "CPU frequency dropped 40 % during the point",
        "output holds NaN or Inf",
        "above the measured ceiling: 180 % of the copy bandwidth",
        "GPU 0 clocks throttled: power cap",
        "GPU 0 is also used by another process",
    ]
    rows = []
    for k in range(200):
        busy = [_busy(f"{long_name}{j}", 100_000 + 10 * k + j, 99.5) for j in range(6)]
        row = _row(1024 << (k % 20), half=[0.01, 0.3, 4694.0][k % 3], warnings=[*warnings, *busy])
        row["workload"] = "layer_norm_rowwise_with_a_long_workload_name" * 2
        row["variant"] = "torch.nn.functional.layer_norm_" + "v" * 80
        row["process_medians_s"] = [1e-6, 1e-3, 2.0]
        rows.append(row)
    previous = [{**r, "median_s": r["median_s"] * 3, "run_id": "f" * 36} for r in rows]
    lines = footer(rows, target=0.011, previous=previous)
    assert len(lines) > 10  # every kind of line is there, several wrapped
    assert max(len(line) for line in lines) <= 150, max(lines, key=len)
    out, err = io.StringIO(), io.StringIO()
    grid = results_grid(rows[:3], title="run x", footer=[*lines, "y" * 400, "a " + "z" * 400])
    write([grid], "table", out, err)
    text = out.getvalue().splitlines()
    table_end = min(k for k, line in enumerate(text) if line.startswith("└"))
    assert max(len(line) for line in text[table_end + 1 :]) <= 160
    assert "z" * 400 in "".join(line.strip() for line in text)  # wrapped, not cut


def test_an_ab_sides_footer_says_its_interval_is_this_runs_and_names_the_paired_verdict():
    from benchbench.views.run_notes import run_footer

    head = {"id": "head-run-0001", "config": {"ab": {"side": "head", "paired_run": "base-run-01"}}}
    lines = run_footer(head, [_row()], None)  # no run before the one shown
    text = " ".join(line.strip() for line in lines)
    assert "ab head side (base base-run, head head-run)" in text
    assert "±95% CI within this run only" in text
    assert "`benchbench compare base-run head-run`" in text
    plain_run = run_footer({"id": "r", "config": {}}, [_row()], None)
    assert not any("ab " in line for line in plain_run) and plain_run[-1].startswith("verdict:")
