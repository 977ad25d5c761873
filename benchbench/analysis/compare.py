"""Compare two runs point by point: ratio of medians, its CI and p-value, a mark.

Pure functions over stored rows (measurement joined with benchmark, as
:meth:`Store.measurements` returns them), so that ``benchbench compare``, the
dashboard's comparison page and any later command share one analysis. Past 450 lines,
it reads best whole: matching the points, pairing an ``ab`` run's sides by round and
judging the points as one family are the steps of one comparison, read in order.

Per point (matched by benchmark id), on the per-call times (raw sample / calls), the
ratio ``median(contender) / median(base)`` (above 1 the contender is slower), its CI,
p-value and mark come from :mod:`benchbench.analysis.verdict` (the one verdict; two
runs' samples are not paired, the two sides of an ``ab`` run are). The points are one
family (:func:`as_family`): a mark is significant when the point's p-value adjusted
over the comparison's points (Benjamini-Hochberg) is below alpha; each interval stays
the point's own. Marks beyond the verdict's: ``new``, measured in the contender only
(absent or not ok in the base); ``gone``, absent or skipped in the contender;
``failing``, an error in the contender.

A point **regressed** when it is ``slower``, or ``failing`` where the base measured
it. The geometric mean of the ratios is given per workload and overall over the
points both runs measured.

Where both runs counted a point's instructions (``run --metric instructions``), the point
also gets the ratio of the counts and their mark by the instruction verdict
(:func:`~benchbench.analysis.verdict.mark_counts`); an instruction count ``slower`` is a
regression too. A point whose runs counted and never timed it has the time mark
``untimed``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.analysis.detectable import (
    BEYOND_SHIFT,
    POWER,
    Detectable,
    detectable,
    family_effects,
    finite,
)
from benchbench.analysis.rerun import Rerun, Shift, rerun_dict
from benchbench.analysis.sides import (
    counted_fields,
    lockstep_pair,
    paired_sides,
    per_call,
    processes,
)
from benchbench.analysis.verdict import (
    ALPHA,
    FAILING,
    FASTER,
    GONE,
    INSTRUCTIONS_MIN_EFFECT,
    MARKS,
    MIN_EFFECT,
    NEW,
    NOT_SIGNIFICANT,
    SAME,
    SEED,
    SLOWER,
    VERDICTS,
    adjusted_p,
    estimate,
    mark,
    mark_ratio,
)
from benchbench.core.values import Point

__all__ = [
    "ALPHA",
    "FAILING",
    "FASTER",
    "GONE",
    "INSTRUCTIONS_MIN_EFFECT",
    "MARKS",
    "MIN_EFFECT",
    "NEW",
    "NOT_SIGNIFICANT",
    "SAME",
    "SLOWER",
    "Comparison",
    "PointComparison",
    "SampleComparison",
    "as_family",
    "compare_point",
    "compare_rows",
    "compare_samples",
    "environment_diff",
    "geometric_mean",
    "lockstep_pair",
]

Row = Mapping[str, Any]

#: The time mark of a point that both runs counted but neither timed (``--metric
#: instructions`` alone).
UNTIMED = "untimed"
#: The instruction marks in the order of a summary.
VERDICT_ORDER = (SLOWER, FASTER, SAME, NOT_SIGNIFICANT)


@dataclass(frozen=True)
class SampleComparison:
    """The statistics of one pair of sample sets (per-call seconds)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    mark: str
    se_log: float = math.nan  # the test's se of log(ratio) and df, for the MDE
    df: float = math.inf
    test: str = ""  # the test that decided (verdict.Estimate.test) and its pairs
    pairs: int = 0


@dataclass(frozen=True)
class PointComparison:
    """One benchmark in both runs (either side may be missing)."""

    benchmark_id: str
    label: str
    suite: str
    workload: str
    mark: str
    base_status: str | None
    contender_status: str | None
    base_median_s: float | None = None
    contender_median_s: float | None = None
    ratio: float | None = None
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    p_value: float | None = None
    #: ``p_value`` adjusted over the comparison's points (Benjamini-Hochberg): the time
    #: mark is significant when it is below alpha.
    q_value: float | None = None
    reason: str | None = None
    #: The smallest slowdown found here at the power asked (:mod:`.detectable`).
    mde: float | None = None
    mde_alone: float | None = None
    se_log: float | None = None
    df: float | None = None
    #: The test that decided the time mark (``paired t``, ``Welch t``, ``bootstrap``, or
    #: a fallback that says why) and the pairs a paired t used.
    test: str | None = None
    pairs: int = 0
    #: Instructions per call in each run and their verdict (both runs counted them).
    base_instructions: float | None = None
    contender_instructions: float | None = None
    instructions_ratio: float | None = None
    instructions_mark: str | None = None
    #: The shared shift the head's times were divided by before the test (1: none); the
    #: ratio, its interval, p, q, MDE and mark are then of the point beyond the shift.
    shift: float = 1.0

    @property
    def raw_ratio(self) -> float | None:
        """The point's own ratio, the shift not taken out (``ratio`` when there is none)."""
        return self.ratio * self.shift if self.ratio is not None else None

    @property
    def regressed(self) -> bool:
        """Slower beyond the minimum effect (in time or in instructions), or failing
        where the base measured it."""
        return (
            self.mark == SLOWER
            or self.instructions_mark == SLOWER
            or (self.mark == FAILING and self.base_status == "ok")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark_id": self.benchmark_id,
            "label": self.label,
            "suite": self.suite,
            "workload": self.workload,
            "mark": self.mark,
            "regressed": self.regressed,
            "base_status": self.base_status,
            "contender_status": self.contender_status,
            "base_median_s": self.base_median_s,
            "contender_median_s": self.contender_median_s,
            "ratio": self.ratio,
            "raw_ratio": self.raw_ratio,
            "shift": self.shift,
            "ratio_ci_low": self.ratio_ci_low,
            "ratio_ci_high": self.ratio_ci_high,
            "p_value": self.p_value,
            "q_value": self.q_value,
            "mde": finite(self.mde),
            "mde_alone": finite(self.mde_alone),
            "test": self.test,
            "pairs": self.pairs,
            "reason": self.reason,
            "base_instructions": self.base_instructions,
            "contender_instructions": self.contender_instructions,
            "instructions_ratio": self.instructions_ratio,
            "instructions_mark": self.instructions_mark,
        }


@dataclass(frozen=True)
class Comparison:
    """Every point of two runs, the geometric means and the environments' differences."""

    points: tuple[PointComparison, ...]
    min_effect: float
    alpha: float
    environment_diff: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    instructions_min_effect: float = INSTRUCTIONS_MIN_EFFECT
    #: True when the runs were measured in lockstep (``benchbench ab``) and judged paired.
    paired: bool = False
    power: float = POWER
    #: The run-to-run factor the unpaired tests' standard errors were multiplied by
    #: (:mod:`.rerun`); None: the intervals are within these runs only.
    rerun: Rerun | None = None
    #: What every point moved by together, judged against the store's earlier shifts
    #: (:func:`.rerun.shared_shift`); None for a paired comparison or too few points.
    shift: Shift | None = None

    @property
    def after_shift(self) -> bool:
        """The points were judged beyond the shared shift (it was judged on its own)."""
        return self.shift is not None and self.shift.judged and not self.paired

    @property
    def shift_regressed(self) -> bool:
        """The shared shift is ``slower``: every point together, beyond the machine's."""
        return self.shift is not None and self.shift.mark == SLOWER

    @property
    def detectable(self) -> Detectable:
        """What the comparison could have seen: its points' MDEs, for a change at every
        point, or beyond a judged shift at a third of them (:func:`.detectable.point_alpha`)."""
        effects = [p.mde for p in self.points if p.q_value is not None]
        return detectable(effects, self.min_effect, self.alpha, self.power, self.share)

    @property
    def share(self) -> float:
        """The share of the points the MDE is stated for: every point, or beyond a judged
        shift (a change at every point is then the shift line's) a third of them."""
        return BEYOND_SHIFT if self.after_shift else 1.0

    @property
    def regressions(self) -> list[PointComparison]:
        return [p for p in self.points if p.regressed]

    @property
    def same_environment(self) -> bool:
        return not self.environment_diff

    def counts(self) -> dict[str, int]:
        return {mark: sum(1 for p in self.points if p.mark == mark) for mark in (*MARKS, UNTIMED)}

    def instruction_counts(self) -> dict[str, int]:
        """Instruction marks and how many points got each (points both runs counted)."""
        marks = [p.instructions_mark for p in self.points if p.instructions_mark is not None]
        return {mark: marks.count(mark) for mark in VERDICT_ORDER if marks.count(mark)}

    @property
    def counted(self) -> bool:
        """True when some point's instructions were counted in both runs."""
        return any(p.instructions_mark is not None for p in self.points)

    def geomean_by_workload(self) -> dict[str, float]:
        """Geometric mean of the points' own ratios per ``suite/workload`` (points both
        runs measured; the shared shift not taken out)."""
        groups: dict[str, list[float]] = defaultdict(list)
        for p in self.points:
            if p.raw_ratio is not None:
                groups[f"{p.suite}/{p.workload}"].append(p.raw_ratio)
        return {key: geometric_mean(values) for key, values in sorted(groups.items())}

    @property
    def geomean(self) -> float | None:
        ratios = [p.raw_ratio for p in self.points if p.raw_ratio is not None]
        return geometric_mean(ratios) if ratios else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_effect": self.min_effect,
            "alpha": self.alpha,
            "paired": self.paired,
            "run_to_run": rerun_dict(self.rerun),
            "shift": self.shift.to_dict() if self.shift is not None else None,
            "after_shift": self.after_shift,
            "same_environment": self.same_environment,
            "environment_diff": {
                k: {"base": b, "contender": c} for k, (b, c) in self.environment_diff.items()
            },
            "counts": self.counts(),
            "instructions": {
                "min_effect": self.instructions_min_effect,
                "counts": self.instruction_counts(),
            },
            "regressed": len(self.regressions),
            "geomean": self.geomean,
            "geomean_by_workload": self.geomean_by_workload(),
            "detectable": self.detectable.to_dict(),
            "points": [p.to_dict() for p in self.points],
        }


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log v)) of positive ratios."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def compare_samples(
    base_s: Sequence[float],
    contender_s: Sequence[float],
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    seed: int = SEED,
    base_processes: Sequence[int] = (),
    contender_processes: Sequence[int] = (),
    paired: bool = False,
    rerun: float = 1.0,
) -> SampleComparison:
    """Ratio, CI, p-value and mark of two runs' per-call times, by
    :func:`benchbench.analysis.verdict.estimate` and :func:`~benchbench.analysis.verdict.mark`;
    at the process level when both runs measured the point in several processes.
    ``paired``: the runs were measured in lockstep (``benchbench ab``), process *k* of one
    beside process *k* of the other: the test is on the per-round log ratios. ``rerun``:
    the run-to-run factor of an unpaired process-level test (:mod:`.rerun`)."""
    found = estimate(
        base_s,
        contender_s,
        paired=paired,
        alpha=alpha,
        seed=seed,
        base_processes=base_processes,
        contender_processes=contender_processes,
        rerun=rerun,
    )
    return SampleComparison(
        found.ratio,
        found.ci_low,
        found.ci_high,
        found.p_value,
        mark(found, min_effect),
        found.se_log,
        found.df,
        found.test,
        found.pairs,
    )


def _label(row: Row) -> str:
    return Point.from_row(row).label


def compare_point(
    base: Row | None,
    contender: Row | None,
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    seed: int = SEED,
    instructions_min_effect: float = INSTRUCTIONS_MIN_EFFECT,
    paired: bool = False,
    rerun: float = 1.0,
    shift: float = 1.0,
) -> PointComparison:
    """The comparison of one benchmark's rows in the base and the contender (``paired``:
    measured in lockstep, ``rerun``: the run-to-run factor, see :func:`compare_samples`;
    ``shift``: the shared shift of two runs measured apart, which the contender's times
    are divided by before the test, so that the point is judged beyond it)."""
    row = contender if contender is not None else base
    if row is None:
        raise ValueError("compare_point needs a row on at least one side")
    common = {
        "benchmark_id": row["benchmark_id"],
        "label": _label(row),
        "suite": row["suite"],
        "workload": row["workload"],
        "base_status": base["status"] if base is not None else None,
        "contender_status": contender["status"] if contender is not None else None,
        "base_median_s": base.get("median_s") if base is not None else None,
        "contender_median_s": contender.get("median_s") if contender is not None else None,
    }
    if contender is None or contender["status"] == "skipped":
        reason = contender.get("reason") if contender is not None else "not in the contender"
        return PointComparison(mark=GONE, reason=reason, **common)
    if contender["status"] != "ok":
        return PointComparison(mark=FAILING, reason=contender.get("reason"), **common)
    counted = counted_fields(base, contender, instructions_min_effect)
    if base is None or base["status"] != "ok":
        reason = "not in the base" if base is None else f"base: {base['status']}"
        return PointComparison(mark=NEW, reason=reason, **common)
    if not base["samples_s"] or not contender["samples_s"]:
        if counted:
            return PointComparison(mark=UNTIMED, **counted, **common)
        return PointComparison(mark=NEW, reason="not timed in the base", **common)
    if paired:  # the rounds both sides kept, round by round
        base_s, base_k, con_s, con_k = paired_sides(base, contender)
    else:
        base_s, base_k, con_s, con_k = (
            per_call(base),
            processes(base),
            [t / shift for t in per_call(contender)],
            processes(contender),
        )
    result = compare_samples(
        base_s,
        con_s,
        min_effect=min_effect,
        alpha=alpha,
        seed=seed,
        base_processes=base_k,
        contender_processes=con_k,
        paired=paired,
        rerun=rerun,
    )
    return PointComparison(
        mark=result.mark,
        ratio=result.ratio,
        ratio_ci_low=result.ci_low,
        ratio_ci_high=result.ci_high,
        p_value=result.p_value,
        se_log=result.se_log,
        df=result.df,
        test=result.test,
        pairs=result.pairs,
        shift=1.0 if paired else shift,
        **counted,
        **common,
    )


def compare_rows(
    base_rows: Sequence[Row],
    contender_rows: Sequence[Row],
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    seed: int = SEED,
    base_environment: Mapping[str, Any] | None = None,
    contender_environment: Mapping[str, Any] | None = None,
    instructions_min_effect: float = INSTRUCTIONS_MIN_EFFECT,
    paired: bool = False,
    power: float = POWER,
    rerun: Rerun | None = None,
    shift: Shift | None = None,
) -> Comparison:
    """Compare two runs' rows point by point (base order, then points new in the contender).

    ``*_environment`` are the environments' comparability fields; their differences
    are reported (comparing across environments is allowed but labelled). ``rerun``:
    the run-to-run factor of two runs measured apart (:mod:`.rerun`); a paired comparison
    takes none. ``shift``: their shared shift (:func:`.rerun.shared_shift`); when it was
    judged against earlier shifts, each point is judged beyond it (the head's times
    divided by it; ``rerun`` should then be read after the shift too), otherwise as it is.
    """
    if not 0 <= min_effect < 1:
        raise ValueError(f"min_effect must be a fraction in [0, 1), got {min_effect}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    base = {r["benchmark_id"]: r for r in base_rows}
    contender = {r["benchmark_id"]: r for r in contender_rows}
    order = list(base) + [b for b in contender if b not in base]
    beyond = shift if shift is not None and shift.judged and not paired else None
    points = [
        compare_point(
            base.get(b),
            contender.get(b),
            min_effect=min_effect,
            alpha=alpha,
            seed=seed,
            instructions_min_effect=instructions_min_effect,
            paired=paired,
            rerun=rerun.of(b) if rerun is not None and not paired else 1.0,
            shift=beyond.ratio if beyond is not None else 1.0,
        )
        for b in order
    ]
    return Comparison(
        points=as_family(
            points,
            alpha,
            min_effect,
            power,
            BEYOND_SHIFT if beyond is not None else 1.0,
        ),
        min_effect=min_effect,
        alpha=alpha,
        instructions_min_effect=instructions_min_effect,
        paired=paired,
        power=power,
        rerun=None if paired else rerun,
        shift=None if paired else shift,
        environment_diff=environment_diff(base_environment or {}, contender_environment or {}),
    )


def as_family(
    points: Sequence[PointComparison],
    alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
    power: float = POWER,
    share: float = 1.0,
) -> tuple[PointComparison, ...]:
    """The points of one comparison, their time marks judged as one family: each timed
    point significant when its p-value adjusted over the others' (its q-value,
    :func:`~benchbench.analysis.verdict.adjusted_p`) is below ``alpha``, so that 20
    points of identical code flag something in about alpha of comparisons, not up to
    64 %. Each tested point also gets its MDE at that family's alpha for a change at a
    ``share`` of the points (:mod:`.detectable`).
    Points without a time test (new, gone, failing, untimed) are as they were."""
    tested = [
        (k, p.ratio, p.p_value)
        for k, p in enumerate(points)
        if p.mark in VERDICTS and p.ratio is not None and p.p_value is not None
    ]
    q_values = adjusted_p([p for _, _, p in tested])
    out = list(points)
    for (k, ratio, _), q in zip(tested, q_values, strict=True):
        significant = math.isfinite(q) and q < alpha
        mde, alone = family_effects(
            out[k].se_log, out[k].df, alpha, power, len(tested), min_effect, share
        )
        mark = mark_ratio(ratio, significant, min_effect)
        out[k] = replace(out[k], q_value=q, mark=mark, mde=mde, mde_alone=alone)
    return tuple(out)


def environment_diff(
    base: Mapping[str, Any], contender: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """The comparability fields that differ: ``{field: (base value, contender value)}``."""
    return {
        key: (base.get(key), contender.get(key))
        for key in sorted(set(base) | set(contender))
        if base.get(key) != contender.get(key)
    }
