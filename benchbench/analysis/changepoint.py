"""Regression detection over one benchmark's history: change points, creep, noise.

Pure functions over a sequence of numbers (the median time in seconds of each run,
oldest first); no store, no clock. :func:`analyze` returns a :class:`SeriesAnalysis`;
:func:`regressions` keeps the change points that make things worse. This module holds
the method, its parameters and its results; the split and merge steps are in
:mod:`benchbench.analysis.edivisive`, the creep fit in :mod:`benchbench.analysis.creep`.

Method: E-divisive means with a Student t-test, as in Hunter / Apache Otava
(Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
Regressions", ICPE 2023, https://doi.org/10.1145/3578244.3583719), built on the
E-divisive energy statistic of Matteson and James ("A Nonparametric Approach for
Multiple Change Point Analysis of Multivariate Data", JASA 2014):

1. **Split.** Windows of ``window`` points (Hunter's default 50) slide by half a
   window. In each window, E-divisive picks the split ``tau`` (and right end
   ``kappa``) that maximises the energy statistic (exponent alpha = 1)::

       Q(X, Y) = 2/(n+m) sum|X_i - Y_j| - 2m/((n+m)(n-1)) sum_{i<k}|X_i - X_k|
                                        - 2n/((n+m)(m-1)) sum_{j<k}|Y_j - Y_k|

   and keeps it while a two-sided Student t-test between the two sides of the
   split has p below the first-pass threshold, ten times ``p_threshold``
   (Hunter's "weak change points"); the window is then split again recursively.
2. **Merge.** Over the union of weak change points, repeatedly drop the weakest one
   (the highest p-value if it is not below ``p_threshold``, otherwise the one with
   the smallest ``|rel_change|`` if that is below ``min_effect``) and re-test its
   neighbours against their new adjacent segments, until every change point left is
   significant and large enough. ``p_threshold`` = 0.001 is Hunter's default.

Departures from Hunter, each for a reason:

- ``min_size`` (the ``min.size`` of Matteson and James' ``ecp`` package; Hunter has
  none): a segment has at least 3 points. With heavy-tailed noise a single outlier
  at a window edge is otherwise a "significant" one-point segment; the price is
  that a new level is reported only once it has ``min_size`` points.
- levels and ``rel_change`` come from segment **medians**, not means, so that one
  outlier does not make a small change look larger than ``min_effect``;
- the t-test uses the textbook pooled sample variance (ddof = 1), Hunter feeds
  population standard deviations (ddof = 0) to scipy.

Creep (gradual drift) is reported as change points (the merge keeps a ramp as a
staircase of steps of at least ``min_effect``) **and** as a :class:`Creep` when a
ramp explains the data better. Around each run of same-direction change points no
more than ``creep_max_gap`` points apart, a continuous old-level / linear ramp /
new-level ("broken stick") model is fitted by least absolute deviations, the levels
being the medians outside the ramp. The run is a creep when the ramp spans at least
``creep_min_points`` points and its absolute error, with a BIC-like penalty of
``sigma * ln(points)`` per parameter (ramp 4, staircase of r steps 2r + 1), is below
the staircase's. This part is ours, not Hunter's. Every creep covers at least one
change point, so :func:`regressions` already alerts on it; a ramp still running at
the end of the series is a creep whose ``end`` is near the last index.

Missing values: NaN (a failed run) is skipped; indexes in the results always refer
to positions in the input. Infinite and non-positive values are rejected: a time or
a rate is positive, and relative changes need a positive level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from benchbench.analysis.creep import find_creeps
from benchbench.analysis.edivisive import TTest, merge, split
from benchbench.core.errors import BenchbenchError, UsageError

FloatArray = NDArray[np.float64]

#: Fewest points in a segment (``min_size``'s default; why 3: see the module docstring).
MIN_SIZE = 3
#: Fewest values a series needs before :func:`analyze` can find a change point: one
#: segment of ``MIN_SIZE`` on each side of it, so 6 runs with a measured value.
MIN_VALUES = 2 * MIN_SIZE
#: A change point's p-value must be below this (Hunter's default), and the windows the
#: split step slides are this long (module docstring).
P_THRESHOLD = 0.001
WINDOW = 50

# 1.4826 turns a median absolute deviation into a normal standard deviation, and
# successive differences of independent noise have sqrt(2) times its deviation.
_MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class ChangePoint:
    """A step in the level of a series.

    ``index`` is the input position of the first value at the new level; ``before`` and
    ``after`` are the medians of the adjacent segments; ``rel_change`` is
    ``after / before - 1`` (positive = slower when values are times); ``p_value`` is
    the two-sided Student t-test between those segments.
    """

    index: int
    before: float
    after: float
    rel_change: float
    p_value: float


@dataclass(frozen=True)
class Creep:
    """A gradual drift: the level moves linearly from ``before`` to ``after``.

    ``start`` is the input index of the last value at the old level, ``end`` the first
    at the new level; ``slope_rel_per_point`` is ``rel_change / (points spanned)``,
    e.g. 0.01 for +1 % per run; ``change_points`` are the indexes of the change
    points the ramp covers.
    """

    start: int
    end: int
    before: float
    after: float
    rel_change: float
    slope_rel_per_point: float
    change_points: tuple[int, ...]


@dataclass(frozen=True)
class SeriesAnalysis:
    """What :func:`analyze` found in one series.

    ``change_points`` are significant (p < ``p_threshold``) and at least ``min_effect``
    in size, oldest first. ``unstable`` means the series is too noisy to judge
    (``noise_rel > max_noise_rel``): then it reports no change points and no creep.
    ``noise_rel`` is the robust per-point relative noise (MAD of successive
    differences, as a normal sigma, over the median level), ``None`` with fewer than 3
    values. ``n_values`` counts the values used (NaN skipped).
    """

    change_points: tuple[ChangePoint, ...]
    creeps: tuple[Creep, ...]
    unstable: bool
    noise_rel: float | None
    n_values: int


def analyze(
    values: Sequence[float] | NDArray[np.floating],
    *,
    min_effect: float = 0.05,
    p_threshold: float = P_THRESHOLD,
    max_noise_rel: float = 0.10,
    window: int = WINDOW,
    min_size: int = MIN_SIZE,
    creep_min_points: int = 6,
    creep_max_gap: int = 12,
) -> SeriesAnalysis:
    """Find level changes and creep in ``values`` (oldest first; NaN = missing run).

    ``min_effect``: smallest ``|after/before - 1|`` reported (5 %, the compare default).
    ``p_threshold``: significance of the final t-tests (Hunter's 0.001).
    ``max_noise_rel``: above this relative noise the series is ``unstable``. At 10 %
    per point a 5 % step needs about 50 points each side to reach p = 0.001, a
    whole window, and the harness already warns at a relative IQR of 10 %.
    ``window``: points per E-divisive window (Hunter's 50). ``min_size``: fewest
    points in a segment. ``creep_min_points`` / ``creep_max_gap``: see the module
    docstring.

    Series shorter than ``2 * min_size`` values (:data:`MIN_VALUES` by default) yield
    no change points (not an error). Raises :class:`BenchbenchError` for infinite or
    non-positive values and :class:`UsageError` for out-of-range parameters.
    """
    _check_parameters(min_effect, p_threshold, max_noise_rel, window, min_size, creep_min_points)
    raw = np.asarray(values, dtype=np.float64).reshape(-1)
    positions = np.flatnonzero(~np.isnan(raw))
    y = raw[positions]
    bad = np.flatnonzero(~np.isfinite(y) | (y <= 0.0))
    if bad.size:
        where = int(positions[bad[0]])
        raise BenchbenchError(
            f"series value at index {where} is {float(raw[where])!r}: values must be positive, "
            "finite times or rates (use NaN for a missing run)"
        )
    noise = _noise_rel(y)
    unstable = noise is not None and noise > max_noise_rel
    if unstable or y.size < 2 * min_size:
        return SeriesAnalysis((), (), unstable, noise, int(y.size))

    first_pass = p_threshold * 10.0 if p_threshold < 0.05 else min(2.0 * p_threshold, 1.0)
    test = TTest(y)
    weak = split(y, test, window, first_pass, min_size)
    kept = merge(y, test, weak, p_threshold, min_effect)
    change_points = tuple(
        ChangePoint(int(positions[k]), before, after, after / before - 1.0, p)
        for k, (before, after, p) in kept.items()
    )
    creeps = tuple(
        Creep(
            start=int(positions[s]),
            end=int(positions[e]),
            before=before,
            after=after,
            rel_change=after / before - 1.0,
            slope_rel_per_point=(after / before - 1.0) / (e - s),
            change_points=tuple(int(positions[k]) for k in run),
        )
        for s, e, before, after, run in find_creeps(
            y, kept, creep_min_points, creep_max_gap, (noise or 0.0) * float(np.median(y))
        )
    )
    return SeriesAnalysis(change_points, creeps, False, noise, int(y.size))


def regressions(analysis: SeriesAnalysis, *, higher_is_worse: bool = True) -> list[ChangePoint]:
    """The change points that make things worse (none when the series is unstable).

    Times: ``higher_is_worse=True`` (slower is a regression); rates such as GB/s:
    ``False``. Each :class:`Creep` covers at least one change point, so a worsening
    creep is in this list too.
    """
    if analysis.unstable:
        return []
    sign = 1.0 if higher_is_worse else -1.0
    return [cp for cp in analysis.change_points if sign * cp.rel_change > 0.0]


def _check_parameters(
    min_effect: float,
    p_threshold: float,
    max_noise_rel: float,
    window: int,
    min_size: int,
    creep_min_points: int,
) -> None:
    if not 0.0 <= min_effect < 1.0:
        raise UsageError(f"min_effect must be in [0, 1), got {min_effect!r} (0.05 means 5 %)")
    if not 0.0 < p_threshold < 1.0:
        raise UsageError(f"p_threshold must be in (0, 1), got {p_threshold!r} (e.g. 0.001)")
    if not max_noise_rel > 0.0:
        raise UsageError(f"max_noise_rel must be positive, got {max_noise_rel!r} (e.g. 0.10)")
    if min_size < 2:
        raise UsageError(f"min_size must be at least 2 points, got {min_size!r}")
    if window < 2 * min_size:
        raise UsageError(
            f"window must hold two segments of min_size={min_size} points, got {window!r}"
        )
    if creep_min_points < 2:
        raise UsageError(f"creep_min_points must be at least 2, got {creep_min_points!r}")


def _noise_rel(y: FloatArray) -> float | None:
    """Robust relative noise: MAD of successive differences (steps barely move it)."""
    if y.size < 3:
        return None
    d = np.diff(y)
    sigma = _MAD_TO_SIGMA * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    return sigma / float(np.median(y))
