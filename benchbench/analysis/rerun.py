"""The run-to-run term: how much further apart runs of one suite on one machine lie than
their own intervals say, read from the runs the store already holds.

A point's interval comes from its processes in one run (:mod:`benchbench.core.stats`).
Between two runs on a shared machine the medians move by more than that: the machine's
speed at the moments each run sampled, a layout that lasted a run. Kalibera & Jones
("Rigorous Benchmarking in Reasonable Time", ISMM 2013) give that level its own variance;
here it is read as one factor for the environment and suite, from consecutive runs.

**The rule.** For each pair of consecutive runs (same environment, same suites) and each
point both measured ok in two or more processes, the log ratio of the medians over its
standard error, ``z = log(m_b / m_a) / sqrt(se_a² + se_b²)``, each ``se`` the half-width of
the point's log interval over its ``t(k-1)``. If the intervals held what they claim, ``z``
would follow Student's t with about ``2(k-1)`` degrees of freedom, whose median ``|z|``
is ``t_0.75``; :func:`rerun_factor` is the points' median ``|z|`` over that, or 1 when
runs scatter less. A median, because a change that shows at a few points (a real
regression, one busy moment) must not make every interval wider, and a nightly's history
changes sha every night; a change at a third of the points does move it (x1.8 for one
pair of runs with +25 % there: ``tests/unit/test_rerun.py``), which is why the run shown
is left out where a history exists.

**Each point's own factor** (:func:`_own`, :meth:`Rerun.of`): the root mean square of
the point's z over the same pairs, weighed with the factor of all points as
:data:`PRIOR_PAIRS` pairs more. A change of the machine's speed that some kernels feel and
others do not moves those points between runs and not the rest; the points' median cannot
see a few such points, their own pairs can. Read from the history only: with no earlier
pair every point takes the one factor (a pair holding the run judged would widen a point
by its own change).

**Where it goes.** A run's table (``run``, ``show``) widens each several-process interval
by the factor in log space and says so in its title (``95% CI incl. run-to-run (x1.31,
from 4 pairs of runs)``; ``within this run only`` without a pair); ``compare`` multiplies
each side's standard error by it. The factor is read from the runs before the one shown
(for ``compare``: before the head, the base last), so that a change in that run does not
widen its own intervals; only where the store holds no earlier pair is the run itself
paired with the one before it, and two runs with no history are judged by how much their
own points scatter beyond their intervals (there a change at a third of the points
widens the factor too: a lone pair cannot tell the two apart), unless the machine was
calibrated (``benchbench probe --run-to-run``, :mod:`benchbench.analysis.calibration`):
then each point takes the calibration's run level, which no change in the runs judged
can move. What is stored does not
change: the factor is read again whenever a run is shown, from the runs before it, so an
old run is widened as a new one is.

**The shared shift** (:func:`shared_shift`) lives here too, and the module reads best whole:
the factor and the shift are read from the same consecutive pairs, and each takes the
other (the factor beyond each pair's shift, the shift's search for the points that changed
on their own at the factor), as :func:`apart` puts them together.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from benchbench.analysis.calibration import Calibration
from benchbench.core.defaults import ALPHA
from benchbench.core.stats import t_quantile

Row = Mapping[str, Any]

#: Matched points a factor needs: fewer say too little about the machine.
MIN_POINTS = 10
#: Earlier runs a factor reads at most (the newest): the machine of a month ago is not
#: today's.
HISTORY = 10
#: The t-quantile whose value is the median of |t|.
_MEDIAN_ABS = 0.5


@dataclass(frozen=True)
class Rerun:
    """The run-to-run factor (>= 1) and what it was read from."""

    factor: float
    pairs: int
    points: int
    #: Read from each pair's log ratios less that pair's shared shift (:func:`pair_shift`):
    #: the factor of ``compare``'s verdicts after the shift.
    after_shift: bool = False
    #: Each point's own factor, from its z in those pairs (:func:`_own`): benchmark id ->
    #: factor; a point in none of them takes ``factor``.
    own: Mapping[Any, float] = field(default_factory=dict, compare=False)
    #: Read from this machine's calibration (:mod:`benchbench.analysis.calibration`), not
    #: the suite's runs: its words.
    calibrated: str | None = None

    def of(self, key: Any) -> float:
        """The factor of the point ``key`` (a benchmark id): its own, else ``factor``."""
        return self.own.get(key, self.factor)

    @property
    def words(self) -> str:
        """What an interval holds, for a table's title."""
        low, high = (min(self.own.values()), max(self.own.values())) if self.own else (1, 1)
        if self.calibrated is not None:  # each point's factor is the calibration's level
            return f"incl. run-to-run ({self.calibrated}, each point x{low:.2f}-{high:.2f})"
        pairs = f"{self.pairs} pair{'s' if self.pairs != 1 else ''} of runs"
        after = " after the shared shift" if self.after_shift else ""
        own = f", each point x{low:.2f}-{high:.2f} by its own" if self.own else ""
        return f"incl. run-to-run{after} (x{self.factor:.2f}{own}, from {pairs})"


def scope(rerun: Rerun | None, runs: str = "this run") -> str:
    """``incl. run-to-run (x1.31, from 4 pairs of runs)``, or ``within this run only``."""
    return rerun.words if rerun is not None else f"within {runs} only"


def rerun_dict(rerun: Rerun | None) -> dict[str, Any] | None:
    """A factor for ``--format json``: ``{"factor", "pairs", "points"}``, or None."""
    if rerun is None:
        return None
    return {
        "factor": rerun.factor,
        "pairs": rerun.pairs,
        "points": rerun.points,
        "after_shift": rerun.after_shift,
        "own": {str(key): factor for key, factor in rerun.own.items()},
        "calibrated": rerun.calibrated,
    }


def _log_se(row: Row) -> tuple[float, int] | None:
    """A several-process ok row's standard error of its log headline, and its processes."""
    medians = row.get("process_medians_s") or []
    median, low, high = row.get("median_s"), row.get("ci_low_s"), row.get("ci_high_s")
    if row.get("status") != "ok" or len(medians) < 2 or not (median and low and high):
        return None
    if not 0 < low <= median <= high:
        return None
    half = math.log(float(high) / float(low)) / 2.0
    return half / t_quantile(len(medians) - 1), len(medians)


#: A run's several-process ok points: benchmark id -> (log headline, its standard error,
#: processes), read once a run however many pairs it is in (:func:`points`).
Points = dict[Any, tuple[float, float, int]]
#: A run as the functions below take it: its rows, or its points already read.
Rows = Sequence[Row] | Points


def points(rows: Rows) -> Points:
    """The points of ``rows`` that the term reads (:func:`_log_se`); points already read
    as they are."""
    if isinstance(rows, dict):
        return rows
    out: Points = {}
    for row in rows:
        found = _log_se(row)
        if found is not None:
            out[row.get("benchmark_id")] = (math.log(float(row["median_s"])), *found)
    return out


def _scores(first: Points, then: Points, shift: float) -> list[tuple[Any, float, int]]:
    """Each point both runs measured in several processes: (its id, z beyond ``shift``,
    degrees of freedom)."""
    out: list[tuple[Any, float, int]] = []
    for key, (log_b, se_b, k_b) in then.items():
        old = first.get(key)
        if old is None:
            continue
        se = math.hypot(old[1], se_b)
        if se > 0:
            out.append((key, (log_b - old[0] - shift) / se, old[2] + k_b - 2))
    return out


#: Pairs of runs the factor of all points weighs as in each point's own factor (:func:`_own`).
PRIOR_PAIRS = 4


def _own(scores: Sequence[tuple[Any, float, int]], factor: float) -> dict[Any, float]:
    """Each point's own factor: the RMS of its z over the pairs, in units of Student's
    t's (``z² (d - 2) / d`` on ``d`` degrees of freedom, ``d`` at least 3), weighed with
    ``factor`` as :data:`PRIOR_PAIRS` pairs more, at least 1. A point that one change of
    the machine's speed moves and the rest do not (some kernels feel it, others do not)
    scatters further between runs than the points' median says; its own pairs say so, and
    a point with few pairs keeps near ``factor``."""
    squares: dict[Any, list[float]] = {}
    for key, z, d in scores:
        t_units = max(3.0, float(d))
        squares.setdefault(key, []).append(z * z * (t_units - 2.0) / t_units)
    prior = PRIOR_PAIRS * factor * factor
    return {
        key: max(1.0, math.sqrt((sum(each) + prior) / (len(each) + PRIOR_PAIRS)))
        for key, each in squares.items()
    }


def rerun_factor(
    runs: Sequence[Rows], after_shift: bool = False, shifts: Sequence[Moved | None] | None = None
) -> Rerun | None:
    """The factor from ``runs``' rows, oldest first (consecutive runs are paired); None
    when fewer than :data:`MIN_POINTS` points could be matched. ``after_shift``: of the
    points' log ratios less each pair's shared shift (:func:`pair_scores`; ``shifts``:
    those already read, one a pair)."""
    read = [points(rows) for rows in runs]
    pairs = list(itertools.pairwise(read))
    if after_shift:
        moved = _pair_shifts(read) if shifts is None else shifts
        each = [_scores(a, b, m.log) if m else [] for (a, b), m in zip(pairs, moved, strict=True)]
    else:
        each = [_scores(a, b, 0.0) for a, b in pairs]
    scores = [s for pair in each for s in pair]
    if len(scores) < MIN_POINTS:
        return None
    df = statistics.median(d for _, _, d in scores)
    expected = t_quantile(max(1.0, df), _MEDIAN_ABS)
    factor = max(1.0, statistics.median(abs(z) for _, z, _ in scores) / expected)
    own = _own(scores, factor)
    return Rerun(factor, sum(map(bool, each)), len(scores), after_shift, own)


def widened(rows: Sequence[Row], rerun: Rerun | None) -> list[dict[str, Any]]:
    """``rows`` with each several-process interval widened by its point's factor
    (:meth:`Rerun.of`) in log space around its headline (one-process rows, and every row
    without a factor, as they are)."""
    if rerun is None:
        return [dict(r) for r in rows]
    out = []
    for row in rows:
        row = dict(row)
        factor = rerun.of(row.get("benchmark_id"))
        if factor != 1.0 and _log_se(row) is not None:
            median = float(row["median_s"])
            up = math.log(float(row["ci_high_s"]) / median) * factor
            down = math.log(median / float(row["ci_low_s"])) * factor
            row["ci_low_s"], row["ci_high_s"] = median * math.exp(-down), median * math.exp(up)
        out.append(row)
    return out


def history_runs(
    store: Any, run: Row, base: tuple[Row, Sequence[Row]] | None = None
) -> list[Sequence[Row]]:
    """The rows of ``run``'s earlier runs of the same suites on its environment (the newest
    :data:`HISTORY`, oldest first), then ``base``'s (a run compared with it, left out of
    the earlier runs); ``run`` itself is not among them."""
    if not run.get("id"):
        return []
    skip = {run.get("id"), base[0].get("id") if base else None}
    earlier = [r for r in store.earlier_runs(run, HISTORY + 1) if r["id"] not in skip][:HISTORY]
    sequence: list[Sequence[Row]] = [store.measurements(r["id"]) for r in reversed(earlier)]
    if base is not None:
        sequence.append(base[1])
    return sequence


def history_factor(
    store: Any,
    run: Row,
    rows: Sequence[Row],
    base: tuple[Row, Sequence[Row]] | None = None,
) -> Rerun | None:
    """The factor for ``run`` (its ``rows``) from the pairs of :func:`history_runs`. Only
    when those hold no pair with :data:`MIN_POINTS` points is ``run`` itself read as the
    last run of the sequence: a change in ``run`` then widens its own factor, so a
    history keeps it from doing so."""
    return factor_of(history_runs(store, run, base), rows)


def factor_of(
    history: Sequence[Rows],
    rows: Rows,
    after_shift: bool = False,
    shifts: Sequence[Moved | None] | None = None,
    calibration: Calibration | None = None,
) -> Rerun | None:
    """:func:`history_factor` of a history already read: its pairs, else ``calibration``
    (this machine's: :func:`calibrated`), else ``rows`` after the history with no point's
    own factor (``after_shift`` and ``shifts``, the history's pairs' shifts: see
    :func:`rerun_factor`). The calibration comes before the pair that holds ``rows``: a
    change in ``rows`` cannot widen it."""
    found = rerun_factor(history, after_shift, shifts)
    if found is not None:
        return found
    if calibration is not None:
        return calibrated(calibration, rows)
    if after_shift and shifts is not None and history:
        shifts = [*shifts, _shift(points(history[-1]), points(rows))]
    found = rerun_factor([*history, rows], after_shift, shifts)
    # A point's own factor from a pair holding ``rows`` would widen a change at that point
    # by the change itself: here every point takes the one factor.
    return replace(found, own={}) if found is not None else None


def calibrated(calibration: Calibration, rows: Rows) -> Rerun:
    """The factor of ``rows``' points from this machine's calibration: each point's own
    (:meth:`Calibration.own`), the one factor their median."""
    own = calibration.own(points(rows))
    factor = statistics.median(own.values()) if own else 1.0
    return Rerun(factor, calibration.pairs, calibration.points, False, own, calibration.words)


#: Earlier pairs of runs a shared shift is judged against, at least.
MIN_SHIFTS = 3
#: The mark of a shift with too few earlier pairs to judge it by.
NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class Shift:
    """What every point of two runs moved by together: the median of the points' log
    ratios less those that changed on their own (:func:`pair_shift`), as a ratio, with its
    interval and mark (:func:`shared_shift`)."""

    ratio: float
    ci_low: float
    ci_high: float
    points: int
    #: Earlier pairs of runs whose shifts it was judged against, and their RMS (log).
    pairs: int
    rms: float | None
    p_value: float | None
    mark: str
    confidence: float = 0.95
    #: Points left out of the median as changed on their own (:func:`pair_shift`).
    left_out: int = 0

    @property
    def judged(self) -> bool:
        """Judged against the store's earlier shifts (else too few pairs to say)."""
        return self.mark != NOT_JUDGED

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "points": self.points,
            "pairs": self.pairs,
            "rms": self.rms,
            "p_value": self.p_value,
            "mark": self.mark,
            "left_out": self.left_out,
        }

    @property
    def line(self) -> str:
        """The shift for a person: one line under ``compare``'s table."""
        interval = f"{self.confidence:.0%} CI {self.ci_low:.3f}-{self.ci_high:.3f}"
        median = f"median of {self.points}" + (
            f", {self.left_out} that changed on their own left out" if self.left_out else ""
        )
        if self.mark == NOT_JUDGED:
            return (
                f"shared shift: every point x{self.ratio:.3f} together ({median}; "
                f"{interval} within these runs only): not judged, {self.pairs} earlier "
                f"pair(s) of runs of this machine and suites, {MIN_SHIFTS} needed"
            )
        return (
            f"shared shift: every point x{self.ratio:.3f} together ({median}), "
            f"against the shifts of {self.pairs} earlier pairs of runs (RMS "
            f"{100 * math.expm1(self.rms or 0.0):.1f} %; {interval}, p "
            f"{self.p_value:.2g}): {self.mark}"
        )


class Moved(NamedTuple):
    """What two runs' points moved by together (:func:`pair_shift`)."""

    #: The median log ratio of the points that did not change on their own.
    log: float
    #: Its standard error over those points (1.2533 sd / sqrt(n), a median's).
    se: float
    #: The points it is the median of, and those left out as changed on their own.
    points: int
    left_out: int = 0


#: Passes of the shift's search for the points that changed on their own, at most.
PASSES = 4


def pair_shift(
    before: Rows, after: Rows, factor: float | Rerun = 1.0, alpha: float = ALPHA
) -> Moved | None:
    """What every point both runs measured in several processes moved by together; None
    below :data:`MIN_POINTS` points.

    The median of their log ratios, less the points that changed on their own: a point
    whose log ratio beyond the median is significant among the points (its own z on the
    standard errors of both runs times ``factor``, each point's own of a :class:`Rerun`;
    Student's t on ``k_a + k_b - 2`` degrees of freedom, Benjamini-Hochberg q below
    ``alpha``) is left out and the median read again, until the points left out no
    longer change (:data:`PASSES` at most), as long as more than half of the points
    remain. A change at a third of the points would otherwise move the median by about
    0.67 of the points' scatter towards them (the 75th percentile of the others), and
    hide that much of the change from each of those points' verdicts beyond the shift.
    Identical code leaves out a point in about ``alpha`` of pairs, and the median barely
    moves; a change at more than half of the points is the shift. Where the points do
    not move alike between two runs (a change of the machine's speed that some kernels
    feel and others do not), the points that did not move with the rest are left out,
    and flagged unless their own earlier pairs moved so too (their own factor)."""
    return _shift(points(before), points(after), factor, alpha)


def _shift(
    first: Points, then: Points, factor: float | Rerun = 1.0, alpha: float = ALPHA
) -> Moved | None:
    import numpy as np
    from scipy.special import stdtr

    from benchbench.analysis.verdict import adjusted_p

    keys = [key for key in then if key in first]
    if len(keys) < MIN_POINTS:
        return None
    table = np.array([(then[k][0] - first[k][0], *then[k][1:], *first[k][1:]) for k in keys])
    logs = table[:, 0]
    scale = np.array([factor.of(k) for k in keys]) if isinstance(factor, Rerun) else factor
    se = np.hypot(table[:, 1], table[:, 3]) * scale
    df = np.maximum(table[:, 2] + table[:, 4] - 2.0, 1.0)
    kept = np.ones(len(logs), dtype=bool)
    centre = float(np.median(logs))
    for _ in range(PASSES):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, np.abs(logs - centre) / se, np.where(logs == centre, 0.0, np.inf))
        q = np.asarray(adjusted_p(2.0 * stdtr(df, -z)))
        now = ~(q < alpha)
        if (now == kept).all() or 2 * int(now.sum()) <= len(logs):
            break
        kept, centre = now, float(np.median(logs[now]))
    rest = logs[kept]
    sd = float(np.std(rest, ddof=1))
    return Moved(centre, 1.2533 * sd / math.sqrt(len(rest)), len(rest), len(logs) - len(rest))


def _pair_shifts(read: Sequence[Points]) -> list[Moved | None]:
    """Each consecutive pair's shift (:func:`_shift`, the points' own standard errors)."""
    return [_shift(a, b) for a, b in itertools.pairwise(read)]


def shared_shift(
    history: Sequence[Rows],
    base: Rows,
    head: Rows,
    alpha: float,
    min_effect: float,
    factor: float | Rerun = 1.0,
    shifts: Sequence[Moved | None] | None = None,
) -> Shift | None:
    """The shift from ``base`` to ``head`` (:func:`pair_shift`, its points' standard
    errors times ``factor``, the run-to-run factor), judged against the shifts between the
    consecutive runs of ``history`` (oldest first, ``base`` last; :func:`history_runs`):
    identical code moves every point together by what the machine does between runs, so
    a shift is significant when it stands out from those (a Student t on their RMS,
    ``pairs`` degrees of freedom) and marked as a point is (:func:`~benchbench.analysis.
    verdict.mark_ratio`: past ``min_effect`` too). Fewer than :data:`MIN_SHIFTS` earlier
    pairs: not judged, the interval from the points' scatter alone. None below
    :data:`MIN_POINTS` matched points. ``shifts``: the history's pairs' shifts, already
    read."""
    from scipy.special import stdtr

    from benchbench.analysis.verdict import mark_ratio

    found = pair_shift(base, head, factor, alpha)
    if found is None:
        return None
    shift, se, matched, left_out = found
    read = [points(rows) for rows in history]
    earlier = [s.log for s in (_pair_shifts(read) if shifts is None else shifts) if s]
    if len(earlier) < MIN_SHIFTS:
        half = t_quantile(matched - 1, 1.0 - alpha) * se
        low, high = math.exp(shift - half), math.exp(shift + half)
        return Shift(
            math.exp(shift),
            low,
            high,
            matched,
            len(earlier),
            None,
            None,
            NOT_JUDGED,
            1.0 - alpha,
            left_out,
        )
    rms = math.sqrt(sum(s * s for s in earlier) / len(earlier))
    spread = math.hypot(rms, se)  # the machine's shifts, and this median's own error
    df = float(len(earlier))
    p = float(min(1.0, 2.0 * stdtr(df, -abs(shift) / spread))) if spread > 0 else 1.0
    half = t_quantile(df, 1.0 - alpha) * spread
    mark = mark_ratio(math.exp(shift), p < alpha, min_effect)
    return Shift(
        math.exp(shift),
        math.exp(shift - half),
        math.exp(shift + half),
        matched,
        len(earlier),
        rms,
        p,
        mark,
        1.0 - alpha,
        left_out,
    )


def apart(
    history: Sequence[Rows],
    head: Rows,
    alpha: float,
    min_effect: float,
    calibration: Calibration | None = None,
) -> tuple[Rerun | None, Shift | None]:
    """The factor and the shared shift of ``head`` against the last run of ``history``
    (oldest first; :func:`history_runs` with the base last), as ``compare`` judges two runs
    measured apart: the shift against the earlier pairs' shifts; when it was judged, the
    factor read beyond each earlier pair's shift, and the shift's search for the points
    that changed on their own read again at that factor (``calibration``: see
    :func:`factor_of`)."""
    if not history:
        return factor_of(history, head, calibration=calibration), None
    read = [points(rows) for rows in history]
    head_points = points(head)
    shifts = _pair_shifts(read)  # read once for the shift line and the factor beyond it
    shift = shared_shift(read, read[-1], head_points, alpha, min_effect, shifts=shifts)
    after = shift is not None and shift.judged
    rerun = factor_of(read, head_points, after, shifts, calibration)
    if shift is not None and rerun is not None:
        shift = shared_shift(read, read[-1], head_points, alpha, min_effect, rerun, shifts)
    return rerun, shift


def run_to_run(
    store: Any,
    base: tuple[Row, Sequence[Row]],
    head: tuple[Row, Sequence[Row]],
    alpha: float,
    min_effect: float,
    calibration: Calibration | None = None,
) -> tuple[Rerun | None, Shift | None]:
    """The factor and the shared shift of two runs measured apart (each a run and its
    rows), as ``compare`` judges them (:func:`apart`, the history :func:`history_runs`
    of ``head`` with ``base`` last). ``store`` needs ``earlier_runs`` and
    ``measurements`` only (the dashboard passes its rows read once); ``calibration``,
    the machine's (:func:`benchbench.analysis.calibration.calibration_of`), is taken
    when the history holds no pair."""
    return apart(history_runs(store, head[0], base), head[1], alpha, min_effect, calibration)
