"""capture -> run -> breakdown through the real CLI, on a tiny model."""

from __future__ import annotations

from pathlib import Path

from tests.integration.cli import benchbench, json_of

MODEL = """\
import torch

torch.manual_seed(0)
emb = torch.nn.Embedding(100, 16)
lin = torch.nn.Linear(16, 16)


def model(ids):
    with torch.no_grad():
        return lin(emb(ids)).relu()


def make_inputs():
    return (torch.randint(0, 100, (8, 4)),)


def broken():
    raise ValueError("no weights here")
"""


def test_capture_run_breakdown(tmp_path: Path) -> None:
    (tmp_path / "tiny_model.py").write_text(MODEL)
    done = benchbench(
        "capture", "tiny_model.py:model", "--args-from", "make_inputs", "-o", "tiny_ops.py",
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ops = {c["op"]: c["calls"] for c in json_of(done)["calls"]}
    assert ops == {"aten.embedding.default": 1, "aten.addmm.default": 1, "aten.relu.default": 1}
    assert "aten.view.default" in {v["op"] for v in json_of(done)["views"]}
    store = str(tmp_path / "r.db")
    done = benchbench("run", "tiny_ops.py", "--budget", "0.05", "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = benchbench("breakdown", "--store", store, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (b,) = json_of(done)["breakdowns"]
    assert b["capture"] == "model" and b["whole_s"] > 0
    assert sorted(c["workload"] for c in b["calls"]) == [
        "aten.addmm#1", "aten.embedding#1", "aten.relu#1",
    ]  # fmt: skip
    assert abs(sum(c["share"] for c in b["calls"]) - 1) < 1e-9
    assert b["coverage"] == b["sum_s"] / b["whole_s"]


def test_capture_errors_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "tiny_model.py").write_text(MODEL)
    done = benchbench("capture", "tiny_model.py:broken", "-o", "x.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "ValueError: no weights here" in done.stderr and "Traceback" not in done.stderr
    done = benchbench("capture", "tiny_model.py:nothing", "-o", "x.py", cwd=tmp_path)
    assert done.returncode == 2 and "'nothing' not found" in done.stderr
    done = benchbench("capture", "tiny_model.py", "-o", "x.py", cwd=tmp_path)
    assert done.returncode == 2 and "MODULE_OR_FILE:NAME" in done.stderr
    assert not (tmp_path / "x.py").exists()
