"""The breakdown of a captured callable, from fake stored rows."""

from __future__ import annotations

import pytest

from benchbench.analysis.breakdown import breakdowns
from benchbench.views.breakdown import breakdown_grid, breakdown_json, coverage_note
from benchbench.views.tables import plain


def row(workload, median_s, count=None, status="ok", capture="m", device="cpu", reason=None):
    params = {"capture": capture} if count is None else {"capture": capture, "count": count}
    return {
        "suite": "s",
        "workload": workload,
        "variant": f"op.{workload}",
        "dtype": "float32",
        "device": device,
        "params": params,
        "status": status,
        "reason": reason,
        "median_s": median_s if status == "ok" else None,
        "bytes_per_s": 1e9,
    }


def test_ranks_by_count_times_median_with_shares_and_coverage() -> None:
    rows = [
        row("aten.add#1", 1e-3, count=3),  # 3 ms
        row("aten.mm#1", 4e-3, count=1),  # 4 ms
        row("aten.relu#1", 1e-3, count=1),  # 1 ms
        row("whole", 10e-3),
        {"suite": "s", "workload": "other", "params": {}, "device": "cpu", "status": "ok"},
    ]
    (b,) = breakdowns(rows)
    assert [c.workload for c in b.calls] == ["aten.mm#1", "aten.add#1", "aten.relu#1"]
    assert b.sum_s == pytest.approx(8e-3)
    assert [c.share for c in b.calls] == pytest.approx([0.5, 0.375, 0.125])
    assert b.whole_s == pytest.approx(10e-3)
    assert b.coverage == pytest.approx(0.8)
    assert b.remainder_s == pytest.approx(2e-3)
    assert "coverage 0.80" in coverage_note(b)


def test_groups_by_capture_and_device_and_lists_what_was_not_measured() -> None:
    rows = [
        row("a#1", 1e-3, count=2, capture="fwd"),
        row("a#1", 1e-3, count=2, capture="bwd"),
        row("b#1", None, count=1, capture="bwd", status="skipped", reason="cannot regenerate"),
        row("a#1", 2e-3, count=2, capture="fwd", device="cuda"),
    ]
    found = breakdowns(rows)
    assert [(b.capture, b.device) for b in found] == [
        ("fwd", "cpu"),
        ("bwd", "cpu"),
        ("fwd", "cuda"),
    ]
    bwd = found[1]
    assert bwd.not_measured == (("b#1", "cannot regenerate"),)
    assert bwd.whole_s is None and bwd.coverage is None
    assert "not measured in this run" in coverage_note(bwd)


def test_table_and_json_carry_the_ranked_calls() -> None:
    (b,) = breakdowns([row("aten.mm#1", 4e-3, count=2), row("whole", 4e-3)])
    grid = breakdown_grid(b)
    assert [plain(c) for c in grid.rows[0]][:8] == [
        "1", "aten.mm#1", "op.aten.mm#1", "float32", "2", "4 ms", "8 ms", "100.0 %",
    ]  # fmt: skip
    assert "remainder 4 ms over" in grid.notes[0]
    (doc,) = breakdown_json([b])
    assert doc["coverage"] == pytest.approx(2.0)
    assert doc["calls"][0]["total_s"] == pytest.approx(8e-3)


def test_the_compiled_whole_stands_beside_the_eager_one_with_its_break_even() -> None:
    compiled = {**row("whole-compiled", 4e-3), "variant": "torch.compile"}
    compiled["extra"] = {"compile_s": 30.0}
    (b,) = breakdowns([row("aten.mm#1", 5e-3, count=1), row("whole", 10e-3), compiled])
    # the eager whole, not the compiled one, is what the calls are held to
    assert b.whole_s == pytest.approx(10e-3) and b.coverage == pytest.approx(0.5)
    assert b.compiled_s == pytest.approx(4e-3) and b.compile_s == pytest.approx(30.0)
    assert b.compile_pays_after == pytest.approx(30.0 / 6e-3)  # 6 ms saved a call
    assert "paid back after 5,000 calls" in breakdown_grid(b).notes[1]
    assert breakdown_json([b])[0]["compile_pays_after"] == pytest.approx(5000)
    slower = {**compiled, "median_s": 12e-3}
    (b,) = breakdowns([row("whole", 10e-3), slower])
    assert b.compile_pays_after is None
    assert "never paid back" in breakdown_grid(b).notes[1]
