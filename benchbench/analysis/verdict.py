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

That table treats the samples as independent. Noise shared by the samples of one
process (an offset per process: heap layout, page mapping, clock state) is not
accounted for by a sample-level test, and makes two runs of identical code differ
more often than alpha says. So:

**Process level.** When both sides were measured in at least two worker processes
(``base_processes`` / ``contender_processes``: samples per process, see
:class:`benchbench.core.stats.Stats`), the unit of replication is the process, as in
Kalibera & Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013): each process
contributes its median, and the test is **Welch's t-test on the logs of the per-process
medians** (a one-sample t-test on the per-process log ratios when the sides are paired:
measured interleaved in the same processes, as ``time`` does, or in lockstep rounds, as
``ab`` does). The ratio is the one the test is about: the ratio of the geometric means
of the per-process medians (when paired, the geometric mean of the per-process ratios,
each the median ratio of the process pair's samples taken side by side:
:func:`benchbench.core.stats.pair_log_ratios`), not the ratio of the headline medians.
The median of all samples pooled jumps between modes when the processes of a side fall
into two states, and a test whose effect is one estimator and whose standard error is
another's cries wolf: in lockstep runs of identical code beside a noisy neighbour,
pooled medians 1.12 apart came from rounds whose own ratios were 0.93-1.22 around 1.03
(BENCHMARKS.md, "ab: the effect the test is about"). The standard error of the log ratio
is the one of the per-process log medians, ``sqrt(s_a^2 / k_a + s_b^2 / k_b)``, with
Welch–Satterthwaite degrees of freedom; the interval is ``ratio * exp(± t * se)`` and
``p = P(|T_df| >= |log ratio| / se)``, so again the test and the interval agree. It
assumes the per-process log medians of a side are independent and roughly normal, with a
variance that may differ between the sides. Unlike Mann-Whitney, whose smallest
two-sided p with 3 values a side is 0.1, it can reach p < 0.05 with 3 processes a side
when the processes agree with each other (validated with injected between-process noise
in tests/unit/test_verdict.py and, on real runs, by ``benchmarks/gate_bench.py``).

**Many points at once.** ``compare`` and ``ab`` judge every point of two runs; at
alpha each, identical code would get a flagged point in most comparisons of 20 points.
They adjust the points' p-values together (:func:`adjusted_p`, Benjamini-Hochberg) and
mark each point with :func:`mark_ratio` on its q-value
(:func:`benchbench.analysis.compare.as_family`). ``time``, ``compare_variants``, the
pytest fixture and claims judge one point at a time with :func:`mark`.

**Instruction counts** (``run --metric instructions``) have a verdict of their own,
:func:`estimate_counts` and :func:`mark_counts`: a count is exact up to the small
variation measured between repeats and between fresh processes, so there is no
sampling distribution to test; a change beyond :data:`INSTRUCTIONS_MIN_EFFECT` (2 %) is
a change, unless the counts themselves moved by half that much.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The thresholds live in core.defaults, so that `compare --help` quotes them without
# importing numpy and scipy: a 5 % change of the median, 95 % intervals, a 1 % change of
# an instruction count.
from benchbench.core.defaults import ALPHA, INSTRUCTIONS_MIN_EFFECT, MIN_EFFECT
from benchbench.core.stats import (
    Stats,
    log_spread,
    pair_log_ratios,
    process_medians,
    t_quantile,
)

FASTER, SLOWER, SAME, NOT_SIGNIFICANT = "faster", "slower", "same", "not significant"
#: Every mark :func:`mark` gives.
VERDICTS = (FASTER, SLOWER, SAME, NOT_SIGNIFICANT)
#: Marks of a point that has no verdict, in a comparison of two runs: measured in the
#: contender only, absent or skipped in the contender, an error in the contender.
NEW, GONE, FAILING = "new", "gone", "failing"
#: Every mark ``benchbench compare`` prints, in the order of its summary.
MARKS = (SLOWER, FAILING, FASTER, SAME, NOT_SIGNIFICANT, NEW, GONE)

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
    #: ``process`` (per-process medians were the unit) or ``sample`` (one process a side).
    level: str = "sample"
    #: The standard error of ``log(ratio)`` and its degrees of freedom, as the test used
    #: them (Welch's or the paired t-test; for the bootstrap, the interval's width read
    #: as a normal one, ``df`` infinite): what the smallest detectable change is made of
    #: (:mod:`benchbench.analysis.detectable`).
    se_log: float = math.nan
    df: float = math.inf
    #: The test that decided: ``paired t`` (per-round log ratios), ``Welch t`` or
    #: ``bootstrap``; a paired comparison that could not pair says so here
    #: (``Welch t (unpaired: 4 vs 5 processes)``), never silently.
    test: str = "bootstrap"
    #: Pairs the paired t used (0 for the others).
    pairs: int = 0

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
    base_processes: Sequence[int] = (),
    contender_processes: Sequence[int] = (),
    rerun: float = 1.0,
) -> Estimate:
    """Ratio of medians of two sides' per-call times, its CI and p-value.

    ``paired``: the samples are interleaved rounds (same count; sample *i* of both sides
    from round *i*). ``base_processes`` / ``contender_processes``: samples per worker
    process; with two or more on both sides the test is at the process level (module
    docstring), otherwise the bootstrap. Raises ``ValueError`` for an empty side, for
    non-positive or non-finite times, paired sides of different lengths, process counts
    that do not add up, or too few ``resamples`` to place the interval's bounds (fewer
    than 2 / alpha). ``rerun``: the run-to-run factor (:mod:`benchbench.analysis.rerun`)
    that multiplies an unpaired process-level test's standard error.
    """
    base = np.asarray(base_s, dtype=np.float64)
    contender = np.asarray(contender_s, dtype=np.float64)
    if base.size < 1 or contender.size < 1:
        raise ValueError(
            f"a ratio of medians needs >= 1 sample a side, got {base.size} and {contender.size}"
        )
    by_process = len(base_processes) > 1 and len(contender_processes) > 1
    if paired and base.size != contender.size and not by_process:
        # At the process level the pairs are the processes (rounds), not the samples.
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
    if by_process:
        return _process_level(
            base, contender, base_processes, contender_processes, paired, alpha, rerun
        )
    ratios = np.sort(_bootstrap_ratios(base, contender, paired, resamples, seed))
    # Order statistics matched to the p-value: with a = alpha/2 * resamples, the lower
    # bound exceeds 1 iff fewer than a resampled ratios are <= 1 (and so for the upper).
    k = math.ceil(alpha / 2.0 * resamples)
    low, high = float(ratios[k - 1]), float(ratios[resamples - k])
    from scipy.special import ndtri  # ~0.3 s to import: `show` never needs it

    se_log = math.log(high / low) / (2.0 * float(ndtri(1.0 - alpha / 2.0)))
    if min(base.size, contender.size) < MIN_SAMPLES:
        return Estimate(ratio, low, high, 1.0, paired, alpha, se_log=math.inf)
    at_or_below = int(np.searchsorted(ratios, 1.0, side="right"))
    at_or_above = resamples - int(np.searchsorted(ratios, 1.0, side="left"))
    p = min(1.0, 2.0 * min(at_or_below, at_or_above) / resamples)
    return Estimate(ratio, low, high, p, paired, alpha, se_log=se_log)


def estimate_stats(base: Stats, contender: Stats, **options: object) -> Estimate:
    """:func:`estimate` of two :class:`Stats`, with their process counts."""
    return estimate(
        base.per_call_s,
        contender.per_call_s,
        base_processes=base.process_samples,
        contender_processes=contender.process_samples,
        **options,  # type: ignore[arg-type]
    )


def _process_level(
    base: np.ndarray,
    contender: np.ndarray,
    base_processes: Sequence[int],
    contender_processes: Sequence[int],
    paired: bool,
    alpha: float,
    rerun: float = 1.0,
) -> Estimate:
    test, pairs = "Welch t", 0
    k_b, k_c = len(base_processes), len(contender_processes)
    if paired and k_b != k_c:
        test = f"Welch t (unpaired: {k_b} vs {k_c} processes)"
    paired = paired and k_b == k_c
    if paired:  # each pair's samples taken side by side, ratio by ratio
        test, pairs = "paired t", k_b
        logs = np.asarray(pair_log_ratios(base, contender, base_processes, contender_processes))
        log_ratio, spread = float(logs.mean()), float(logs.std(ddof=1))
        se, df = spread / math.sqrt(k_b), float(k_b - 1)
    else:
        base_m = process_medians(base, base_processes)
        con_m = process_medians(contender, contender_processes)
        m_b, s_b = log_spread(base_m)
        m_c, s_c = log_spread(con_m)
        log_ratio = m_c - m_b
        v_b, v_c = s_b**2 / len(base_m), s_c**2 / len(con_m)
        se = math.sqrt(v_b + v_c) * rerun  # the runs' own scatter beyond their intervals
        # Welch-Satterthwaite; with both variances zero any df gives the same answer.
        denominator = v_b**2 / (len(base_m) - 1) + v_c**2 / (len(con_m) - 1)
        df = (
            (v_b + v_c) ** 2 / denominator
            if denominator > 0
            else float(len(base_m) + len(con_m) - 2)
        )
    ratio, effect = math.exp(log_ratio), abs(log_ratio)
    if se == 0.0:
        p = 1.0 if effect == 0.0 else 0.0
        return Estimate(ratio, ratio, ratio, p, paired, alpha, "process", 0.0, df, test, pairs)
    from scipy.special import stdtr  # ~0.3 s to import: `show` never needs it

    p = float(min(1.0, 2.0 * stdtr(df, -effect / se)))
    half = t_quantile(df, 1.0 - alpha) * se
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    return Estimate(ratio, low, high, p, paired, alpha, "process", se, df, test, pairs)


def mark(estimate: Estimate, min_effect: float = MIN_EFFECT) -> str:
    """``slower``, ``faster``, ``same`` or ``not significant`` (module docstring)."""
    return mark_ratio(estimate.ratio, estimate.significant, min_effect)


def mark_ratio(ratio: float, significant: bool, min_effect: float = MIN_EFFECT) -> str:
    """The mark of a ratio whose significance is already decided (:func:`mark` on one
    estimate; a family's adjusted p-values in :func:`adjusted_p`)."""
    if not 0 <= min_effect < 1:
        raise ValueError(f"min_effect must be a fraction in [0, 1), got {min_effect}")
    if not significant:
        return NOT_SIGNIFICANT
    if ratio >= 1.0 + min_effect:
        return SLOWER
    if ratio <= 1.0 / (1.0 + min_effect):
        return FASTER
    return SAME


def adjusted_p(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values) of a family of tests, in order.

    A comparison of N points makes N tests: at ``alpha`` each, identical code gets a
    flagged point in up to ``1 - (1 - alpha)^N`` of comparisons (64 % for 20 points;
    the gate suite's points flagged 9 of 36 ``ab`` pairs of identical code on real
    runs). Marking a point significant when its q-value is below ``alpha`` keeps the
    expected share of false discoveries among the flagged points at ``alpha`` and, when
    every point is unchanged, the chance of any flag at all at ``alpha``; when most
    points did change it costs little power (a q-value is at most ``N / rank`` times its
    p). NaN p-values stay NaN, outside the family.

    The step-up rule in numpy: ``q_(i) = min over j >= i of p_(j) * N / j``, capped at 1.
    ``scipy.stats.false_discovery_control`` computes the same (the unit test holds the
    two equal), but importing scipy.stats costs ~1 s of CPU, paid by every ``compare``.
    """
    values = np.asarray(p_values, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    known = np.flatnonzero(np.isfinite(values))
    if known.size:
        p = np.clip(values[known], 0.0, 1.0)
        order = np.argsort(p, kind="stable")
        scaled = p[order] * known.size / np.arange(1, known.size + 1)
        q = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
        out[known[order]] = q
    return [float(q) for q in out]


def decisive(ratio: float, min_effect: float = MIN_EFFECT) -> bool:
    """True when ``ratio`` is beyond the minimum effect either way (the effect half of
    :func:`mark`, for callers that have medians but no samples)."""
    return ratio >= 1.0 + min_effect or ratio <= 1.0 / (1.0 + min_effect)


@dataclass(frozen=True)
class CountEstimate:
    """``count(contender) / count(base)`` of instructions per call, and how unsure the
    counts are: ``noise``, the largest relative spread of either side's repeated counts
    (within a process, and between its processes where there were several)."""

    ratio: float
    noise: float


def estimate_counts(
    base_counts: Sequence[float],
    contender_counts: Sequence[float],
    base_spread: float = 0.0,
    contender_spread: float = 0.0,
) -> CountEstimate:
    """The ratio of two sides' median instruction counts per call (one count per
    instrumented process) and their noise (``*_spread``: each side's within-process
    spread, ``extra.instructions.spread``). ValueError for an empty side or a count
    that is not positive and finite."""
    sides = [np.asarray(base_counts, dtype=np.float64), np.asarray(contender_counts, np.float64)]
    if any(side.size < 1 for side in sides):
        raise ValueError("an instruction verdict needs >= 1 count a side")
    if not all(np.all(np.isfinite(side) & (side > 0)) for side in sides):
        raise ValueError("instruction counts must be finite and > 0")
    base, contender = (float(np.median(side)) for side in sides)
    between = [float((side.max() - side.min()) / np.median(side)) for side in sides]
    return CountEstimate(contender / base, max(base_spread, contender_spread, *between))


def mark_counts(found: CountEstimate, min_effect: float = INSTRUCTIONS_MIN_EFFECT) -> str:
    """The verdict on instruction counts: ``slower`` / ``faster`` beyond ``min_effect``
    (symmetric in log space, as :func:`mark`), ``same`` inside it, and ``not significant``
    when the counts' own noise is more than half the minimum effect (a count that moves
    that much between repeats cannot tell such a change from itself)."""
    if not 0 <= min_effect < 1:
        raise ValueError(f"min_effect must be a fraction in [0, 1), got {min_effect}")
    if 2.0 * found.noise > min_effect:
        return NOT_SIGNIFICANT
    if found.ratio >= 1.0 + min_effect:
        return SLOWER
    if found.ratio <= 1.0 / (1.0 + min_effect):
        return FASTER
    return SAME
