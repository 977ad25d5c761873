"""Derived work models: FLOPs from FlopCounterMode, bytes from distinct storages."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import torch

from benchbench import Suite, Variant
from benchbench.core.values import Point
from benchbench.measure import workmodel
from benchbench.suite.declare import Workload
from benchbench.suite.inputs import SetupContext
from benchbench.suite.load import builtin_suites, load_suite
from benchbench.views.results import DERIVED_NOTE, result_json, results_grid
from benchbench.views.tables import plain


def _inputs(workload: Workload, point: Point) -> tuple[Any, ...]:
    made = workload.setup(SetupContext(point))
    return tuple(made) if isinstance(made, tuple) else (made,)


def _quick(name: str) -> Workload:
    return load_suite(builtin_suites()["quick"]).get(name)


def test_derived_flops_equal_the_quick_matmuls_hand_written_model_at_every_point():
    workload = _quick("matmul")
    points = workload.points()
    assert len(points) == 4
    for point in points:
        derived = workmodel.derive(
            workload, point, _inputs(workload, point), "fwd", flops=True, bytes=False
        )
        assert derived.flops == workload.flops(point)  # type: ignore[misc]
        assert derived.names == ["flops"]


@pytest.mark.parametrize("name", ["sqrt", "rsqrt", "add"])
def test_derived_bytes_equal_the_quick_elementwise_models_at_every_point(name):
    workload = _quick(name)
    points = workload.points()
    assert {p.variant for p in points} == {v.name for v in workload.variants}
    for point in points:  # in-place and NumPy variants too: the first variant is counted
        derived = workmodel.derive(
            workload, point, _inputs(workload, point), "fwd", flops=True, bytes=True
        )
        assert derived.bytes == workload.bytes(point)  # type: ignore[misc]
        # FlopCounterMode counts no elementwise op: no FLOP model, not zero FLOPs.
        assert derived.flops is None and derived.names == ["bytes"]
        assert derived.variant == workload.variants[0].name


def test_backward_flops_count_the_backward_call_and_bytes_stay_unknown():
    suite = Suite("s")
    workload = suite.workload(
        "mm",
        setup=lambda ctx: (ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)),
        variants=[Variant("torch.matmul", torch.matmul)],
        sizes=[(16, 16)],
        modes=("fwd", "bwd", "fwd_bwd"),
    )
    forward = 2 * 16**3
    got = {}
    for point in workload.points():
        derived = workmodel.derive(
            workload, point, _inputs(workload, point), point["mode"], flops=True, bytes=True
        )
        got[point["mode"]] = (derived.flops, derived.bytes)
    assert got == {
        "fwd": (forward, 3 * 16 * 16 * 4),
        "bwd": (2 * forward, None),  # dA and dB
        "fwd_bwd": (3 * forward, None),
    }


def test_the_precision_autocast_model_matches_the_counted_flops_in_every_mode():
    workload = load_suite(builtin_suites()["precision"]).get("autocast step")
    for point in workload.points(devices=["cpu"]):
        if point.variant != "float32":
            continue
        derived = workmodel.derive(
            workload, point, _inputs(workload, point), point["mode"], flops=True, bytes=False
        )
        assert derived.flops == workload.flops(point), point.label  # type: ignore[misc]


def test_storages_are_counted_once():
    x = torch.ones(16)
    assert workmodel.storage_bytes(x, x.view(4, 4), [x[2:]]) == 64
    assert workmodel.storage_bytes(x, x.sqrt_()) == 64  # an in-place output is its input
    assert workmodel.storage_bytes(x, torch.ones(4, dtype=torch.float64), 3.0) == 96


def test_a_call_that_fails_or_no_torch_variant_is_a_warning_not_a_model():
    suite = Suite("s")

    def broken(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("boom")

    workload = suite.workload(
        "w",
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant("broken", broken)],
        sizes=[8],
    )
    (point,) = workload.points()
    work: dict[str, float | None] = {"flops": None, "bytes": None, "items": None}
    warnings: list[str] = []
    extra: dict[str, Any] = {}
    workmodel.fill(workload, point, _inputs(workload, point), "fwd", work, warnings, extra)
    assert work == {"flops": None, "bytes": None, "items": None}
    assert warnings == ["work model not derived: ValueError: boom"]
    assert "derived" not in extra


def test_fill_derives_only_what_is_not_declared_and_records_it():
    suite = Suite("s")
    workload = suite.workload(
        "mm",
        setup=lambda ctx: (ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)),
        variants=[Variant("torch.matmul", torch.matmul)],
        sizes=[(8, 8)],
        bytes=lambda p: 1.0,
    )
    (point,) = workload.points()
    work: dict[str, float | None] = {"flops": None, "bytes": 1.0, "items": None}
    extra: dict[str, Any] = {}
    workmodel.fill(workload, point, _inputs(workload, point), "fwd", work, [], extra)
    assert work["flops"] == 2 * 8**3 and work["bytes"] == 1.0
    assert extra["derived"] == ["flops"] and extra["derived_from"] == "torch.matmul"
    quiet = suite.workload(
        "mm off",
        setup=lambda ctx: (ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)),
        variants=[Variant("torch.matmul", torch.matmul)],
        sizes=[(8, 8)],
        derive=False,
    )
    (point,) = quiet.points()
    work = {"flops": None, "bytes": None, "items": None}
    workmodel.fill(quiet, point, _inputs(quiet, point), "fwd", work, [], extra := {})
    assert work["flops"] is None and extra == {}


def _row(**kw: Any) -> dict[str, Any]:
    row = {
        "workload": "mm",
        "variant": "torch.matmul",
        "dtype": "float32",
        "device": "cpu",
        "size": 64,
        "shape": [8, 8],
        "params": {},
        "status": "ok",
        "median_s": 1e-6,
        "ci_low_s": 0.9e-6,
        "ci_high_s": 1.1e-6,
        "bytes_per_s": 2e9,
        "flop_per_s": 3e9,
        "extra": {},
    }
    return {**row, **kw}


def test_tables_mark_derived_rates_and_show_the_mode():
    rows = [
        _row(params={"mode": "fwd"}, extra={"derived": ["flops"]}),
        _row(params={"mode": "bwd"}, bytes_per_s=None),
    ]
    grid = results_grid(rows)
    names = [c.name for c in grid.columns]
    assert names[4:7] == ["size", "params", "median"]
    cells = [[plain(c) for c in r] for r in grid.rows]
    assert cells[0][5] == "mode=fwd" and cells[1][5] == "mode=bwd"
    gb, gflop = names.index("GB/s"), names.index("GFLOP/s")
    assert (cells[0][gb], cells[0][gflop]) == ("2", "3*")
    assert (cells[1][gb], cells[1][gflop]) == ("-", "3")
    assert DERIVED_NOTE in grid.notes
    assert result_json(rows[0])["derived"] == ["flops"]
    assert result_json(rows[1])["derived"] == []


def test_tables_without_params_or_derived_figures_are_as_before():
    grid = results_grid([_row()])
    assert "params" not in [c.name for c in grid.columns]
    assert DERIVED_NOTE not in grid.notes


def test_cpu_peak_memory_is_the_calls_high_water_mark_and_imports_no_compiler():
    # In a fresh interpreter: torch.profiler's first session would import torch._inductor
    # and torch._dynamo (~2 s a process); the autograd profiler it uses does not.
    script = (
        "import sys, torch\n"
        "from benchbench.measure.memory import cpu_peak_memory\n"
        "x = torch.ones(1000)\n"
        "print(cpu_peak_memory(lambda a: None, (x,)), cpu_peak_memory(torch.sqrt, (x,)),\n"
        "      cpu_peak_memory(lambda a: a.sqrt().sqrt(), (x,)),\n"
        "      sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    # nothing; one float32 output; the second output allocated while the first is alive
    assert done.stdout.split("\n")[-2] == "0 4000 8000 []"


def test_a_point_asks_its_zygote_for_the_flop_counter_only_when_it_derives_flops(tmp_path):
    from benchbench.run.runner import Planned, RunConfig, job_for

    suite = Suite("s")
    common = {"setup": lambda ctx: ctx.uniform(0.5, 1.5), "sizes": [8]}
    sqrt = [Variant("sqrt", torch.sqrt)]
    derives = {
        "undeclared": suite.workload("a", variants=sqrt, **common),
        "declared": suite.workload("b", variants=sqrt, flops=lambda p: p.numel, **common),
        "off": suite.workload("c", variants=sqrt, derive=False, **common),
    }
    config = RunConfig(suites=(tmp_path,))
    asked = {
        name: job_for(config, Planned.of(tmp_path, w, w.points()[0]), None).request["derives_flops"]
        for name, w in derives.items()
    }
    assert asked == {"undeclared": True, "declared": False, "off": False}
