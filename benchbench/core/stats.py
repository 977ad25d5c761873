"""Statistics of a benchmark point, derived from its raw samples.

Times are per call, in seconds.

**One process.** The headline is the median of the samples; its confidence interval is
distribution-free (order statistics of a Binomial(n, 1/2)), so it holds for the skewed,
heavy-tailed timing distributions a shared machine produces, where a mean ± t·s interval
does not. It treats the samples as independent, which they are not across processes: a
process carries its own offset (heap layout, page mapping, frequency), shared by all of
its samples.

**Several processes** (``process_samples``: a point measured in rounds, each in a
fresh worker). The headline and its interval come from one estimator over the
processes, the two-level model of Kalibera & Jones ("Rigorous Benchmarking in
Reasonable Time", ISMM 2013): the per-process medians ``m_1 .. m_k`` are independent
draws (each from a fresh process), their logs roughly normal, so the headline is
``exp(mean(log m_j))`` (the geometric mean of the process medians), the standard error
of its log is ``s / sqrt(k)`` with ``s`` the standard deviation of ``log m_j``, and the
interval is ``headline * exp(± t(k-1) * s / sqrt(k))`` (Student's t, ``k - 1`` degrees
of freedom; :func:`process_interval`). With five processes order statistics of the
process medians reach at most 93.75 % ([min, max]), so a t-interval is the simple
choice. Every process stays in: none is left out for its time. A point whose processes
fall in two groups (:func:`modes`: memory layout, page placement) keeps both, its
interval wide, and its note says so.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from benchbench.core.columns import PROCESS_STATISTICS, STATISTICS

#: Confidence level of every interval benchbench reports.
CONFIDENCE = 0.95


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the order statistics bounding the median's CI.

    With B ~ Binomial(n, 1/2) counting samples below the true median, the interval
    [x_(l), x_(n-l+1)] (1-based) covers it with probability 1 - 2·P(B <= l-1).
    ``l`` is the largest rank keeping that at or above ``confidence``; for n < 6 no
    rank reaches 95 % and the interval is the full range.
    """
    if n < 1:
        raise ValueError(f"median CI needs at least one sample, got n={n}")
    from scipy.special import bdtr  # ~0.3 s to import: only the commands that need it pay

    alpha = 1.0 - confidence
    # The smallest l with P(B <= l) >= alpha/2 (so P(B <= l-1) < alpha/2): what
    # scipy.stats.binom.ppf returns, by bisection on the binomial CDF, because
    # importing scipy.stats costs ~2.7 s here against ~0.8 s for scipy.special.
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if bdtr(mid, n, 0.5) >= alpha / 2.0:
            hi = mid
        else:
            lo = mid + 1
    low = max(1, lo)
    high = n - low + 1
    return low - 1, high - 1


def split_processes(
    values: Sequence[float] | np.ndarray, process_samples: Sequence[int]
) -> list[Any]:
    """``values`` cut into one run of samples per process (all one process when empty)."""
    if not process_samples:
        return [values]
    if any(k < 1 for k in process_samples) or sum(process_samples) != len(values):
        raise ValueError(
            f"process_samples {list(process_samples)} must be counts >= 1 adding up to the "
            f"{len(values)} samples"
        )
    out, start = [], 0
    for k in process_samples:
        out.append(values[start : start + k])
        start += k
    return out


def process_medians(
    values: Sequence[float] | np.ndarray, process_samples: Sequence[int]
) -> list[float]:
    """The median of each process's run of ``values`` (one median when no counts are given).

    Processes of equal sample counts (every lockstep round, most runs) take one vectorised
    median: ``np.median`` costs ~30 us a call whatever its size, and ``compare`` of a
    20-round ``ab`` asks for 40 a point."""
    counts = set(process_samples)
    if len(counts) == 1 and sum(process_samples) == len(values):
        (per,) = counts
        if per >= 1:
            table = np.asarray(values, dtype=np.float64).reshape(len(process_samples), per)
            return [float(m) for m in np.median(table, axis=1)]
    return [float(np.median(part)) for part in split_processes(values, process_samples)]


def pair_log_ratios(
    base: Sequence[float] | np.ndarray,
    contender: Sequence[float] | np.ndarray,
    base_samples: Sequence[int],
    contender_samples: Sequence[int],
) -> list[float]:
    """Each process pair's log ratio, contender over base: the median over ``i`` of
    ``log(contender_i / base_i)``, for the samples both processes of the pair took (``i``
    below the smaller count).

    Sample *i* of the two sides of a pair were taken side by side, milliseconds apart
    (``ab``'s alternating blocks, ``time``'s interleaved variants), so a slowdown that
    hits both (a neighbour's busy phase, the machine's clock) cancels within each pair of
    samples, where a ratio of the two sides' medians cancels it only as far as the two
    medians fell on the same moments. A side's samples beyond the other's count were
    taken while the other side had finished, and are left out. Pairs process *k* of one
    side with process *k* of the other: the sides need the same number of processes.

    On stored ``ab`` runs of the gate suite (a 2-core VM), this found a clean +10 %
    (whole extra calls) beside a busy neighbour at 166 of 180 points against 152 for
    the ratio of the sides' medians, and identical code's points at p < 0.05 alone at
    4.5 % (3.9 %): BENCHMARKS.md, "``ab`` judged on its pairs of samples"."""
    if len(base_samples) != len(contender_samples):
        raise ValueError(
            f"pairing needs as many processes a side, got {len(base_samples)} and "
            f"{len(contender_samples)}"
        )
    b_parts = split_processes(np.asarray(base, dtype=np.float64), base_samples)
    c_parts = split_processes(np.asarray(contender, dtype=np.float64), contender_samples)
    out = []
    for b, c in zip(b_parts, c_parts, strict=True):
        both = min(len(b), len(c))
        out.append(float(np.median(np.log(c[:both] / b[:both]))))
    return out


def log_spread(medians: Sequence[float]) -> tuple[float, float]:
    """Mean and standard deviation (ddof 1) of ``log(medians)``: >= 2 positive values."""
    logs = np.log(np.asarray(medians, dtype=np.float64))
    return float(logs.mean()), float(logs.std(ddof=1))


@functools.lru_cache(maxsize=4096)
def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student's t critical value: ``P(|T_df| <= t) = confidence`` (kept per
    ``df`` and ``confidence``: the run-to-run term asks it for every point of every run)."""
    from scipy.special import stdtrit  # ~0.3 s to import: only the commands that need it pay

    return float(stdtrit(df, 0.5 + confidence / 2.0))


def process_interval(
    medians: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """The headline of a point measured in ``k >= 2`` processes and its interval, from
    their medians alone: ``centre = exp(mean(log m_j))`` (the geometric mean of the
    process medians) and ``centre * exp(± t(k-1) * s / sqrt(k))``, ``s`` the standard
    deviation of ``log m_j``. One estimator for both, the one the verdict tests
    (:mod:`benchbench.analysis.verdict` compares the means of the log process medians),
    so a headline never sits outside its own interval's logic."""
    if len(medians) < 2 or min(medians) <= 0:
        raise ValueError(f"a process interval needs >= 2 positive medians, got {list(medians)}")
    mean, spread = log_spread(medians)
    half = t_quantile(len(medians) - 1, confidence) * spread / math.sqrt(len(medians))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def process_intervals(
    table: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`process_interval` of each row of ``table`` (points x ``k >= 2`` positive
    process medians) at once: centres, lows and highs (a store's worth of points is read
    this way, ~30x faster than a point at a time)."""
    logs = np.log(np.asarray(table, dtype=np.float64))
    k = logs.shape[1]
    if k < 2:
        raise ValueError(f"a process interval needs >= 2 medians a point, got {k}")
    mean = logs.mean(axis=1)
    half = t_quantile(k - 1, confidence) * logs.std(axis=1, ddof=1) / math.sqrt(k)
    return np.exp(mean), np.exp(mean - half), np.exp(mean + half)


#: Two groups of processes are two modes when the gap between them is wider than this
#: (relative), and than either group's spread.
MODE_GAP = 0.20


def modes(medians: Sequence[float]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The processes of a point split into a faster and a slower group (indices), when
    its medians fall in two modes, else None. The rule, on the log medians sorted: the
    widest gap between neighbours is a split when it is wider than :data:`MODE_GAP`
    (20 %) and wider than the spread (max - min) of the group on either side of it.
    Needs 3 medians. A group of one is an outlier; either way every process stays in
    the statistics: this only names what the interval is made of.

    Judged like a classifier on injected lognormal process medians (4,000 points a row;
    ``tests/unit/test_process_groups.py`` asserts bounds on 2,000):

    ============  ================  ==========================
    between-      note on clean     3 + 2 split 1.5x apart
    process sd    (3 / 5 proc)      named (5 proc)
    ============  ================  ==========================
    2 %           0 / 0             100 %
    5 %           0.3 / 0 %         99.6 %
    10 %          18 / 11 %         65 %
    20 %          63 / 44 %         22 %
    ============  ================  ==========================

    A note, never a decision: at a 10-20 % spread the point is noisy throughout and its
    interval says so whatever the note."""
    if len(medians) < 3 or min(medians) <= 0:
        return None
    logs = np.log(np.asarray(medians, dtype=np.float64))
    ranked = np.argsort(logs, kind="stable")
    ordered = logs[ranked]
    gaps = np.diff(ordered)
    cut = int(np.argmax(gaps)) + 1
    gap = float(gaps[cut - 1])
    low, high = ordered[:cut], ordered[cut:]
    widest = max(float(low[-1] - low[0]), float(high[-1] - high[0]))
    if gap <= math.log1p(MODE_GAP) or gap <= widest:
        return None
    return tuple(int(k) for k in ranked[:cut]), tuple(int(k) for k in ranked[cut:])


@dataclass(frozen=True)
class Stats:
    """Per-call statistics of one point. Build with :meth:`from_samples`.

    ``process_samples`` counts the samples each worker process took, in the order of
    ``per_call_s``; empty means one process.
    """

    per_call_s: tuple[float, ...]
    confidence: float = CONFIDENCE
    process_samples: tuple[int, ...] = ()

    @classmethod
    def from_samples(
        cls,
        samples_s: Sequence[float],
        calls_per_sample: int,
        process_samples: Sequence[int] = (),
    ) -> Stats:
        """Statistics from raw sample times (each the time of ``calls_per_sample`` calls)."""
        if calls_per_sample < 1:
            raise ValueError(f"calls_per_sample must be >= 1, got {calls_per_sample}")
        per_call = tuple(float(s) / calls_per_sample for s in samples_s)
        split_processes(per_call, process_samples)  # validates the counts
        return cls(per_call, process_samples=tuple(int(k) for k in process_samples))

    @property
    def processes(self) -> int:
        """How many worker processes took the samples."""
        return max(1, len(self.process_samples))

    @cached_property
    def process_medians_s(self) -> tuple[float, ...]:
        """The median per-call time of each process, in order."""
        return tuple(process_medians(self.per_call_s, self.process_samples))

    @cached_property
    def _sorted(self) -> np.ndarray:
        if not self.per_call_s:
            raise ValueError("statistics need at least one sample, got none")
        return np.sort(np.asarray(self.per_call_s, dtype=np.float64))

    @property
    def n(self) -> int:
        return len(self.per_call_s)

    @cached_property
    def median_s(self) -> float:
        """The headline: the median of the samples of one process; over several, the
        centre of :func:`process_interval` (the geometric mean of the process medians)."""
        if self.processes >= 2 and min(self.process_medians_s) > 0:
            return process_interval(self.process_medians_s, self.confidence)[0]
        return float(np.median(self._sorted))

    @cached_property
    def mean_s(self) -> float:
        return float(np.mean(self._sorted))

    @property
    def min_s(self) -> float:
        return float(self._sorted[0])

    @property
    def max_s(self) -> float:
        return float(self._sorted[-1])

    @cached_property
    def q1_s(self) -> float:
        return float(np.percentile(self._sorted, 25))

    @cached_property
    def q3_s(self) -> float:
        return float(np.percentile(self._sorted, 75))

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @cached_property
    def stdev_s(self) -> float:
        return float(np.std(self._sorted, ddof=1)) if self.n > 1 else 0.0

    @cached_property
    def _ci(self) -> tuple[float, float]:
        if self.processes >= 2 and min(self.process_medians_s) > 0:
            _centre, low, high = process_interval(self.process_medians_s, self.confidence)
            return low, high
        lo, hi = median_ci_ranks(self.n, self.confidence)
        return float(self._sorted[lo]), float(self._sorted[hi])

    @property
    def ci_low_s(self) -> float:
        return self._ci[0]

    @property
    def ci_high_s(self) -> float:
        return self._ci[1]

    @property
    def rel_ci_half_width(self) -> float:
        """Half the CI width relative to the median: the stopping rule's precision."""
        if self.median_s <= 0:
            return math.inf
        return (self.ci_high_s - self.ci_low_s) / (2.0 * self.median_s)

    @property
    def rel_iqr(self) -> float:
        return self.iqr_s / self.median_s if self.median_s > 0 else math.inf

    #: The statistics written to the store and to ``--json``, in column order
    #: (defined with the other stored columns in :mod:`benchbench.core.columns`).
    fields = STATISTICS + PROCESS_STATISTICS

    def summary(self) -> dict[str, Any]:
        """The :attr:`fields` as a plain dict (the process medians as a list)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in STATISTICS}
        out["process_medians_s"] = list(self.process_medians_s)
        return out
