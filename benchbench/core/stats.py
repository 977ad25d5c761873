"""Statistics of a benchmark point, derived from its raw samples.

Times are per call, in seconds. The headline is the median of all samples.

**One process.** The median's confidence interval is distribution-free (order
statistics of a Binomial(n, 1/2)), so it holds for the skewed, heavy-tailed timing
distributions a shared machine produces, where a mean ± t·s interval does not. It
treats the samples as independent, which they are not across processes: a process
carries its own offset (heap layout, page mapping, frequency), shared by all of its
samples.

**Several processes** (``process_samples``: a point measured in rounds, each in a
fresh worker). The interval comes from a model of process medians, the two-level
method of Kalibera & Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013):
the per-process medians ``m_1 .. m_k`` are independent draws (each from a fresh
process), their logs roughly normal, so the standard error of the log location is
``s / sqrt(k)`` with ``s`` the standard deviation of ``log m_j``, and the interval is
``median * exp(± t(k-1) * s / sqrt(k))`` (Student's t, ``k - 1`` degrees of freedom),
widened to the single-level interval where that is wider (processes that agree
exactly still have within-process noise). With 3 processes, t is 4.30: the interval
is honest about how little three processes say, and narrows as rounds are added.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
from scipy.special import bdtr, stdtrit

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


def log_spread(medians: Sequence[float]) -> tuple[float, float]:
    """Mean and standard deviation (ddof 1) of ``log(medians)``: >= 2 positive values."""
    logs = np.log(np.asarray(medians, dtype=np.float64))
    return float(logs.mean()), float(logs.std(ddof=1))


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student's t critical value: ``P(|T_df| <= t) = confidence``."""
    return float(stdtrit(df, 0.5 + confidence / 2.0))


#: A process is wild when its median is further than this factor from the median of the
#: processes' medians ...
WILD_RATIO = 1.3
#: ... and further than this many scaled MADs (1.4826 x the median absolute deviation of
#: the log medians: sigma for normal logs), so a point whose processes all spread widely
#: keeps them all (its interval is wide, honestly).
WILD_MADS = 3.0


def wild_processes(medians: Sequence[float]) -> tuple[int, ...]:
    """Indices of the processes whose median lies far outside the others' (a
    process-level event: a descheduled thread, a page-cache storm), by a robust rule on
    the log medians: further than :data:`WILD_RATIO` from their median and than
    :data:`WILD_MADS` scaled MADs. Needs 3 medians (nothing is wild among two).

    Judged like a classifier on injected lognormal process medians, 5,000 points per
    row (``tests/unit/test_wild.py`` asserts the bounds on 2,000):

    ============  ===========  ================  ==================
    between-      false alarm  one process 2x    one process 1.5x
    process sd    (3 / 4 proc) found (3 / 4)     found (3 / 4)
    ============  ===========  ================  ==================
    2 %           0 / 0        100 % / 100 %     100 % / 100 %
    5 %           0 / 0        95 % / 100 %      73 % / 92 %
    10 %          2.8 / 2.2 %  67 % / 86 %       41 % / 48 %
    20 %          17 / 15 %    37 % / 41 %       20 % / 19 %
    ============  ===========  ================  ==================

    With one thread, processes agree within 1-5 % on the 2-core EPYC: there the rule
    never fires on clean data and finds a 2x process nearly always; a 1000x one is found at any
    spread here. At 20 % the point is noisy throughout and a false alarm costs a retake
    only: the runner drops a wild process only when at least three others agree.
    """
    if len(medians) < 3 or min(medians) <= 0:
        return ()
    logs = np.log(np.asarray(medians, dtype=np.float64))
    deviations = np.abs(logs - np.median(logs))
    mad = 1.4826 * float(np.median(deviations))
    limit = max(math.log(WILD_RATIO), WILD_MADS * mad)
    return tuple(int(k) for k in np.flatnonzero(deviations > limit))


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
        parts = split_processes(self.per_call_s, self.process_samples)
        return tuple(float(np.median(part)) for part in parts)

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
        lo, hi = median_ci_ranks(self.n, self.confidence)
        low, high = float(self._sorted[lo]), float(self._sorted[hi])
        if self.processes < 2:
            return low, high
        k = len(self.process_medians_s)
        _mean, spread = log_spread(self.process_medians_s)
        half = t_quantile(k - 1, self.confidence) * spread / math.sqrt(k)
        return min(low, self.median_s * math.exp(-half)), max(high, self.median_s * math.exp(half))

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
