"""The runner plans by what a worker lists (:func:`benchbench.run.runner.plan_in`): the
points and suites as :func:`~benchbench.run.runner.plan` gives them in-process, and a
suite's error raised in the runner as the worker met it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from benchbench.core.errors import SuiteError, UsageError
from benchbench.run import planning, runner
from benchbench.suite.load import Selection

TINY = Path(__file__).parents[1] / "integration" / "suites" / "tiny.py"


class _OnePool:
    """A pool whose worker is this process: it answers with ``answer(request)``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    def request(self, payload: dict[str, Any], events: tuple[str, ...], timeout_s: float) -> Any:
        self.requests.append(payload)
        return self.answer(payload)


def test_a_workers_plan_is_the_in_process_plan_and_names_the_suites() -> None:
    config = runner.RunConfig(suites=(TINY,), selection=Selection(pattern="sqrt"))
    pool = _OnePool(planning.answer_plan)
    got = runner.plan_in(pool, config)  # type: ignore[arg-type]
    assert pool.requests == [planning.plan_request(config.suites, config.selection)]
    assert got.points == runner.plan(config) and len(got.points) == 3
    assert [s["name"] for s in got.suites] == ["tiny"] and got.suites[0]["hash"]
    assert {p.derives_flops for p in got.points} == {False}  # tiny declares its FLOPs


def test_a_suites_error_in_the_worker_is_raised_in_the_runner_as_it_was(tmp_path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nx = (\n")
    config = runner.RunConfig(suites=(broken,))
    with pytest.raises(SuiteError, match=r"broken.py', line 2: syntax error"):
        runner.plan_in(_OnePool(planning.answer_plan), config)  # type: ignore[arg-type]
    usage = _OnePool(
        lambda _r: {"event": "plan", "error": "bad --dtype", "error_type": "UsageError"}
    )
    with pytest.raises(UsageError, match="bad --dtype"):
        runner.plan_in(usage, config)  # type: ignore[arg-type]
    # Not benchbench's own (a bug in a suite's helper): the class name stays in the message.
    other = _OnePool(lambda _r: {"event": "plan", "error": "boom", "error_type": "KeyError"})
    with pytest.raises(SuiteError, match=r"^KeyError: boom$"):
        runner.plan_in(other, config)  # type: ignore[arg-type]


def test_a_selection_comes_back_from_json_as_it_went():
    for selection in (
        Selection(),
        Selection(devices=("cpu", "cuda:1"), dtypes=(), pattern="sqrt", tags=("smoke",)),
    ):
        again = Selection.from_dict(json.loads(json.dumps(dataclasses.asdict(selection))))
        assert again == selection
    older = {"devices": None, "pattern": "x", "renamed_in_a_later_version": 1}
    assert Selection.from_dict(older) == Selection(pattern="x")
