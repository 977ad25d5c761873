"""E-divisive means with a t-test: the split and merge steps of change point detection.

The machinery behind :func:`benchbench.analysis.changepoint.analyze` (whose docstring
explains the method, after Hunter / Apache Otava and Matteson and James): :func:`split`
finds weak change points window by window with the energy statistic, :func:`merge`
drops the weakest until every one left is significant and large enough, both testing
with :class:`TTest`. Pure functions over a NumPy array of positive values (NaN already
removed); indexes are positions in that array.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

# Below this relative spread two sides are "exactly" equal: averaging seven copies of
# 0.1 is off by one ulp (~1e-17), which must not read as an infinitely significant step.
_EXACT_REL = 1e-12


class TTest:
    """Two-sided Student t-test (pooled variance) between adjacent ranges of ``y``.

    Prefix sums make each test O(1): the split and merge steps run about 20 tests per
    100 points, and ``numpy.mean`` costs ~5 us a call. Values are centred on their
    median first so that the sums of squares do not cancel (y ~ 1, variance ~ 4e-4).
    """

    def __init__(self, y: FloatArray) -> None:
        self.centre = float(np.median(y))
        z = y - self.centre
        self.s1 = np.concatenate(([0.0], np.cumsum(z)))
        self.s2 = np.concatenate(([0.0], np.cumsum(z * z)))

    def p_value(self, a: int, k: int, b: int) -> float:
        """p-value of "``y[a:k]`` and ``y[k:b]`` have the same mean"."""
        from scipy.special import stdtr  # ~0.3 s to import: `regressions` alone pays it

        n1, n2 = k - a, b - k
        df = n1 + n2 - 2
        if n1 <= 0 or n2 <= 0 or df <= 0:
            return 1.0
        sum1, sum2 = self.s1[k] - self.s1[a], self.s1[b] - self.s1[k]
        m1, m2 = sum1 / n1, sum2 / n2
        ss = (self.s2[k] - self.s2[a] - sum1 * m1) + (self.s2[b] - self.s2[k] - sum2 * m2)
        scale = abs(self.centre) + abs(m1) + abs(m2)
        if abs(m2 - m1) <= _EXACT_REL * scale:
            return 1.0
        var = max(ss, 0.0) / df
        if var <= (_EXACT_REL * scale) ** 2:
            return 0.0
        t = abs(m2 - m1) / math.sqrt(var * (1.0 / n1 + 1.0 / n2))
        return float(2.0 * stdtr(df, -t))


def _distance_prefix(x: FloatArray) -> FloatArray:
    """2-D prefix sums of |x_i - x_j|: every within/cross sum of a range is then O(1)."""
    c = np.zeros((x.size + 1, x.size + 1))
    c[1:, 1:] = np.abs(x[:, None] - x[None, :]).cumsum(axis=0).cumsum(axis=1)
    return c


@functools.lru_cache(maxsize=256)
def _energy_coefficients(
    m: int, min_size: int
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Weights of Q(tau, kappa) for a range of ``m`` points; they depend on sizes only.

    Rows are tau = min_size .. m - min_size (left size n = tau), columns kappa =
    2 min_size .. m (right size r = kappa - tau). Returns (A + C, A, B, C / 2, mask)
    with A = 2/(n+r), B = 2r/((n+r)(n-1)), C = 2n/((n+r)(r-1)) and mask 0 where
    r >= min_size, -inf elsewhere. Cached because every window asks for the same
    sizes: this halves the work of a split search.
    """
    n = np.arange(min_size, m - min_size + 1, dtype=np.float64)[:, None]
    kappa = np.arange(2 * min_size, m + 1, dtype=np.float64)[None, :]
    r = kappa - n
    valid = r >= min_size
    r_safe = np.where(valid, r, 2.0)
    a = 2.0 / kappa
    b = np.where(valid, 2.0 * r_safe / (kappa * (n - 1.0)), 0.0)
    c = np.where(valid, 2.0 * n / (kappa * (r_safe - 1.0)), 0.0)
    mask = np.where(valid, 0.0, -np.inf)
    for array in (a, b, c, mask):
        array.flags.writeable = False
    return np.where(valid, a + c, 0.0), a, b, c / 2.0, mask


def _best_split(c: FloatArray, a: int, b: int, min_size: int) -> tuple[int, float] | None:
    """E-divisive candidate in ``[a, b)`` of the prefix ``c``: (split index, energy Q).

    The sums of Q are rectangles of the 2-D prefix ``c`` of distances, with t = tau
    and k = kappa: cross = c[t,k] - c[a,k] - c[t,t] + c[a,t], within-left =
    (c[t,t] - 2 c[a,t] + c[a,a]) / 2, within-right = (c[k,k] - 2 c[t,k] + c[t,t]) / 2,
    and Q = A cross - B within-left - C within-right.
    """
    m = b - a
    if m < 2 * min_size:
        return None
    a_plus_c, a_row, b_full, c_half, mask = _energy_coefficients(m, min_size)
    t0, t1, k0 = a + min_size, b - min_size + 1, a + 2 * min_size
    diag = np.diagonal(c)
    c_tk = c[t0:t1, k0 : b + 1]
    c_tt = diag[t0:t1][:, None]
    c_at = c[a, t0:t1][:, None]
    c_ak = c[a, k0 : b + 1][None, :]
    c_kk = diag[k0 : b + 1][None, :]
    within_left = (c_tt - 2.0 * c_at + c[a, a]) / 2.0
    q = (
        a_plus_c * c_tk
        - a_row * c_ak
        + a_row * (c_at - c_tt)
        - b_full * within_left
        - c_half * (c_kk + c_tt)
        + mask
    )
    i, j = np.unravel_index(int(np.argmax(q)), q.shape)
    return t0 + int(i), float(q[i, j])


def _edivisive(
    y: FloatArray, test: TTest, lo: int, hi: int, max_p: float, min_size: int
) -> list[int]:
    """Significant E-divisive split points of ``y[lo:hi]``, as absolute indexes."""
    c = _distance_prefix(y[lo:hi])
    cuts = [0, hi - lo]
    candidates: dict[tuple[int, int], tuple[int, float] | None] = {}
    while True:
        best: tuple[float, int, int, int] | None = None
        for a, b in itertools.pairwise(cuts):
            if (a, b) not in candidates:
                candidates[a, b] = _best_split(c, a, b, min_size)
            found = candidates[a, b]
            if found is not None and (best is None or found[1] > best[0]):
                best = (found[1], found[0], a, b)
        if best is None:
            break
        _, k, a, b = best
        if test.p_value(lo + a, lo + k, lo + b) >= max_p:
            break
        cuts.insert(cuts.index(b), k)
    return [lo + k for k in cuts[1:-1]]


def split(y: FloatArray, test: TTest, window: int, max_p: float, min_size: int) -> list[int]:
    """Hunter's split step: union of weak change points over half-overlapping windows."""
    weak: set[int] = set()
    start, step = 0, window // 2
    while start < y.size:
        end = min(start + window, y.size)
        found = _edivisive(y, test, start, end, max_p, min_size)
        weak.update(found)
        start = max(found[-1] if found else 0, start + step)
    return sorted(weak)


def merge(
    y: FloatArray, test: TTest, weak: list[int], p_threshold: float, min_effect: float
) -> dict[int, tuple[float, float, float]]:
    """Hunter's merge step; returns {index: (median before, median after, p)}."""
    cps = list(weak)
    values = y.tolist()  # statistics.median of a list slice: a tenth of numpy.median's cost

    def stats(i: int) -> tuple[float, float, float]:
        a = cps[i - 1] if i > 0 else 0
        b = cps[i + 1] if i + 1 < len(cps) else y.size
        before = statistics.median(values[a : cps[i]])
        after = statistics.median(values[cps[i] : b])
        return before, after, test.p_value(a, cps[i], b)

    found = [stats(i) for i in range(len(cps))]
    while cps:
        p = [s[2] for s in found]
        effect = [abs(s[1] / s[0] - 1.0) for s in found]
        weakest = int(np.argmax(p))
        if p[weakest] < p_threshold:
            weakest = int(np.argmin(effect))
            if effect[weakest] >= min_effect:
                break
        del cps[weakest], found[weakest]
        for i in (weakest - 1, weakest):
            if 0 <= i < len(cps):
                found[i] = stats(i)
    return dict(zip(cps, found, strict=True))
