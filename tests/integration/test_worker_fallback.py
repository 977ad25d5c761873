"""The real zygote refusing to fork once CUDA is initialised in it, and the runner's
fallback to fresh interpreters. No GPU here: a ``sitecustomize`` on the zygote's path
makes ``torch.cuda.is_initialized()`` say True, as it would after a CUDA call."""

from __future__ import annotations

import os
from pathlib import Path

from benchbench.run.jobs import WorkerPool
from benchbench.run.workers import Zygote

ROOT = Path(__file__).resolve().parents[2]

CUDA_INITIALISED = """
import torch.cuda
torch.cuda.is_initialized = lambda: True
"""


def _served_by_a_zygote_with(sitecustomize: str, folder):  # type: ignore[no-untyped-def]
    """(the answer to an environment request, the pool's notes, the zygote) with
    ``sitecustomize`` on the zygote's and its workers' path."""
    (folder / "sitecustomize.py").write_text(sitecustomize)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
    notes: list[str] = []
    zygote = Zygote(env=env)
    with WorkerPool(zygote, on_note=notes.append) as pool:
        answer = pool.request({"op": "environment", "threads": 1}, ("environment",), 120.0)
    return answer, notes, zygote


def test_a_zygote_with_cuda_initialised_refuses_to_fork_and_the_pool_spawns(tmp_path):
    # Answered by a spawned worker: the zygote forked nothing.
    answer, notes, zygote = _served_by_a_zygote_with(CUDA_INITIALISED, tmp_path)
    assert answer["fields"]["threads"] == 1
    assert notes == [
        "CUDA was initialised in the worker zygote, and a process forked after that cannot "
        "use CUDA; the workers start as fresh interpreters from now on"
    ]
    assert zygote.proc.poll() is not None  # the zygote was closed


CUDA_DRIVER_STARTED_UNSEEN = """
import sys
if "zygote" in sys.argv:
    # In the zygote only: a CUDA device is visible, and something started its driver
    # without torch.cuda.is_initialized() saying so, so its test child cannot use CUDA
    # (on this CPU build it fails as a forked child on a GPU machine would).
    import torch.cuda
    torch.cuda.is_available = lambda: True
"""


def test_a_zygote_whose_test_child_cannot_use_cuda_refuses_to_fork_and_the_pool_spawns(
    tmp_path,
):
    answer, notes, zygote = _served_by_a_zygote_with(CUDA_DRIVER_STARTED_UNSEEN, tmp_path)
    assert answer["fields"]["threads"] == 1
    assert len(notes) == 1
    assert notes[0].startswith(
        "a test child forked from the worker zygote could not initialise CUDA (exit code 1)"
    )
    assert notes[0].endswith("the workers start as fresh interpreters from now on")
    assert zygote.proc.poll() is not None


def test_a_fallback_while_the_suites_load_is_told_when_the_run_starts(tmp_path, monkeypatch):
    # The plan's worker is the first a run asks for: its fallback note waits for the run's
    # progress callback instead of being lost.
    from benchbench.measure.policy import Policy
    from benchbench.run import runner
    from benchbench.run.rounds import Rounds
    from benchbench.store import open_store
    from benchbench.suite.load import Selection

    (tmp_path / "sitecustomize.py").write_text(CUDA_INITIALISED)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(ROOT)]))
    tiny = ROOT / "tests" / "integration" / "suites" / "tiny.py"
    config = runner.RunConfig(
        suites=(tiny,),
        selection=Selection(pattern="sum"),
        policy=Policy(max_time_s=0.01),
        rounds=Rounds(count=1, max_count=1),
    )
    events: list[tuple[str, dict]] = []
    with runner.Session(config) as session:
        assert [p.point.label for p in session.plan.points] == [
            "sum:torch.sum[float32, cpu](n=1024)"
        ]
        summary = session.run(
            open_store(str(tmp_path / "s.db"), create=True), lambda e, d: events.append((e, d))
        )
    assert summary.count("ok") == 1
    notes = [data["message"] for event, data in events if event == "note"]
    assert len(notes) == 1 and notes[0].endswith(
        "the workers start as fresh interpreters from now on"
    )
