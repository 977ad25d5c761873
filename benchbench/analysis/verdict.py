"""The one verdict: is B faster, slower or the same as A, from their per-call times?

Every comparison of benchbench — ``benchbench compare`` (two runs), ``benchbench time``
and :func:`benchbench.compare_variants` (variants at each size), the pytest ``bench``
fixture's baseline check and the claims — goes through the two functions here:

1. :func:`estimate` turns two sides' samples into an :class:`Estimate`: the **ratio of
   medians** ``median(contender) / median(base)`` (above 1 the contender is slower),
   its percentile-bootstrap **confidence interval** at ``1 - alpha`` and a **p-value**.
   The bootstrap resamples ``resamples`` times from a generator seeded with ``seed``,
   so the same samples always give the same interval. When the samples are
   **paired** (interleaved rounds: sample *i* of each side was taken in round *i*),
   rounds are resampled whole, so drift that hits both sides of a round cancels in the
   ratio; otherwise each side is resampled on its own.
2. :func:`mark` turns an estimate into one of :data:`VERDICTS`, with the minimum effect
   ``m`` (default 5 %), symmetric in log space:

   - ``slower``: significant and ``ratio >= 1 + m``;
   - ``faster``: significant and ``ratio <= 1 / (1 + m)`` (0.952 for m = 5 %: a 5 %
     slowdown undone is a 4.8 % speedup, so "5 % either way" is the same distance
     from 1 on a log axis);
   - ``same``: significant, but inside those bounds (a real but negligible change);
   - ``not significant``: the data cannot tell (which is not the same as ``same``).

**The p-value** is the two-sided bootstrap p ``2 * min(P(ratio* <= 1), P(ratio* >= 1))``
over the resampled ratios, capped at 1. The interval's bounds are order statistics of
the same resampled ratios chosen so that ``p < alpha`` exactly when the ``1 - alpha``
interval excludes 1: the test and the interval never disagree. (A Mann-Whitney U test
beside a bootstrap CI of the medians could: it tests whole distributions, the CI the
medians.) A side with fewer than :data:`MIN_SAMPLES` samples gets ``p = 1``: the
bootstrap of so few values is not a test.

**Validated like a classifier** (tests/unit/test_verdict.py: injected log-normal
timings, 2 % of samples 1.5x slow, 20 samples a side, 400 seeded trials per case):

=================  ======================  ================  =====================
per-sample spread  A/A: slower or faster   A/A: significant  true 10 % slowdown:
                   (unpaired / paired)     (alpha is 5 %)    ``slower``
=================  ======================  ================  =====================
3 % (quiet)        0 % / 0 %               3.3 % / 4.5 %     100 % / 100 %
10 % (busy)        3.3 % / 4.3 %           3.3 % / 4.3 %     66.5 % / 65 %
=================  ======================  ================  =====================

The samples here are treated as independent: noise shared by the samples of one
process (an offset per process, common between runs) is not accounted for at this
level, and makes two runs of identical code differ more often than alpha says.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FASTER, SLOWER, SAME, NOT_SIGNIFICANT = "faster", "slower", "same", "not significant"
#: Every mark :func:`mark` gives.
VERDICTS = (FASTER, SLOWER, SAME, NOT_SIGNIFICANT)
#: Marks of a point that has no verdict, in a comparison of two runs: measured in the
#: contender only, absent or skipped in the contender, an error in the contender.
NEW, GONE, FAILING = "new", "gone", "failing"
#: Every mark ``benchbench compare`` prints, in the order of its summary.
MARKS = (SLOWER, FAILING, FASTER, SAME, NOT_SIGNIFICANT, NEW, GONE)

#: A change of the median by 5 % (either way, in log space) is what we call a change.
MIN_EFFECT = 0.05
#: Significance level; the interval is at ``1 - ALPHA`` = 95 %.
ALPHA = 0.05
#: Bootstrap resamples: 2,000 put the 2.5 / 97.5 % percentiles within ~1 % of their
#: limit values (Efron & Tibshirani recommend >= 1,000 for percentile intervals) and
#: cost ~4 ms for 20 samples a side, ~7 ms for 40.
RESAMPLES = 2000
SEED = 20261122
#: Fewest samples a side for a significant result. With 4 or fewer, a median's
#: bootstrap takes only a handful of distinct values and its tails are not a p-value
#: (4 vs 4 samples, all of one side above the other, give a bootstrap p of 0 where an
#: exact rank test gives 0.029).
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Estimate:
    """``median(contender) / median(base)`` with its ``1 - alpha`` interval and p-value."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    paired: bool
    alpha: float = ALPHA

    @property
    def significant(self) -> bool:
        """True when ``p < alpha``: the interval excludes 1 (and each side had at least
        :data:`MIN_SAMPLES` samples)."""
        return self.p_value < self.alpha


def _bootstrap_ratios(
    base: np.ndarray, contender: np.ndarray, paired: bool, resamples: int, seed: int
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    # Chunks keep the index matrices under ~8 MB whatever the sample counts.
    chunk = max(1, min(resamples, 1_000_000 // max(base.size, contender.size)))
    for start in range(0, resamples, chunk):
        count = min(chunk, resamples - start)
        base_idx = rng.integers(0, base.size, (count, base.size))
        con_idx = base_idx if paired else rng.integers(0, contender.size, (count, contender.size))
        ratios[start : start + count] = np.median(contender[con_idx], axis=1) / np.median(
            base[base_idx], axis=1
        )
    return ratios


def estimate(
    base_s: Sequence[float],
    contender_s: Sequence[float],
    *,
    paired: bool = False,
    alpha: float = ALPHA,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """Ratio of medians of two sides' per-call times, its bootstrap CI and p-value.

    ``paired``: the samples are interleaved rounds (same count; sample *i* of both sides
    from round *i*), resampled as pairs. Raises ``ValueError`` for an empty side, for
    non-positive or non-finite times, paired sides of different lengths, or too few
    ``resamples`` to place the interval's bounds (fewer than 2 / alpha).
    """
    base = np.asarray(base_s, dtype=np.float64)
    contender = np.asarray(contender_s, dtype=np.float64)
    if base.size < 1 or contender.size < 1:
        raise ValueError(
            f"a ratio of medians needs >= 1 sample a side, got {base.size} and {contender.size}"
        )
    if paired and base.size != contender.size:
        raise ValueError(f"paired samples need equal counts, got {base.size} and {contender.size}")
    if not (
        np.all(np.isfinite(base) & (base > 0)) and np.all(np.isfinite(contender) & (contender > 0))
    ):
        raise ValueError("times must be finite and > 0; drop failed samples before comparing")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if resamples * alpha / 2.0 < 1.0:
        raise ValueError(
            f"resamples must be >= {math.ceil(2.0 / alpha)} for alpha {alpha}, got {resamples}"
        )
    ratio = float(np.median(contender) / np.median(base))
    ratios = np.sort(_bootstrap_ratios(base, contender, paired, resamples, seed))
    # Order statistics matched to the p-value: with a = alpha/2 * resamples, the lower
    # bound exceeds 1 iff fewer than a resampled ratios are <= 1 (and so for the upper).
    k = math.ceil(alpha / 2.0 * resamples)
    low, high = float(ratios[k - 1]), float(ratios[resamples - k])
    if min(base.size, contender.size) < MIN_SAMPLES:
        return Estimate(ratio, low, high, 1.0, paired, alpha)
    at_or_below = int(np.searchsorted(ratios, 1.0, side="right"))
    at_or_above = resamples - int(np.searchsorted(ratios, 1.0, side="left"))
    p = min(1.0, 2.0 * min(at_or_below, at_or_above) / resamples)
    return Estimate(ratio, low, high, p, paired, alpha)


def mark(estimate: Estimate, min_effect: float = MIN_EFFECT) -> str:
    """``slower``, ``faster``, ``same`` or ``not significant`` (module docstring)."""
    if not 0 <= min_effect < 1:
        raise ValueError(f"min_effect must be a fraction in [0, 1), got {min_effect}")
    if not estimate.significant:
        return NOT_SIGNIFICANT
    if estimate.ratio >= 1.0 + min_effect:
        return SLOWER
    if estimate.ratio <= 1.0 / (1.0 + min_effect):
        return FASTER
    return SAME


def decisive(ratio: float, min_effect: float = MIN_EFFECT) -> bool:
    """True when ``ratio`` is beyond the minimum effect either way (the effect half of
    :func:`mark`, for callers that have medians but no samples)."""
    return ratio >= 1.0 + min_effect or ratio <= 1.0 / (1.0 + min_effect)
