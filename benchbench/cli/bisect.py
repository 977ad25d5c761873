"""Find the first commit between --good and --bad where the suite's points got slower.

Each step builds a commit's side as `ab --base-ref` does (cached by commit, torch shared)
and judges it against the good commit with ab's paired verdict: different (a point
slower), same (no point slower, and the one-sided bound of the points' geometric-mean
ratio below 1 + --min-effect) or unknown, then measured again at most twice, each look
at --alpha / 3 and judged on the commit's looks so far pooled. The bad end is measured
first; commits that fail to build are skipped, as `git bisect skip`. Every look goes to
--log; --resume continues it.
Method and recipe: docs/compare.md, "Which commit did it".

Exit codes: 3 a culprit named (or its candidates, when skipped commits hide it; 0 with
--no-fail-on-regression); 0 the bad end is not slower; 1 error; 2 usage (a ref that
names no commit, good not an ancestor of bad, ends that load different points); 130/143
interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbench.cli import compare, flags
from benchbench.cli import run as run_cli
from benchbench.core.defaults import AB_ROUND_S, AB_ROUNDS
from benchbench.core.errors import UsageError

if TYPE_CHECKING:
    from benchbench.analysis.bisect import Bisection, Look
    from benchbench.run.ref_sides import ReadySide
    from benchbench.run.refs import Commit
    from benchbench.views.tables import Grid

HELP = "find the first commit where a suite's points got slower (paired ab per step)"
EXIT_CULPRIT, EXIT_NOT_SLOWER = 3, 0
LOG_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_selection(parser)
    parser.add_argument("--good", metavar="REF", required=True, help="a commit known not slower")
    parser.add_argument(
        "--bad",
        metavar="REF",
        required=True,
        help="a later commit found slower (WORKTREE: the working tree)",
    )
    flags.add_repo(parser)
    parser.add_argument(
        "--rounds",
        type=int,
        default=AB_ROUNDS,
        metavar="N",
        help="rounds of each step's ab (default %(default)s)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="sampling time per point and side of a step (default {{ default.ab_round_s }} s x "
        "--rounds)",
    )
    flags.add_seed(parser)
    flags.add_threads(parser)
    compare.add_verdict(parser)
    parser.add_argument(
        "--log", metavar="FILE", type=Path, help="the steps' log (default bisect-GOOD-BAD.jsonl)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue the log's search instead of refusing it"
    )
    flags.add_store(parser, create=True)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.analysis.bisect import bisect, replaying
    from benchbench.cli.ab import check_pairs
    from benchbench.run import refs
    from benchbench.run.ref_sides import check_same_points, plan_here, ready

    check_pairs(args)
    repo = refs.repository(args.repo)
    good = refs.resolve(repo, args.good, "--good")
    bad = refs.resolve(repo, args.bad, "--bad")
    refs.check_ancestor(repo, good, bad)
    commits = refs.between(repo, good, bad)
    suites = flags.suite_paths(args)
    selection = flags.selection_from(args)
    header = _header(args, good, bad, suites, selection)
    log_path = args.log or Path(f"bisect-{good.short}-{bad.short}.jsonl")
    recorded = _read_log(log_path, header, args.resume)
    err = flags.stderr()
    good_side = ready(repo, good, "--good", args.install)
    err.print(good_side.describe(), markup=False, highlight=False, soft_wrap=True)
    bad_side = ready(repo, commits[-1], "--bad", args.install)
    err.print(bad_side.describe(), markup=False, highlight=False, soft_wrap=True)
    points = check_same_points((good_side, bad_side), suites, selection)
    plan_here(good_side)
    err.print(
        f"bisect: {len(commits)} commit(s) after {good.name} up to {bad.name}, {points} "
        f"point(s) deciding; log {log_path}"
        + (f" ({len(recorded)} look(s) resumed)" if recorded else ""),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    store = flags.store_from(args)
    step = _Step(args, repo, good_side, {c.sha: c for c in commits}, store, log_path)
    step.remember(recorded)
    with log_path.open("a") as log:
        if not recorded:
            log.write(json.dumps(header) + "\n")
        step.log = log
        try:
            found = bisect([c.sha for c in commits], replaying(recorded, step))
        except _Stopped:
            err.print(f"[yellow]interrupted: the steps taken are in {log_path} (--resume)[/yellow]")
            return 128 + (step.stopped or 2)
    return _report(args, found, {c.sha: c for c in commits}, good)


def _header(
    args: argparse.Namespace, good: Commit, bad: Commit, suites: Any, selection: Any
) -> dict:
    """What a log was started with: a resume must ask the same question."""
    return {
        "bisect_log": LOG_VERSION,
        "good": good.sha,
        "bad": bad.sha,
        "suites": [str(p) for p in suites],
        "selection": dataclasses.asdict(selection),
        "install": args.install,
        "rounds": args.rounds,
        "budget": args.budget,
        "min_effect": args.min_effect,
        "alpha": args.alpha,
        "power": args.power,
    }


def _read_log(path: Path, header: dict, resume: bool) -> list[Look]:
    """The looks a log holds (``--resume``); a usage error for a log that exists without
    ``--resume``, is missing with it, or was started with other arguments."""
    from benchbench.analysis.bisect import Look

    if not resume:
        if path.exists():
            raise UsageError(
                f"--log {path} exists: add --resume to continue its search, or remove it"
            )
        return []
    if not path.exists():
        raise UsageError(f"--resume: no log at {path}; give the log's path with --log FILE")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines or lines[0].get("bisect_log") != LOG_VERSION:
        raise UsageError(f"--log {path} is not a bisect log (its first line is no header)")
    # Compared as the log holds it: JSON reads a tuple of the selection back as a list.
    asked = json.loads(json.dumps(header))
    changed = sorted(k for k in asked if lines[0].get(k) != asked[k])
    if changed:
        raise UsageError(
            f"--log {path} was started with other {', '.join(changed)}; resume it with the "
            "same arguments, or start a new log (--log FILE)"
        )
    return [Look.from_dict(line) for line in lines[1:]]


class _Step:
    """The verdict oracle of a bisection: builds a commit's side and judges it against
    the good commit with ``ab``'s paired verdict; every look is appended to the log."""

    def __init__(
        self,
        args: argparse.Namespace,
        repo: Path,
        good: ReadySide,
        commits: dict[str, Commit],
        store: Any,
        log_path: Path,
    ) -> None:
        self.args, self.repo, self.good, self.commits, self.store = args, repo, good, commits, store
        self.log_path = log_path
        self.log: Any = None
        self.stopped: int | None = None
        self.sides: dict[str, ReadySide | str] = {}
        #: Interpreters whose torch and benchbench imports were checked (once a bisect:
        #: each check imports torch, ~3-4 s, and the good side is in every step).
        self.checked: set[str] = set()
        #: The runs (good, commit) of each commit's looks so far, by look number: a
        #: commit's next look is judged on the rounds of all of them.
        self.runs: dict[str, dict[int, list[str]]] = {}

    def remember(self, looks: Sequence[Look]) -> None:
        """Keep the runs of ``looks`` (a resumed log's, or this search's own)."""
        for look in looks:
            runs = look.evidence.get("runs")
            if isinstance(runs, list) and len(runs) == 2:
                self.runs.setdefault(look.commit, {})[look.look] = [str(r) for r in runs]

    def __call__(self, sha: str, look: int) -> Look:
        from benchbench.analysis.bisect import SKIP, Look

        started = time.monotonic()
        if self.stopped is not None:
            raise _Stopped()
        side = self._side(sha)
        if isinstance(side, str):
            found = Look(sha, look, SKIP, time.monotonic() - started, {"reason": side})
        else:
            found = self._measure(side, look, started)
        self.remember([found])
        self.log.write(json.dumps(found.to_dict()) + "\n")
        self.log.flush()
        together = found.evidence.get("together")
        flags.stderr().print(
            f"step: {self.commits[sha].name} look {look}: {found.outcome} "
            f"({found.seconds:.1f} s"
            + (f"; together < {together:.3f}" if together and found.outcome != "different" else "")
            + ")"
            + (f": {found.evidence['reason']}" if "reason" in found.evidence else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return found

    def _side(self, sha: str) -> ReadySide | str:
        """The commit's side, or why it cannot be built (the step is then skipped)."""
        from benchbench.run.ref_sides import ready
        from benchbench.run.side_build import BuildError

        if sha not in self.sides:
            try:
                built = ready(self.repo, self.commits[sha], "step", self.args.install)
                flags.stderr().print(
                    built.describe(), markup=False, highlight=False, soft_wrap=True
                )
                self.sides[sha] = built
            except BuildError as exc:
                self.sides[sha] = f"skipped: {str(exc).splitlines()[0]}"
        return self.sides[sha]

    def _measure(self, side: ReadySide, look: int, started: float) -> Look:
        from benchbench.analysis import compare as analysis
        from benchbench.analysis.bisect import (
            Look,
            look_alpha,
            point_evidence,
            step_outcome,
            together_bound,
        )
        from benchbench.analysis.sides import pooled_runs
        from benchbench.run.ab import check_sides, run_ab
        from benchbench.run.ref_sides import record

        commit = side.built.commit
        sides = (
            self.good.side("base", f"bisect-good:{self.good.built.commit.short}"),
            side.side("head", f"bisect:{commit.short}#{look}"),
        )
        check_sides([checking for checking in sides if checking.python not in self.checked])
        self.checked.update(checking.python for checking in sides)
        stop = _stop_request()
        with flags.progress_bar(flags.stderr()) as progress, flags.stop_on_signals(stop):
            summary = run_ab(
                _config(self.args, look),
                sides,
                self.store,
                flags.progress_events(progress, "step"),
                stop,
                checked=True,
            )
        if summary.status == "interrupted":
            self.stopped = int(stop.signum or 2)
            raise _Stopped()
        record(self.store, summary.run_ids[0], self.good.built.commit)
        record(self.store, summary.run_ids[1], commit)
        looks = [runs for n, runs in sorted(self.runs.get(commit.sha, {}).items()) if n < look]
        looks.append(list(summary.run_ids))
        # Every look so far at this commit, pooled: look n is judged on n looks' rounds
        # (each look's test still at alpha / max_looks, so the union bound holds).
        rows = [
            pooled_runs([self.store.measurements(runs[side]) for runs in looks]) for side in (0, 1)
        ]
        result = analysis.compare_rows(
            rows[0],
            rows[1],
            min_effect=self.args.min_effect,
            alpha=look_alpha(self.args.alpha),
            paired=True,
            power=self.args.power,
        )
        # `same`: the points together, one-sided at the look's alpha (an equivalence test).
        together = together_bound(rows[0], rows[1], look_alpha(self.args.alpha))
        evidence = {
            "runs": list(summary.run_ids),
            "pooled": looks[:-1],
            "built": not side.built.cached,
            "alpha": look_alpha(self.args.alpha),
            "points": point_evidence(result.points),
            "together": together,
        }
        outcome = step_outcome(result.points, self.args.min_effect, together)
        return Look(commit.sha, look, outcome, time.monotonic() - started, evidence)


class _Stopped(Exception):
    """A signal stopped a step; the search ends, its log kept."""


def _stop_request() -> Any:
    from benchbench.run.workers import StopRequest

    return StopRequest()


def _config(args: argparse.Namespace, look: int) -> Any:
    """A step's run configuration, as ``ab``'s; each look its own seed (independent looks)."""
    from benchbench.measure.policy import Policy
    from benchbench.run import runner
    from benchbench.run.rounds import Rounds

    budget = args.budget if args.budget is not None else AB_ROUND_S * args.rounds
    return runner.RunConfig(
        suites=flags.suite_paths(args),
        selection=flags.selection_from(args),
        policy=dataclasses.replace(Policy(), max_time_s=budget),
        threads=flags.threads_from(args),
        cpus=flags.cpus_from(args),
        timeout_s=run_cli.DEFAULT_TIMEOUT_S,
        rounds=Rounds.fixed(args.rounds, (args.seed or 0) + 1000 * look),
    )


def _report(
    args: argparse.Namespace, found: Bisection, commits: dict[str, Commit], good: Commit
) -> int:
    """Print the search's end (JSON with --json) and return its exit code."""
    from benchbench.analysis.bisect import AMBIGUOUS, CULPRIT, NOT_SLOWER

    measured = [look for look in found.looks if look.outcome != "skip"]
    # The evidence of the first commit found slower: the culprit, or the last candidate.
    first_slower = found.culprit or (found.candidates[-1] if found.candidates else None)
    deciding = found.deciding(first_slower) if first_slower else None
    again = sum(look.look > 1 for look in measured)
    document = {
        "status": found.status,
        "good": good.sha,
        "culprit": _commit_info(commits[found.culprit]) if found.culprit else None,
        "last_same": found.last_same or good.sha,
        "candidates": [_commit_info(commits[c]) for c in found.candidates],
        "skipped": list(found.skipped),
        "steps": found.steps,
        "remeasured": again,
        "seconds": round(found.seconds, 3),
        "evidence": dict(deciding.evidence) if deciding is not None else None,
        "looks": [look.to_dict() for look in found.looks],
    }
    if args.json:
        flags.print_json(document)
    else:
        _print(found, commits, document)
    if found.status == NOT_SLOWER:
        return EXIT_NOT_SLOWER
    if found.status not in (CULPRIT, AMBIGUOUS):
        return 1
    return EXIT_CULPRIT if args.fail_on_regression else 0


def _commit_info(commit: Commit) -> dict[str, str]:
    return {"sha": commit.sha, "ref": commit.ref, "subject": commit.subject}


def _print(found: Bisection, commits: dict[str, Commit], document: dict) -> None:
    out, err = flags.stdout(), flags.stderr()
    cost = (
        f"{document['steps']} step(s) ({document['remeasured']} re-measurement(s)), "
        f"{document['seconds']:.1f} s"
    )
    if found.status == "not-slower":
        out.print(f"the bad end is not slower than the good end: nothing to bisect; {cost}")
        return
    if found.culprit is None:
        *hidden, first = (commits[c].name for c in found.candidates)
        out.print(
            f"the first slower commit is {first} or one before it that could not be "
            f"measured: {', '.join(hidden)}",
            markup=False,
        )
    else:
        culprit = commits[found.culprit]
        out.print(f"first slower commit: {culprit.sha} {culprit.subject}", markup=False)
    slower = found.culprit or found.candidates[-1]
    flags.print_tables(
        argparse.Namespace(format="table"), [_evidence(commits[slower], document["evidence"])]
    )
    if found.skipped:
        err.print("skipped: " + ", ".join(commits[c].name for c in found.skipped), markup=False)
    out.print(cost)


def _pairs(evidence: dict) -> str:
    """``, 40 pairs a point`` (the pairs the deciding look's paired t used), or nothing."""
    pairs = sorted({p.get("pairs") or 0 for p in evidence.get("points", [])} - {0})
    if not pairs:
        return ""
    return f", {pairs[0]}{'-' + str(pairs[-1]) if len(pairs) > 1 else ''} pairs a point"


def _evidence(commit: Commit, evidence: dict | None) -> Grid:
    """The step that found ``commit`` slower: ratio, interval, q and mark per point."""
    from benchbench.views.tables import Column, Grid

    evidence = evidence or {}
    earlier = evidence.get("pooled") or []
    pooled = ", ".join(" and ".join(r[:8] for r in runs) for runs in earlier)
    rows = [
        (
            p["label"],
            f"{p['ratio']:.3f}" if p["ratio"] is not None else "-",
            f"{p['ci_low']:.3f}-{p['ci_high']:.3f}" if p["ci_low"] is not None else "-",
            f"{p['q']:.2g}" if p["q"] is not None else "-",
            p["mark"],
        )
        for p in evidence.get("points", [])
    ]
    return Grid.of(
        (
            Column("point"),
            Column("ratio", "right"),
            Column("CI", "right"),
            Column("q", "right"),
            Column("mark"),
        ),
        rows,
        title=f"{commit.short} against the good commit "
        f"(alpha {evidence.get('alpha', 0):.3g} a look{_pairs(evidence)})",
        notes=[
            f"runs {' and '.join(r[:8] for r in evidence.get('runs', []))}: "
            "`benchbench compare` judges them again"
            + (f" (this look; its verdict pooled {pooled} too)" if pooled else "")
        ],
    )
