"""The timing column of results tables and ``--json``: events, graph, launch-bound."""

from __future__ import annotations

from typing import Any

from benchbench.views.results import RESULT_COLUMNS, result_json, results_grid, timing
from benchbench.views.tables import plain


def _row(device: str, extra: dict[str, Any], status: str = "ok") -> dict[str, Any]:
    return {
        "workload": "add",
        "variant": "torch.add",
        "dtype": "float32",
        "device": device,
        "size": 1024,
        "status": status,
        "reason": "capture failed" if status != "ok" else None,
        "median_s": 1e-6,
        "ci_low_s": 0.99e-6,
        "ci_high_s": 1.01e-6,
        "warnings": [],
        "extra": extra,
    }


def test_timing_names_the_method_of_cuda_points_only() -> None:
    assert timing(_row("cpu", {})) is None
    assert timing(_row("cuda:0", {})) == "events"
    assert timing(_row("cuda", {"launch_bound": True})) == "events, launch-bound"
    graph = {"cuda_graph": {"calls_per_replay": 500}, "launch_bound": False}
    assert timing(_row("cuda", graph)) == "graph x500"
    assert result_json(_row("cuda", graph))["timing"] == "graph x500"
    assert result_json(_row("cpu", {}))["timing"] is None


def test_the_timing_column_appears_when_a_cuda_point_is_in_the_table() -> None:
    cpu_only = results_grid([_row("cpu", {})])
    assert [c.name for c in cpu_only.columns] == [c.name for c in RESULT_COLUMNS]
    grid = results_grid(
        [
            _row("cpu", {}),
            _row("cuda", {"launch_bound": True}),
            _row("cuda", {"cuda_graph": {"calls_per_replay": 8}}),
            _row("cuda", {}, status="skipped"),
        ]
    )
    names = [c.name for c in grid.columns]
    assert names[-2:] == ["timing", "notes"]
    column = [plain(row[-2]) for row in grid.rows]
    assert column == ["-", "events, launch-bound", "graph x8", ""]
    assert plain(grid.rows[3][-1]) == "capture failed"
