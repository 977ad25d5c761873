"""The smallest change a comparison could have seen: its minimum detectable effect (MDE).

"not significant" says the data could not tell; it does not say whether the comparison
could ever have told a 10 % slowdown. On our 2-core VM two runs of identical code differ
by ~10 % and three processes a side give Welch's test about 4 degrees of freedom, so a
point needs a change of 15-30 % before the verdict can call it: a clean +10 % went unseen
at 20 of 20 points (issue 33). This module says so, per point and for the comparison.

**Definition.** The verdict (:mod:`benchbench.analysis.verdict`) tests ``log(ratio)``
with a t statistic ``log(ratio) / se`` on ``df`` degrees of freedom (Welch's test on the
per-process log medians: each run's variance between its processes, the two runs'
variances apart; the paired test of ``ab``'s rounds; for one process a side the
bootstrap interval read as a normal one, ``df`` infinite). For a true slowdown ``d``
(``log(1 + d)`` in log space) the statistic is noncentral t with noncentrality
``log(1 + d) / se``. The MDE is the ``d`` at which the verdict finds it (``p`` below the
per-point alpha, on the slower side) with probability ``power`` (default 0.8,
:data:`~benchbench.core.defaults.POWER`)::

    P(T'(df, log(1 + d) / se) > t(df, 1 - alpha_point / 2)) = power

``se`` and ``df`` are those the two runs showed, so the figure is what the verdict's own
test could flag, not a separate model. **And the minimum effect**: the verdict marks a
point ``slower`` only when it is significant *and* its ratio is at least ``1 + m``
(``--min-effect``), so the MDE printed is the ``d`` found with probability ``power`` by
both conditions together (:func:`verdict_effect`: the estimate, normal around
``log(1 + d)``, must pass the larger of ``t * se_hat`` and ``log(1 + m)``, averaged
over the spread of ``se_hat`` and over the true standard error that the shown ``se``
leaves uncertain: read from five processes a side, it is itself uncertain, and taken for
the truth it made a printed figure that a change of its size met at ~70 % of points,
not 80 %). It is never below ``m``: a true change of exactly
``m`` is found about half the time, so it is never printed as ``< 5 %``. It is
symmetric in log space, as the verdict is: a speedup of ``1 / (1 + d)`` is found as
often.

**Many points.** ``compare`` judges a comparison's points as one family (Benjamini-
Hochberg q-values). What p-value a point needs depends on how many others changed:

- a change at every point, found at a share ``power`` of them: BH flags the ``k`` smallest
  p-values with ``p_(k) <= k alpha / N``, i.e. ``alpha * power`` at ``k = power * N``.
  This is the figure printed (``mde``) until the shift line is judged: a regression of
  the code that shows everywhere;
- beyond a judged shared shift (:mod:`benchbench.analysis.rerun`) a change at every point
  is the shift line's (at over half of them, it moves the shift): the figure printed is
  then for a change at a third of the points (:data:`BEYOND_SHIFT`, ``alpha * power /
  3``), found at 207 of 240 injected points (tests/unit/test_rerun.py), 25 of 30 real;
- a change at one point alone: it must reach ``p <= alpha / N`` (``mde_alone`` in the
  JSON output, and the comparison's note).

**What it leaves out.** A shift of the whole machine between the two runs (the issue's
~10 % drift) moves every point alike; the verdict cannot tell it from a change of the
code, and neither figure contains it: that is what ``benchbench ab`` (both sides in
lockstep) and instruction counts are for. The verdict also calls nothing below
``--min-effect`` a change, whatever the test: a point whose MDE is below it is printed
as ``< 5 %``.

**Validated like a classifier** (tests/unit/test_detectable.py: injected per-process
medians, log-normal spread 2-12 % per point plus one process in ten 17-39 % slow, a
second run's MDE printed from an A/A comparison of two runs, then a slowdown of 1.5x,
1.0x and 0.5x that point's figure injected into a third run): see the table in that
test's module docstring; on real runs, ``benchmarks/gate_bench.py --mde``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from benchbench.analysis.changepoint import MIN_SIZE, P_THRESHOLD, WINDOW
from benchbench.core.defaults import ALPHA, MIN_EFFECT, POWER
from benchbench.core.stats import log_spread

#: The share of the points a change is stated for where the points are judged beyond a
#: judged shared shift (module docstring): a change at every point is then the shift
#: line's, and a change at more than half of them moves the shift itself.
BEYOND_SHIFT = 1.0 / 3.0


def point_alpha(alpha: float = ALPHA, power: float = POWER, share: float = 1.0) -> float:
    """The p-value a point needs when a change at a ``share`` of the points is found at a
    share ``power`` of those, under Benjamini-Hochberg (module docstring): ``alpha *
    power * share``."""
    return alpha * power * share


def change_at(share: float) -> str:
    """What an MDE of ``share`` is stated for, in words."""
    if share >= 1.0:
        return "a change at every point"
    if math.isclose(share, BEYOND_SHIFT):
        return "a change at a third of the points, beyond the shared shift"
    return f"a change at {100 * share:.0f} % of the points, beyond the shared shift"


@lru_cache(maxsize=4096)
def _factor(df: float, alpha: float, power: float) -> float:
    # Noncentral t: scipy.stats costs ~0.5 s to import, paid by comparisons only.
    from scipy.optimize import brentq
    from scipy.special import ndtri, stdtrit
    from scipy.stats import nct

    if not math.isfinite(df) or df > 1e4:
        return float(ndtri(1.0 - alpha / 2.0) + ndtri(power))
    critical = float(stdtrit(df, 1.0 - alpha / 2.0))
    return float(brentq(lambda nc: nct.sf(critical, df, nc) - power, 0.0, 50.0 + 10 * critical))


def detectable_factor(df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """``K``: a true ``|log ratio|`` of ``K * se`` is found with probability ``power`` by a
    two-sided t-test at ``alpha`` on ``df`` degrees of freedom (infinite: the normal).
    ValueError for ``df <= 0`` or ``alpha`` / ``power`` outside (0, 1)."""
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    # Rounded so that a comparison's points share a handful of root solves.
    return _factor(round(df, 1) if math.isfinite(df) else math.inf, alpha, power)


def detectable_effect(
    se_log: float, df: float, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The smallest slowdown (``ratio - 1``) found with probability ``power`` by the
    verdict's test of standard error ``se_log`` on ``df`` degrees of freedom at
    ``alpha``: ``exp(K * se_log) - 1`` (module docstring). NaN for an unknown ``se_log``,
    infinity for an infinite one (too few samples to test)."""
    if math.isnan(se_log) or math.isnan(df):
        return math.nan
    if math.isinf(se_log):
        return math.inf
    if se_log == 0.0:
        return 0.0
    return math.expm1(detectable_factor(df, alpha, power) * se_log)


#: Quantiles of a variance estimate that the verdict's power is averaged over (midpoints of
#: equal-probability slices of ``chi2(df) / df``): 64 put the power within ~0.2 % of its
#: integral.
VARIANCE_SLICES = 64


@lru_cache(maxsize=8192)
def _verdict_factor(df: float, alpha: float, power: float, floor: float) -> float:
    """``x``: a true ``log ratio`` of ``x * se`` (``se`` as the comparison showed it) is
    marked ``slower`` with probability ``power`` by the verdict as it decides,
    significance (``|t| > t(df, 1 - alpha/2)``) *and* the minimum effect (``log ratio >=
    floor * se``), :func:`verdict_effect`.

    Averaged over two uncertainties, each a ``chi2(df) / df`` on ``df`` degrees of
    freedom: the true standard error given the one shown (``r = sigma / se``: ``se^2``
    is ``sigma^2 chi2 / df``, so ``r = sqrt(df / chi2)``, the posterior under a flat prior
    on ``log sigma``), and the one the comparison that meets the change will estimate
    (``q = se_hat / sigma = sqrt(chi2 / df)``). Its estimate is normal around the truth
    with sd ``r`` (in units of ``se``) and must pass the larger of ``t * r * q`` and
    ``floor``. Without the first average the figure assumes the shown ``se`` is the
    truth, and a change of the printed size is found at ~65 % of points, not 80 %
    (five processes a side; benchmarks/gate_bench.py --mde, BENCHMARKS.md).
    """
    import numpy as np
    from scipy.optimize import brentq
    from scipy.special import chdtri, ndtr, stdtrit

    if not math.isfinite(df) or df > 1e4:
        truth = seen = np.ones(1)
        critical = float(stdtrit(1e6, 1.0 - alpha / 2.0))
    else:
        slices = (np.arange(VARIANCE_SLICES) + 0.5) / VARIANCE_SLICES
        chi = chdtri(df, slices) / df
        truth, seen = np.sqrt(1.0 / chi)[:, None], np.sqrt(chi)[None, :]
        critical = float(stdtrit(df, 1.0 - alpha / 2.0))
    # The estimate must pass the larger of the two bars; it is normal around the truth.
    bar = np.maximum(critical * truth * seen, floor)

    def found(x: float) -> float:
        return float(np.mean(ndtr((x - bar) / truth))) - power

    low, high = float(bar.min()) - 20.0 * float(truth.max()), float(bar.max()) + 20.0
    while found(high) < 0:
        high *= 2.0
    return float(brentq(found, low, high))


def verdict_effect(
    se_log: float,
    df: float,
    alpha: float = ALPHA,
    power: float = POWER,
    min_effect: float = MIN_EFFECT,
) -> float:
    """The smallest slowdown (``ratio - 1``) the verdict marks ``slower`` with
    probability ``power``: its test significant at ``alpha`` on ``df`` degrees of freedom
    with standard error ``se_log`` *and* the ratio at least ``1 + min_effect`` (the two
    conditions of :func:`~benchbench.analysis.verdict.mark_ratio`). Never below
    ``min_effect``: a true change of exactly the minimum effect is marked about half the
    time. NaN for an unknown ``se_log``, infinity for an infinite one."""
    if math.isnan(se_log) or math.isnan(df):
        return math.nan
    if math.isinf(se_log):
        return math.inf
    floor = math.log1p(min_effect)
    if se_log == 0.0:
        return min_effect
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    # Rounded so that a comparison's points share a handful of root solves (< 0.5 %).
    ratio = round(floor / se_log, 2 if floor / se_log < 10 else 1)
    key_df = round(df, 1) if math.isfinite(df) else math.inf
    return math.expm1(_verdict_factor(key_df, alpha, power, ratio) * se_log)


def family_effects(
    se_log: float | None,
    df: float | None,
    alpha: float,
    power: float,
    family: int,
    min_effect: float = MIN_EFFECT,
    share: float = 1.0,
) -> tuple[float, float]:
    """A point's MDE in a family of ``family`` points judged together, by the verdict as
    it decides (:func:`verdict_effect`): for a change at a ``share`` of the points (at
    :func:`point_alpha`; 1: every point) and for a change at this point alone (at
    ``alpha / family``); NaN for a point without a test."""
    if se_log is None or df is None:
        return math.nan, math.nan
    return (
        verdict_effect(se_log, df, point_alpha(alpha, power, share), power, min_effect),
        verdict_effect(se_log, df, alpha / max(1, family), power, min_effect),
    )


def step_effect(
    noise_rel: float | None,
    values: int,
    power: float = POWER,
    p_threshold: float = P_THRESHOLD,
    min_size: int = MIN_SIZE,
    window: int = WINDOW,
) -> float:
    """The smallest step at a series' newest ``min_size`` runs that ``regressions``' test
    finds with probability ``power``: the detector's Student t-test (pooled variance,
    :class:`benchbench.analysis.edivisive.TTest`) at ``p_threshold`` between those runs
    and the ``values - min_size`` before them (at most a window's worth), with the
    series' own per-run noise (``noise_rel``, :func:`benchbench.analysis.changepoint
    .analyze`'s). E-divisive also searches for where the step is, so it finds a step of
    this size somewhat less often: the figure is a floor. NaN for a series too short to
    judge (fewer than ``2 * min_size`` values) or without a noise figure."""
    before = min(values, window) - min_size
    if noise_rel is None or before < min_size or not math.isfinite(noise_rel):
        return math.nan
    se = noise_rel * math.sqrt(1.0 / min_size + 1.0 / before)
    return detectable_effect(se, float(before + min_size - 2), p_threshold, power)


def side_variance(process_medians: Sequence[float]) -> tuple[float, int] | None:
    """One run's share of the verdict's Welch standard error at a point: the variance of
    the mean of its per-process log medians (``s^2 / k``) and ``k``; None for fewer than
    two processes (the verdict then falls back to the bootstrap)."""
    if len(process_medians) < 2 or min(process_medians) <= 0:
        return None
    _mean, spread = log_spread(process_medians)
    return spread**2 / len(process_medians), len(process_medians)


#: Degrees of freedom at which :func:`factor_table` gives the factor; the dashboard
#: interpolates between them: the page's MDE is within ~1 % of compare's (tested).
TABLE_DF = (
    1,
    1.25,
    1.5,
    1.75,
    2,
    2.25,
    2.5,
    3,
    3.5,
    4,
    5,
    6,
    7,
    8,
    10,
    12,
    15,
    20,
    30,
    50,
    100,
    1000,
)


#: The minimum effect over the standard error (``log(1 + m) / se``) at which
#: :func:`factor_table` gives the verdict's factor; beyond the last, ``x - floor`` holds.
TABLE_FLOOR: tuple[float, ...] = (
    *(k / 4 for k in range(17)),  # 0 .. 4 by 0.25
    5.0,
    6.0,
    7.0,
    8.0,
    10.0,
    12.0,
    15.0,
    20.0,
    30.0,
    50.0,
)


def factor_table(
    alpha: float = ALPHA, power: float = POWER, min_effect: float = MIN_EFFECT, share: float = 1.0
) -> dict[str, object]:
    """The verdict's factor (:func:`verdict_effect`: significance at :func:`point_alpha`
    of ``share`` and the minimum effect) at :data:`TABLE_DF` x :data:`TABLE_FLOOR`: what
    the dashboard's compare page multiplies a point's Welch standard error by, read at its
    df and ``log(1 + min_effect) / se``, so that its MDE is ``compare``'s."""
    alpha_point = point_alpha(alpha, power, share)
    return {
        "power": power,
        "alpha_point": alpha_point,
        "share": share,
        "words": change_at(share),
        "min_effect": min_effect,
        "df": list(TABLE_DF),
        "floor": list(TABLE_FLOOR),
        "factor": [
            [round(_verdict_factor(float(df), alpha_point, power, r), 4) for r in TABLE_FLOOR]
            for df in TABLE_DF
        ],
    }


@dataclass(frozen=True)
class Detectable:
    """The MDE of one comparison's points, and what it means for the whole."""

    #: Per point compared (NaN where none could be computed), at :func:`point_alpha`.
    effects: tuple[float, ...]
    min_effect: float = MIN_EFFECT
    alpha: float = ALPHA
    power: float = POWER
    #: The share of the points the change is stated for (:func:`point_alpha`).
    share: float = 1.0

    @property
    def known(self) -> list[float]:
        return sorted(e for e in self.effects if not math.isnan(e))

    @property
    def smallest(self) -> float | None:
        return self.known[0] if self.known else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.known) if self.known else None

    @property
    def blind(self) -> bool:
        """True when every point compared could only have seen changes above the
        minimum effect: the comparison could not have seen a change that counts."""
        return bool(self.known) and self.known[0] > self.min_effect

    @property
    def below_min_effect(self) -> int:
        """Points that could see a change as small as the minimum effect."""
        return sum(e <= self.min_effect for e in self.known)

    def sentence(self, paired: bool = False) -> str | None:
        """The comparison's line about what it could have seen (None: nothing tested);
        ``paired``: an ``ab`` comparison, whose remedy is more rounds, not ``ab``."""
        if self.smallest is None or self.median is None:
            return None
        how = (
            f"power {100 * self.power:.0f} %, alpha "
            f"{point_alpha(self.alpha, self.power, self.share):.2g} a point: "
            f"{change_at(self.share)}"
        )
        if self.blind:
            return (
                f"this comparison could not have seen a change below "
                f"{format_effect(below(self.smallest))} ({how}; median "
                f"{format_effect(self.median)}); "
                + ("more `--rounds` or `--metric instructions`" if paired
                   else "use `ab` or `--metric instructions`")
            )  # fmt: skip
        return (
            f"smallest detectable change: median {format_effect(self.median)} over "
            f"{len(self.known)} points, {self.below_min_effect} could see the "
            f"{100 * self.min_effect:g} % minimum effect ({how})"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "power": self.power,
            "alpha_point": point_alpha(self.alpha, self.power, self.share),
            "share": self.share,
            "smallest": finite(self.smallest),
            "median": finite(self.median),
            "below_min_effect": self.below_min_effect,
            "blind": self.blind,
        }


def finite(value: float | None) -> float | None:
    """``value`` where it is a finite number, else None (JSON has no NaN)."""
    return value if value is not None and math.isfinite(value) else None


#: Above this relative change (11 times the time) an MDE is shown as ``> 1000 %``: its
#: digits would only say how little two or three processes can tell (``2797593 %``).
LARGEST_SHOWN = 10.0


def below(effect: float | None) -> float | None:
    """``effect`` as the bound of "could not have seen a change below": at most
    :data:`LARGEST_SHOWN` (an MDE of 28,000 times cannot see a change below 1000 % either)."""
    return None if effect is None else min(effect, LARGEST_SHOWN)


def format_effect(effect: float | None, min_effect: float | None = None) -> str:
    """An MDE as a table cell: ``12 %``, ``< 5 %`` below the minimum effect (the verdict
    calls nothing smaller a change), ``> 1000 %`` above :data:`LARGEST_SHOWN`, ``-``
    unknown, ``untestable`` infinite."""
    if effect is None or math.isnan(effect):
        return "-"
    if math.isinf(effect):
        return "untestable"
    if min_effect is not None and effect <= min_effect:
        return f"< {100 * min_effect:.0f} %"
    if effect > LARGEST_SHOWN:
        return f"> {100 * LARGEST_SHOWN:.0f} %"
    return f"{100 * effect:.1f} %" if effect < 0.1 else f"{100 * effect:.0f} %"


def detectable(
    effects: Sequence[float | None],
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    power: float = POWER,
    share: float = 1.0,
) -> Detectable:
    """:class:`Detectable` of per-point MDEs (None: that point was not tested) stated for a
    change at a ``share`` of the points."""
    return Detectable(
        tuple(math.nan if e is None else e for e in effects), min_effect, alpha, power, share
    )
