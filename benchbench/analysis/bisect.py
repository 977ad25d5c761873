"""The search of ``benchbench bisect``: the first commit where the points got slower, as a
pure function of a verdict oracle.

The oracle judges one commit against the known-good commit and answers in one of four
outcomes (Chromium's Pinpoint judges its steps in the first three):

- ``different``: the points got slower there (the verdict's ``slower`` at some point);
- ``same``: no point slower, and the one-sided upper bound at the look's alpha of the
  points' geometric-mean ratio below one plus the minimum effect: a slowdown as large as
  that is ruled out for the points together (an equivalence test; :func:`step_outcome`);
- ``unknown``: neither (too noisy to tell): the commit is measured again, at most
  ``max_looks - 1`` more times (twice by default);
- ``skip``: the commit cannot be measured (it fails to build, a point fails there), as
  ``git bisect skip``.

**Alpha spent across the looks** (Bonferroni): a commit may be looked at up to
``max_looks`` times, and each look's test runs at ``alpha / max_looks``
(:func:`look_alpha`), fixed before the first look, so the chance that any of a commit's
looks calls identical code ``different`` stays at most ``alpha`` whatever the data do. Each
look is a fresh ``ab``, and the oracle of ``benchbench bisect`` judges look n on the rounds
of the commit's n looks pooled (a second look 40 pairs at 20 rounds, a third 60: an
interval ~1/sqrt(n) as wide, so a ``same`` that one look's noise hides becomes
reachable); the union bound holds for dependent tests too. Pocock's boundary for pooled
looks (0.0221 for three looks at 0.05, against Bonferroni's 0.0167) would allow a little
more; Bonferroni is kept for its simplicity.

The search (:func:`bisect`) first judges the bad end: ``same`` or still ``unknown`` after
its looks ends it (``not-slower``: nothing to find). Then a binary search over the
commits between the last ``same`` one and the first ``different`` one, testing the
untested commit nearest the middle; a commit whose looks all say ``unknown`` is set
aside as a skipped one is. When only set-aside commits separate the two, the first slow
commit is one of them or the first ``different`` one (``ambiguous``, listing them), as
``git bisect`` says "the first bad commit could be any of". Over n commits the search
takes about log2(n) + 1 steps, plus one per extra look.

:func:`replaying` makes an oracle that answers from a recorded log first: the search is
deterministic given its answers, so a resumed search retraces its steps at no cost.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchbench.analysis import compare

DIFFERENT, SAME, UNKNOWN, SKIP = "different", "same", "unknown", "skip"
OUTCOMES = (DIFFERENT, SAME, UNKNOWN, SKIP)
#: A first look and at most two more at a commit whose verdict is ``unknown``.
MAX_LOOKS = 3
#: How a search ends: a culprit named, the bad end not slower, or several candidates left.
CULPRIT, NOT_SLOWER, AMBIGUOUS = "culprit", "not-slower", "ambiguous"


@dataclass(frozen=True)
class Look:
    """One judgement of ``commit`` against the good commit: its ``look`` number (1, 2, 3),
    its outcome, the seconds it cost and the oracle's evidence (kept as given, for the
    report and the log)."""

    commit: str
    look: int
    outcome: str
    seconds: float = 0.0
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {self.outcome!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "look": self.look,
            "outcome": self.outcome,
            "seconds": self.seconds,
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Look:
        return cls(
            str(data["commit"]),
            int(data["look"]),
            str(data["outcome"]),
            float(data.get("seconds") or 0.0),
            dict(data.get("evidence") or {}),
        )


#: ``oracle(commit, look)``: the judgement of ``commit`` at its ``look``-th measurement.
Oracle = Callable[[str, int], Look]


@dataclass(frozen=True)
class Bisection:
    """A search's end: ``status`` (culprit, not-slower, ambiguous), the culprit (or None),
    the last commit known ``same`` (None: the good end), the candidates when ambiguous,
    every look taken in order, and the commits skipped or left undecided."""

    status: str
    culprit: str | None
    last_same: str | None
    candidates: tuple[str, ...]
    looks: tuple[Look, ...]
    skipped: tuple[str, ...]

    @property
    def steps(self) -> int:
        """Measurements taken, each look of a commit counted (re-measurements are steps)."""
        return sum(look.outcome != SKIP for look in self.looks)

    @property
    def seconds(self) -> float:
        return sum(look.seconds for look in self.looks)

    def deciding(self, commit: str) -> Look | None:
        """The last look at ``commit`` (the one that decided it), if any."""
        found = [look for look in self.looks if look.commit == commit]
        return found[-1] if found else None


def look_alpha(alpha: float, max_looks: int = MAX_LOOKS) -> float:
    """The significance level of each look: ``alpha`` split over a commit's possible looks."""
    if max_looks < 1:
        raise ValueError(f"max_looks must be >= 1, got {max_looks}")
    return alpha / max_looks


def judge(commit: str, oracle: Oracle, max_looks: int = MAX_LOOKS) -> list[Look]:
    """Look at ``commit`` until the oracle answers anything but ``unknown``, at most
    ``max_looks`` times."""
    looks: list[Look] = []
    for number in range(1, max_looks + 1):
        look = oracle(commit, number)
        if look.commit != commit or look.look != number:
            raise ValueError(
                f"the oracle answered {look.commit}#{look.look} when asked {commit}#{number}"
            )
        looks.append(look)
        if look.outcome != UNKNOWN:
            break
    return looks


def _nearest_middle(open_indices: Sequence[int], low: int, high: int) -> int:
    middle = (low + high) / 2
    return min(open_indices, key=lambda i: (abs(i - middle), i))


def bisect(commits: Sequence[str], oracle: Oracle, max_looks: int = MAX_LOOKS) -> Bisection:
    """The first of ``commits`` (the good commit's descendants, oldest first, the bad end
    last) where ``oracle`` finds the points slower than at the good commit."""
    if not commits:
        raise ValueError("no commits between the good and the bad end")
    if len(set(commits)) != len(commits):
        raise ValueError("a commit is listed twice")
    taken: list[Look] = []
    set_aside: list[int] = []
    bad = len(commits) - 1
    looks = judge(commits[bad], oracle, max_looks)
    taken += looks
    if looks[-1].outcome == SKIP:
        raise ValueError(f"the bad end {commits[bad]} cannot be measured")
    if looks[-1].outcome != DIFFERENT:
        return Bisection(NOT_SLOWER, None, None, (), tuple(taken), ())
    low, high = -1, bad  # low: last known same (-1: the good end); high: first known slower
    while True:
        open_indices = [i for i in range(low + 1, high) if i not in set_aside]
        if not open_indices:
            break
        index = _nearest_middle(open_indices, low, high)
        looks = judge(commits[index], oracle, max_looks)
        taken += looks
        outcome = looks[-1].outcome
        if outcome == DIFFERENT:
            high = index
        elif outcome == SAME:
            low = index
        else:
            set_aside.append(index)
    between = [commits[i] for i in range(low + 1, high)]
    status = AMBIGUOUS if between else CULPRIT
    return Bisection(
        status,
        commits[high] if status == CULPRIT else None,
        commits[low] if low >= 0 else None,
        (*between, commits[high]) if between else (),
        tuple(taken),
        tuple(commits[i] for i in sorted(set_aside)),
    )


def replaying(recorded: Iterable[Look], oracle: Oracle) -> Oracle:
    """An oracle answering from ``recorded`` looks where it holds ``(commit, look)``, and
    from ``oracle`` otherwise: a resumed search takes again, at no cost, the steps its log
    holds."""
    known = {(look.commit, look.look): look for look in recorded}

    def answer(commit: str, number: int) -> Look:
        return known.get((commit, number)) or oracle(commit, number)

    return answer


def step_outcome(
    points: Sequence[compare.PointComparison], min_effect: float, together: float | None
) -> str:
    """A step's outcome from its comparison against the good commit (the points that
    decide: the ones compared). ``different``: a point ``slower``; ``skip``: a point failing
    or missing there; ``same``: ``together`` below ``1 + min_effect`` and no point's own
    ratio at or above it; else ``unknown``.

    ``together`` is :func:`together_bound` at the look's alpha: the one-sided upper bound
    of the points' geometric-mean ratio, an equivalence test ("the points together got
    slower by less than the min effect"). A point's own bound would need each point as
    precise as the whole selection: a point's per-round log ratios scatter independently of
    the others' (correlation ~0 over the stored ``ab`` pairs of 2026-11-29), so k points
    together are ~1/sqrt(k) as noisy, and beside a noisy neighbour one small point's own
    bound stayed above 1.05 after 60 pairs. A slowdown at one point of k is diluted k
    times in ``together``: that point's own ``slower`` decides ``different`` first, and a
    point whose ratio alone reaches the min effect keeps the step ``unknown``.

    Not the MDE: the verdict's MDE is the change it marks ``slower`` at its power, which
    lies above ``min_effect`` whenever there is noise, so no look would ever be ``same``."""
    if not points:
        return SKIP
    if any(p.mark == compare.SLOWER for p in points):
        return DIFFERENT
    if any(p.mark in (compare.FAILING, compare.GONE, compare.NEW) for p in points):
        return SKIP
    alone = all(p.ratio is not None and p.ratio < 1 + min_effect for p in points)
    if together is not None and together < 1 + min_effect and alone:
        return SAME
    return UNKNOWN


def together_bound(
    base_rows: Sequence[Mapping[str, Any]],
    head_rows: Sequence[Mapping[str, Any]],
    alpha: float,
) -> float | None:
    """The one-sided upper bound at ``alpha`` of the points' geometric-mean ratio, head
    over base, paired by round: each round's mean over the points of their log ratios
    (:func:`~benchbench.analysis.sides.round_log_ratios`; the rounds every point kept),
    then ``exp(mean + t(1 - alpha, n - 1) * sd / sqrt(n))`` over the n rounds. None when
    a point is missing or not ``ok`` on a side, or fewer than two rounds are common."""
    from benchbench.analysis.sides import round_log_ratios
    from benchbench.core.stats import t_quantile

    heads = {row["benchmark_id"]: row for row in head_rows}
    per_point: list[dict[int, float]] = []
    for row in base_rows:
        head = heads.get(row["benchmark_id"])
        if head is None or row["status"] != "ok" or head["status"] != "ok":
            return None
        per_point.append(round_log_ratios(row, head))
    common = sorted(set.intersection(*(set(p) for p in per_point))) if per_point else []
    if len(common) < 2:
        return None
    rounds = [statistics.fmean(p[r] for p in per_point) for r in common]
    spread = statistics.stdev(rounds) / math.sqrt(len(rounds))
    return math.exp(statistics.fmean(rounds) + t_quantile(len(rounds) - 1, 1 - 2 * alpha) * spread)


def point_evidence(points: Sequence[compare.PointComparison]) -> list[dict[str, Any]]:
    """Per point: label, ratio, interval, q, MDE, mark and the pairs the paired t used
    (what the report and log show)."""
    return [
        {
            "label": p.label,
            "ratio": p.ratio,
            "ci_low": p.ratio_ci_low,
            "ci_high": p.ratio_ci_high,
            "q": p.q_value,
            "mde": p.mde,
            "mark": p.mark,
            "pairs": p.pairs,
        }
        for p in points
    ]
