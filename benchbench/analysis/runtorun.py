"""The run-to-run term: how far two runs of the same code differ beyond their own intervals.

A run's interval comes from the spread of its processes; a second run of the same code
on the same machine differs by more (Kalibera & Jones' multi-level model, "Rigorous
Benchmarking in Reasonable Time", ISMM 2013: a level above the process, the run). It
shows in two parts:

- a **shared shift**: every point of the run moved together (clock, thermal state, the
  neighbours of that hour, a torch upgrade). It is estimated once, as the median of the
  points' log ratios, with an interval from their scatter, and reported on its own line
  (:class:`Shift`); the per-point verdicts are on what is left after it;
- a **per-point run-to-run variance** ``tau^2``: what is left scatters around the shift
  by more than the points' within-run standard errors explain. Between two runs with no
  history it is estimated from that scatter (:func:`excess_variance`, a robust method
  of moments: the scaled MAD of the residual log ratios, squared, less the median
  within-run variance, never below 0); from a store's earlier runs of the same
  environment it is the same estimate over each consecutive pair, pooled by the median
  (:func:`from_history`: a nightly's history changes sha every night, so all pairs
  count, not only same-sha ones).

``compare`` adds ``tau^2`` to each point's within-run variance of the log ratio, so
drift between runs does not read as a change, and says so in its table title
(``95 % CI incl. run-to-run``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchbench.core.stats import log_spread, t_quantile

#: Fewest points with a process-level test for a shift and a run-to-run term to be
#: estimated from one comparison (fewer: the comparison is judged within runs only).
MIN_POINTS = 5
#: sigma of a normal from its median absolute deviation.
MAD_SIGMA = 1.4826
#: The standard error of a median over that of a mean, for normal data.
MEDIAN_SE = 1.2533


@dataclass(frozen=True)
class Shift:
    """The shift all points of a comparison share: ``exp(log_shift)``, its standard error
    in log space and the degrees of freedom of its interval."""

    log_shift: float
    se_log: float
    df: float
    points: int

    @property
    def ratio(self) -> float:
        return math.exp(self.log_shift)

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        half = t_quantile(self.df, confidence) * self.se_log
        return math.exp(self.log_shift - half), math.exp(self.log_shift + half)


def shared_shift(log_ratios: Sequence[float]) -> Shift | None:
    """The median of the points' log ratios and its standard error (``1.2533 * 1.4826 *
    MAD / sqrt(N)``), on ``N - 1`` degrees of freedom; None for fewer than
    :data:`MIN_POINTS` points."""
    values = np.asarray(log_ratios, dtype=np.float64)
    if values.size < MIN_POINTS:
        return None
    centre = float(np.median(values))
    mad = MAD_SIGMA * float(np.median(np.abs(values - centre)))
    se = MEDIAN_SE * mad / math.sqrt(values.size)
    return Shift(centre, se, float(values.size - 1), values.size)


def excess_variance(residuals: Sequence[float], within_variances: Sequence[float]) -> float:
    """``tau^2``: the variance of log ratios around the shift beyond the within-run
    variances, robustly: ``(1.4826 * MAD(residuals))^2 - median(within)``, at least 0."""
    values = np.asarray(residuals, dtype=np.float64)
    if values.size < MIN_POINTS:
        return 0.0
    spread = MAD_SIGMA * float(np.median(np.abs(values - np.median(values))))
    return max(0.0, spread**2 - float(np.median(np.asarray(within_variances, dtype=np.float64))))


def shift_and_spread(
    log_ratios: Sequence[float], within_variances: Sequence[float]
) -> tuple[Shift, float] | None:
    """The shared shift (:func:`shared_shift`) and ``tau^2`` (:func:`excess_variance`) of
    one comparison's points; None for fewer than :data:`MIN_POINTS` points. Both are
    medians, so a few points that really changed move neither; when a third of the
    points changed the MAD grows and the verdict grows cautious (fewer found, never more
    false alarms)."""
    shift = shared_shift(log_ratios)
    if shift is None:
        return None
    residuals = [r - shift.log_shift for r in log_ratios]
    return shift, excess_variance(residuals, within_variances)


@dataclass(frozen=True)
class RunToRun:
    """The run-to-run term of a comparison: ``tau2`` (per-point variance of the log
    ratio between runs), where it came from (``history``: earlier runs of the
    environment; ``this pair``: the scatter of this comparison's points) and the
    standard deviation of the shared shifts the history showed (None without one)."""

    tau2: float
    source: str
    shift_sd: float | None = None
    pairs: int = 0


def from_history(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> RunToRun | None:
    """The run-to-run term from earlier consecutive runs of one environment: per pair,
    the points' log ratios and within-run variances; ``tau2`` the median of the pairs'
    :func:`excess_variance`, and the standard deviation of their shared shifts (a robust
    one: 1.4826 x their MAD around 0, for three pairs or more). None without a pair of
    :data:`MIN_POINTS` points."""
    taus, shifts = [], []
    for log_ratios, within in pairs:
        found = shift_and_spread(log_ratios, within)
        if found is None:
            continue
        shifts.append(found[0].log_shift)
        taus.append(found[1])
    if not taus:
        return None
    shift_sd = MAD_SIGMA * float(np.median(np.abs(shifts))) if len(shifts) >= 3 else None
    return RunToRun(float(np.median(taus)), "history", shift_sd, len(taus))


def pair_terms(
    base_rows: Sequence[Mapping[str, Any]], contender_rows: Sequence[Mapping[str, Any]]
) -> tuple[list[float], list[float]]:
    """Two runs' points as the log ratios of their process medians' centres and the
    within-run variances of those log ratios (``s_a^2 / k_a + s_b^2 / k_b``): the points
    both measured ok in two processes or more."""
    base = {r["benchmark_id"]: r for r in base_rows}
    logs, within = [], []
    for row in contender_rows:
        other = base.get(row["benchmark_id"])
        sides = [_log_side(r) for r in (other, row)] if other is not None else [None]
        if any(side is None for side in sides):
            continue
        (mean_a, var_a), (mean_b, var_b) = sides  # type: ignore[misc]
        logs.append(mean_b - mean_a)
        within.append(var_a + var_b)
    return logs, within


def _log_side(row: Mapping[str, Any] | None) -> tuple[float, float] | None:
    if row is None or row.get("status") != "ok":
        return None
    medians = [float(m) for m in row.get("process_medians_s") or []]
    if len(medians) < 2 or min(medians) <= 0:
        return None
    mean, spread = log_spread(medians)
    return mean, spread**2 / len(medians)


def history_term(runs: Sequence[Sequence[Mapping[str, Any]]]) -> RunToRun | None:
    """:func:`from_history` over consecutive runs (oldest first), each its stored rows."""
    return from_history([pair_terms(a, b) for a, b in itertools.pairwise(runs)])
