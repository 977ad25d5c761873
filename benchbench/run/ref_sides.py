"""Sides named by git refs, made ready to measure: built (or found in the cache), proved to
import their own commit, and recorded on their runs. ``ab --base-ref/--head-ref`` and
``bisect`` go through here; the measuring is ``ab``'s (:func:`benchbench.run.ab.run_ab`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchbench.core.errors import UsageError
from benchbench.run.ab import CHECK_TIMEOUT_S, Side
from benchbench.run.refs import Commit
from benchbench.run.side_build import (
    BuiltSide,
    Proof,
    build,
    importable_here,
    prove,
    worker_environment,
)
from benchbench.store import Store
from benchbench.suite.load import Selection


@dataclass(frozen=True)
class ReadySide:
    """A built side and where its Python imports the repository's modules from."""

    flag: str
    built: BuiltSide
    proof: Proof

    def side(self, name: str, label: str) -> Side:
        """The side as ``run_ab`` takes it."""
        return Side(name, self.built.python, label)

    def describe(self) -> str:
        """``--base-ref main (3f2a1c0d9e): cached (0.0 s); mypkg from /…/mypkg/__init__.py``"""
        how = "cached" if self.built.cached else "built"
        modules = ", ".join(f"{name} from {where}" for name, where in self.proof.modules.items())
        return (
            f"{self.flag} {self.built.commit.name}: {how} ({self.built.seconds:.1f} s) "
            f"in {self.built.entry.folder}; {modules}"
        )


def ready(repo: Path, commit: Commit, flag: str, install: str | None) -> ReadySide:
    """``commit``'s side, built or from the cache, proved to import its own code.

    Its workers never see the current folder on ``sys.path``: this process's environment,
    which the workers inherit, becomes :func:`worker_environment`'s."""
    wanted = worker_environment()
    for name in set(os.environ) - set(wanted):
        del os.environ[name]
    os.environ.update(wanted)
    built = build(repo, commit, install)
    return ReadySide(flag, built, prove(built, flag))


def plan_here(side: ReadySide) -> list[str]:
    """Let this process load the suites with ``side``'s code (the runner plans the points
    with it; both sides must load them to the same point ids)."""
    return importable_here(side.proof)


def record(store: Store, run_id: str, commit: Commit) -> None:
    """The commit a side measured, on its run (in place of the current folder's state)."""
    sha, dirty = commit.recorded
    store.update_run(run_id, git_sha=sha, git_branch=commit.ref, git_dirty=dirty)


#: Run by a side's Python: the labels of the points its code loads the suites to, by id.
_POINTS = """
import json, sys
from pathlib import Path
from benchbench.suite.load import Selection, load_suite, select_points
given = json.loads(sys.argv[1])
selection = Selection(
    devices=tuple(given["devices"]) if given.get("devices") else None,
    dtypes=tuple(given["dtypes"]) if given.get("dtypes") else None,
    pattern=given.get("pattern"),
    tags=tuple(given.get("tags") or ()),
)
suites = [load_suite(Path(p)) for p in sys.argv[2:]]
print(json.dumps({p.benchmark_id(w.version): p.label for w, p in select_points(suites, selection)}))
sys.stdout.flush()
import os; os._exit(0)  # torch's teardown costs ~1 s of CPU and says nothing
"""


def point_labels(side: ReadySide, suites: Sequence[Path], selection: Selection) -> dict[str, str]:
    """The points ``side``'s code loads ``suites`` to, label by benchmark id."""
    done = subprocess.run(
        [side.built.python, "-c", _POINTS, json.dumps(dataclasses.asdict(selection))]
        + [str(p) for p in suites],
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise UsageError(
            f"{side.flag} {side.built.commit.name} cannot load the suites: "
            f"{done.stderr.strip()[-400:]}"
        )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def check_same_points(
    ends: Sequence[ReadySide], suites: Sequence[Path], selection: Selection
) -> int:
    """UsageError naming the points that only one of two sides' code loads; the number of
    points otherwise."""
    first, second = (point_labels(side, suites, selection) for side in ends)
    if first.keys() == second.keys():
        return len(first)
    only = [
        f"only at {side.flag} {side.built.commit.name}: "
        + ", ".join(sorted(mine[k] for k in mine.keys() - theirs.keys())[:8])
        for side, mine, theirs in ((ends[0], first, second), (ends[1], second, first))
        if mine.keys() - theirs.keys()
    ]
    raise UsageError(
        "the two ends load the suites to different points ("
        + "; ".join(only)
        + "); the points compared must exist at both: narrow them with --filter"
    )
