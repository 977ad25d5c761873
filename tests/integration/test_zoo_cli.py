"""The `zoo` suite's models through the real CLI: the extra missing, and real layers at
tiny shapes captured, run and broken down (the published shapes are measured by hand:
BENCHMARKS.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cli import benchbench, env, json_of

# Hides transformers as if the extra were not installed, then runs the CLI.
WITHOUT_EXTRA = """\
import importlib.abc, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "transformers" or name.startswith("transformers."):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, Hide())
import importlib.util
_find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "transformers" else _find(name, *a)
from benchbench.cli import main
sys.exit(main(sys.argv[1:]))
"""

TINY = """\
import torch

from benchbench import Suite
from benchbench.suite.captured import declare_capture
from benchbench.suite.model_zoo import ModelCase, Shape

suite = Suite("tinyzoo")
for name, case in (
    ("bert", ModelCase("bert", Shape(1, 8), torch.float32, "fwd")),
    ("decode", ModelCase("llama-decode", Shape(1, 0, 16), torch.float32, "fwd")),
):
    declare_capture(
        suite, name, case.run, case.inputs, prefix=name + " ", budget_s=0.05,
        cache_key=f"tinyzoo {name}",  # workers read the capture back: no model built
    )


def unknown_config():
    from benchbench.suite.model_zoo import _config

    return _config("NoSuchModelConfig")


declare_capture(suite, "unknown", lambda x: x, unknown_config, prefix="unknown ")
"""


def test_zoo_without_the_models_extra_is_a_usage_error_naming_the_install_command(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, "list", "zoo"],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'benchbench[models]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_real_layers_at_tiny_shapes_capture_run_and_break_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "tinyzoo.py").write_text(TINY)
    store = str(tmp_path / "r.db")
    # BERT's calls, and of the decode step its whole and the cache's copy: a dozen
    # points (each one a worker process) rather than forty
    pick = "bert |decode (whole|aten.cat|aten._scaled_dot_product)|unknown"
    done = benchbench("run", "tinyzoo.py", "--filter", pick, "--budget", "0.05",
                      "--store", store, "--json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json_of(done)["results"]
    skipped = [r for r in results if r["status"] == "skipped"]
    # the config this transformers does not know is one skipped workload with the reason
    assert [r["workload"] for r in skipped] == ["unknown whole"]
    assert "has no NoSuchModelConfig" in skipped[0]["reason"]
    assert all(r["status"] == "ok" for r in results if r not in skipped)
    done = benchbench("breakdown", "--store", store, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = {b["capture"]: b for b in json_of(done)["breakdowns"]}
    assert found["bert"]["whole_s"] > 0 and found["decode"]["whole_s"] > 0
    ops = {c["op"] for c in found["decode"]["calls"]}
    # the decode step appends to the KV cache (a copy) and attends over it
    assert "aten.cat.default" in ops
    assert any("scaled_dot_product" in op for op in ops)
