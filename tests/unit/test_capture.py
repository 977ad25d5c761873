"""Capturing a callable's aten calls, regenerating their inputs, writing the suite file."""

from __future__ import annotations

import json

import pytest
import torch

from benchbench.core.values import Point
from benchbench.suite.capture import CaptureError, Opaque, TensorSpec, capture, number_calls
from benchbench.suite.capture_cache import from_json, to_json
from benchbench.suite.capture_file import render
from benchbench.suite.captured import declare_calls, declare_capture, regenerate
from benchbench.suite.declare import Skip, Suite
from benchbench.suite.inputs import SetupContext
from benchbench.suite.load import load_suite


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(50, 8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.lin(self.emb(ids))
        return self.lin(torch.relu(h)).sum()


def tiny_inputs() -> tuple[torch.Tensor]:
    torch.manual_seed(0)
    return (torch.randint(3, 40, (4, 5)),)


def _capture():
    model = Tiny()
    with torch.no_grad():
        return capture(model, *tiny_inputs())


def test_counts_shapes_and_int_ranges() -> None:
    captured = _capture()
    summary = dict(captured.summary())
    # the linear layer runs twice on the same shapes: one distinct call, counted twice
    assert summary["aten.addmm.default"] == 2
    addmm = [c for c in captured.calls if c.op == "aten.addmm.default"]
    assert len(addmm) == 1 and addmm[0].count == 2
    bias, x, weight_t = addmm[0].tensors
    assert (bias.shape, x.shape, weight_t.shape) == ((8,), (20, 8), (8, 8))
    assert weight_t.stride == (1, 8)  # the transposed weight keeps its strides
    embedding = next(c for c in captured.calls if c.op == "aten.embedding.default")
    indices = embedding.tensors[1]
    ids = tiny_inputs()[0]
    assert indices.dtype == "int64"
    assert (indices.low, indices.high) == (ids.min().item(), ids.max().item())
    relu_in = next(c for c in captured.calls if c.op == "aten.relu.default").tensors[0]
    assert relu_in.low is not None and relu_in.low < 0


def test_views_are_kept_apart() -> None:
    captured = _capture()
    timed = {c.op for c in captured.calls}
    untimed = {op for op, _ in captured.view_summary()}
    assert {"aten.t.default", "aten.view.default"} <= untimed
    assert not timed & {"aten.t.default", "aten.view.default", "aten._unsafe_view.default"}
    assert "aten.addmm.default" not in untimed


def test_names_number_each_op_from_one() -> None:
    names = [n for n, _ in number_calls(_capture().calls)]
    assert "aten.addmm#1" in names and "aten.embedding#1" in names
    assert len(names) == len(set(names))


def test_a_callable_that_raises_is_a_capture_error() -> None:
    def broken(x: torch.Tensor) -> None:
        x.sum()
        raise ValueError("shapes do not match")

    with pytest.raises(CaptureError, match=r"'.*broken'.*ValueError: shapes do not match"):
        capture(broken, torch.ones(3))


def test_a_capture_of_nothing_has_no_calls_and_declares_a_skip() -> None:
    captured = capture(lambda: 3)
    assert captured.calls == ()
    suite = Suite("nothing")
    declare_calls(suite, "noop", captured.calls)
    (workload,) = suite.workloads
    point = workload.points()[0]
    with pytest.raises(Skip, match="recorded no aten call"):
        workload.setup(SetupContext(point))


def test_a_raising_callable_at_suite_load_becomes_a_skipped_workload() -> None:
    suite = Suite("broken")

    def fails() -> None:
        raise RuntimeError("no weights")

    assert declare_capture(suite, "fails", fails) is None
    (workload,) = suite.workloads
    with pytest.raises(Skip, match="RuntimeError: no weights"):
        workload.setup(SetupContext(workload.points()[0]))


def test_generator_and_sparse_arguments_skip_with_the_reason() -> None:
    generator = torch.Generator().manual_seed(1)
    sparse = torch.eye(3).to_sparse()
    captured = capture(lambda: (torch.rand(4, generator=generator), sparse * 2))
    reasons = [c.unsupported for c in captured.calls if c.unsupported]
    assert any("torch.Generator" in r for r in reasons)
    assert any("sparse" in r for r in reasons)
    suite = Suite("opaque")
    declare_calls(suite, "x", captured.calls)
    opaque = [c for c in captured.calls if any(isinstance(a, Opaque) for a in c.args)]
    assert opaque
    skips = []
    for workload in suite.workloads:
        try:
            workload.setup(SetupContext(workload.points()[0]))
        except Skip as exc:
            skips.append(str(exc))
    assert len(skips) == len(reasons)
    assert all("cannot regenerate an argument" in s for s in skips)


def test_regenerate_honours_strides_offsets_and_ranges() -> None:
    point = Point("s", "w", "v", 1, (1,), "float32", "cpu")
    ctx = SetupContext(point)
    spec = TensorSpec((4, 3), (1, 4), "int64", "cpu", offset=2, low=5, high=9)
    t = regenerate(ctx, spec, "int64", "cpu")
    assert t.shape == (4, 3) and t.stride() == (1, 4) and t.storage_offset() == 2
    assert int(t.min()) >= 5 and int(t.max()) <= 9
    nonneg = regenerate(
        ctx, TensorSpec((100,), (1,), "float32", "cpu", 0, 0.0, 2.0), "float32", "cpu"
    )
    assert float(nonneg.min()) >= 0.0 and float(nonneg.max()) <= 2.0
    expanded = regenerate(ctx, TensorSpec((5, 8), (0, 1), "float32", "cpu"), "bfloat16", "cpu")
    assert expanded.dtype == torch.bfloat16 and expanded.stride() == (0, 1)
    flags = regenerate(ctx, TensorSpec((64,), (1,), "bool", "cpu"), "bool", "cpu")
    assert 0 < int(flags.sum()) < 64


def test_cache_round_trips_a_capture() -> None:
    captured = _capture()
    again = from_json(to_json(captured))
    assert again == captured
    with pytest.raises(ValueError, match="format"):
        from_json(json.dumps({"format": 99}))


def test_written_suite_loads_and_regenerates_inputs_in_bounds(tmp_path) -> None:
    module = tmp_path / "tiny_model.py"
    module.write_text(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "emb = torch.nn.Embedding(50, 8)\n"
        "def model(ids):\n"
        "    with torch.no_grad():\n"
        "        return emb(ids).relu().sum(-1)\n"
        "def make():\n"
        "    return (torch.randint(3, 40, (4, 5)),)\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_model_t", module)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    torch.manual_seed(0)
    captured = capture(loaded.model, *loaded.make())
    source = render(
        captured,
        suite_name="tiny_ops",
        target=(str(module), "model"),
        factory=(str(module), "make"),
        command="benchbench capture tiny_model.py:model --args-from make -o tiny_ops.py",
    )
    path = tmp_path / "tiny_ops.py"
    path.write_text(source)
    suite = load_suite(path)
    names = [w.name for w in suite.workloads]
    assert names[-1] == "whole" and "aten.embedding#1" in names
    embedding = suite.get("aten.embedding#1")
    point = embedding.points()[0]
    assert point["count"] == 1 and point["capture"] == "model"
    table, ids = embedding.setup(SetupContext(point))
    assert table.shape == (50, 8)
    assert int(ids.min()) >= 3 and int(ids.max()) < 40  # in the table, and in the recorded range
    out = embedding.variants[0].fn(table, ids)
    assert out.shape == (4, 5, 8)
    whole = suite.get("whole")
    (ids_again,) = whole.setup(SetupContext(whole.points()[0]))
    assert ids_again.shape == (4, 5)
    assert whole.variants[0].fn(ids_again).shape == (4, 5)


def test_cached_capture_runs_the_callable_once(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path))
    from benchbench.suite.capture_cache import cached_capture

    runs = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        runs.append(1)
        return x * 2

    first = cached_capture("k", fn, lambda: (torch.ones(3),))
    again = cached_capture("k", fn, lambda: pytest.fail("inputs built on a cache hit"))
    assert runs == [1] and again == first
    assert [c.op for c in again.calls] == ["aten.mul.Tensor"]
    (path,) = (tmp_path / "captures").iterdir()
    path.write_text("{not json")  # a broken file is captured again, not an error
    assert cached_capture("k", fn, lambda: (torch.ones(3),)) == first and runs == [1, 1]
