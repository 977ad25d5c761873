"""The zoo's model cases: a decode step that keeps its context, the extra's check, and
the compiled whole declared apart."""

from __future__ import annotations

import pytest
import torch

from benchbench.core.errors import UsageError
from benchbench.suite import model_zoo
from benchbench.suite.capture import capture
from benchbench.suite.captured import declare_capture
from benchbench.suite.declare import Skip, Suite
from benchbench.suite.model_zoo import ModelCase, Shape


def test_without_transformers_the_zoo_names_the_install_command(monkeypatch) -> None:
    monkeypatch.setattr(model_zoo.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"pip install 'benchbench\[models\]'"):
        model_zoo.require_models_extra("zoo")


def test_an_unknown_model_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UsageError, match="'gpt-9' is not in the zoo; known: llama-prefill"):
        ModelCase("gpt-9", Shape(1), torch.float32, "fwd")


def test_the_compiled_whole_is_a_workload_of_its_own_with_its_own_tags() -> None:
    suite = Suite("s")
    declare_capture(
        suite, "m", torch.relu, lambda: torch.randn(4), prefix="m ",
        tags=["quick"], compile=True, compile_tags=["compile"],
    )  # fmt: skip
    whole, compiled = suite.get("m whole"), suite.get("m whole-compiled")
    assert [v.compile for v in whole.variants] == [False]
    assert [(v.name, v.compile) for v in compiled.variants] == [("torch.compile", True)]
    assert "quick" in whole.tags and "quick" in suite.get("m aten.relu#1").tags
    assert "quick" not in compiled.tags and "compile" in compiled.tags


def test_a_factory_that_raises_is_a_skipped_workload_with_the_reason() -> None:
    suite = Suite("s")

    def unknown_config() -> torch.Tensor:
        raise RuntimeError("transformers 5.0 has no FancyConfig")

    assert declare_capture(suite, "fancy", torch.relu, unknown_config, prefix="f ") is None
    (workload,) = suite.workloads
    assert workload.name == "f whole"
    with pytest.raises(Skip, match=r"RuntimeError: transformers 5\.0 has no FancyConfig"):
        workload.setup(None)  # type: ignore[arg-type]


def test_a_decode_step_keeps_its_context_and_copies_the_cache() -> None:
    pytest.importorskip("transformers")
    case = ModelCase("llama-decode", Shape(1, 0, 16), torch.float32, "fwd")
    x = case.inputs()
    first, second = case.run(x), case.run(x)
    # a cache that grew by the step's token would attend over 17, then 18 positions
    assert torch.equal(first, second)
    calls = capture(case.run, x).calls
    cats = [c for c in calls if c.op == "aten.cat.default"]
    shapes = {t.shape for c in cats for t in c.tensors}
    assert (1, 4, 16, 64) in shapes and (1, 4, 1, 64) in shapes  # past + the step's own
