"""The mode axis: ``modes=`` on a workload, its points, labels, ids and validation."""

from __future__ import annotations

import re

import pytest
import torch

from benchbench import Suite, Variant
from benchbench.core.errors import SuiteError
from benchbench.core.values import Point
from benchbench.suite.load import Selection, select_points


def _suite(**kwargs: object) -> Suite:
    suite = Suite("s")
    suite.workload(
        "mm",
        setup=lambda ctx: (ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)),
        variants=[Variant("torch.matmul", torch.matmul), Variant("a @ b", lambda a, b: a @ b)],
        sizes=[(8, 8), (16, 16)],
        **kwargs,  # type: ignore[arg-type]
    )
    return suite


def test_without_modes_points_ids_and_labels_are_unchanged():
    for suite in (_suite(), _suite(modes=("fwd",))):
        points = suite.workloads[0].points()
        assert len(points) == 4
        for p in points:
            assert p.params == ()
            assert re.fullmatch(r"mm:.+\[float32, cpu\]\(n=\d+x\d+\)", p.label)
            plain = Point("s", "mm", p.variant, p.size, p.shape, p.dtype, p.device)
            assert p.benchmark_id() == plain.benchmark_id()
            assert p.input_seed() == plain.input_seed()


def test_each_mode_is_a_point_with_a_mode_parameter_last():
    suite = _suite(modes=("fwd", "bwd", "fwd_bwd"), params={"k": [1, 2]})
    points = suite.workloads[0].points()
    assert len(points) == 2 * 2 * 2 * 3  # sizes x k x variants x modes
    assert {p["mode"] for p in points} == {"fwd", "bwd", "fwd_bwd"}
    assert all([k for k, _ in p.params] == ["k", "mode"] for p in points)
    bwd = next(p for p in points if p["mode"] == "bwd")
    assert bwd.label.endswith(", mode=bwd)")
    assert bwd.canonical_params["mode"] == "bwd"
    ids = {p.benchmark_id() for p in points}
    assert len(ids) == len(points)  # every mode its own history


def test_work_models_see_the_mode():
    suite = _suite(
        modes=("fwd", "fwd_bwd"),
        flops=lambda p: (3 if p["mode"] == "fwd_bwd" else 1) * 2 * p.shape[0] ** 3,
    )
    workload = suite.workloads[0]
    by_mode = {p["mode"]: workload.flops(p) for p in workload.points() if p.size == 64}  # type: ignore[misc]
    assert by_mode == {"fwd": 1024, "fwd_bwd": 3072}


def test_a_filter_selects_a_mode():
    suite = _suite(modes=("fwd", "bwd"))
    chosen = select_points([suite], Selection(pattern="mode=bwd"))
    assert chosen and {p["mode"] for _, p in chosen} == {"bwd"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"modes": ("fwd", "backward")}, "modes must be distinct values among fwd, bwd, fwd_bwd"),
        ({"modes": ("bwd", "bwd")}, "got ('bwd', 'bwd')"),
        ({"modes": ()}, "modes must be distinct values"),
        ({"modes": "bwd"}, "modes must be a tuple, got the string 'bwd'; write ('bwd',)"),
        (
            {"modes": ("fwd", "bwd"), "params": {"mode": ["a"]}},
            "parameter 'mode' collides with the mode axis",
        ),
    ],
)
def test_bad_modes_name_the_workload_and_the_value(kwargs, message):
    with pytest.raises(SuiteError) as info:
        _suite(**kwargs)
    assert "workload 'mm'" in str(info.value)
    assert message in str(info.value)


def test_a_parameter_named_mode_is_fine_without_the_axis():
    suite = _suite(params={"mode": ["a", "b"]})
    assert {p["mode"] for p in suite.workloads[0].points()} == {"a", "b"}
