"""Fixed-overhead plus asymptotic-rate model of a time-versus-work curve.

Every benchmark curve is summarised by ``time_s = t0_s + work / rate_per_s``: ``t0_s`` is
the fixed cost of one call (dispatch, launch, allocation) and ``rate_per_s`` the rate the
operator reaches once the work (bytes, FLOPs or items per call) is large enough to hide it.

The fit is done in *relative* terms: our median times span six orders of magnitude (2 µs
for a 4 KiB op, 2 s for a 4096² float64 matmul), so an absolute least-squares fit would
be decided by the largest sizes alone and would report ``t0_s`` to within the noise of
the biggest point. The residual of each point is ``log(model / measured)``, which for
small errors equals the relative error and weighs a 5 % miss the same at every size. A
``soft_l1`` loss whose scale is 5 % keeps one disturbed point (a preempted sample on
our shared machine is often 2x slow) from bending the curve.

Where two such curves cross (measured, or where two fits predict equal times) is
:mod:`benchbench.analysis.crossover`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from benchbench.core.errors import MeasurementError

__all__ = ["Fit", "fit_curve"]

# Scale of the robust loss, in log-ratio units: residuals under ~5 % count quadratically,
# larger ones linearly, so a 2x-slow outlier weighs ~14x less than in plain least squares.
_LOSS_SCALE = 0.05
_MIN_POINTS = 3


@dataclass(frozen=True)
class Fit:
    """A fitted ``time_s = t0_s + work / rate_per_s`` curve.

    ``rate_per_s`` is in ``work_unit`` per second (bytes/s, flop/s, items/s); it is
    ``math.inf`` when the time does not grow with the work over the measured sizes
    (the curve is all overhead). ``r2`` is the weighted coefficient of determination of
    ``log(time_s)`` (1 is a perfect fit; the fit is relative, so goodness is judged in
    log space too) and ``rel_rms`` the weighted root-mean-square relative residual.
    """

    t0_s: float
    rate_per_s: float
    r2: float
    n_points: int
    work_unit: str
    rel_rms: float = 0.0

    def predict(self, work: ArrayLike) -> NDArray[np.float64]:
        """Predicted time in seconds for ``work`` (a number or an array of them)."""
        w = np.asarray(work, dtype=np.float64)
        return np.asarray(self.t0_s + w / self.rate_per_s, dtype=np.float64)


def _validated(
    work: ArrayLike, time_s: ArrayLike, weights: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    w = np.asarray(work, dtype=np.float64).ravel()
    t = np.asarray(time_s, dtype=np.float64).ravel()
    if w.shape != t.shape:
        raise MeasurementError(
            f"fit: work and time_s must have the same length, got {w.size} and {t.size}"
        )
    wt = np.ones_like(t) if weights is None else np.asarray(weights, np.float64).ravel()
    if wt.shape != t.shape:
        raise MeasurementError(
            f"fit: weights must have one entry per point ({t.size}), got {wt.size}"
        )
    if w.size < _MIN_POINTS:
        raise MeasurementError(
            f"fit: need at least {_MIN_POINTS} points to fit t0 + work/rate, got {w.size}; "
            "measure more sizes"
        )
    for name, arr in (("work", w), ("time_s", t)):
        bad = arr[~(np.isfinite(arr) & (arr > 0))]
        if bad.size:
            raise MeasurementError(
                f"fit: {name} must be finite and > 0, got {bad[0]!r}; "
                "drop failed or skipped points before fitting"
            )
    if not np.all(np.isfinite(wt) & (wt >= 0)) or np.count_nonzero(wt) < _MIN_POINTS:
        raise MeasurementError(
            f"fit: weights must be finite, >= 0, with at least {_MIN_POINTS} positive, "
            f"got {wt.tolist()}"
        )
    if np.unique(w[wt > 0]).size < 2:
        raise MeasurementError(
            f"fit: all points have the same work ({w[0]:g}); a rate needs at least two "
            "different sizes"
        )
    return w, t, wt


def fit_curve(
    work: ArrayLike,
    time_s: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    work_unit: str = "bytes",
) -> Fit:
    """Fit ``time_s = t0_s + work / rate_per_s`` robustly, in relative terms.

    ``work`` is the work per call at each point (bytes, FLOPs or items, named by
    ``work_unit``), ``time_s`` the median time per call, ``weights`` optional
    non-negative weights (e.g. the inverse of each point's relative spread).
    Constraints: ``t0_s >= 0`` and ``rate_per_s > 0``.

    Raises :class:`~benchbench.core.errors.MeasurementError` for inputs that cannot support a
    fit: fewer than 3 points, a single distinct size, non-positive or non-finite work or
    time, lengths that disagree.
    """
    # scipy.optimize takes ~0.7 s to import: `show` and `compare` of points without a
    # size axis never fit, and should not pay it.
    from scipy.optimize import least_squares, nnls

    w, t, wt = _validated(work, time_s, weights)
    sw = np.sqrt(wt)
    # Scale the unknowns to order 1 so the solver's steps are balanced: t0 in units of the
    # fastest time, seconds-per-unit-work in units of the median time/work.
    t_scale = float(t.min())
    c_scale = float(np.median(t / w))
    # Start from the weighted linear least squares of the relative error, which is
    # linear in (t0, c): (t0 + c*w)/t = 1, solved with non-negativity by NNLS.
    design = np.column_stack([t_scale / t, c_scale * w / t]) * sw[:, None]
    x0, _ = nnls(design, sw)
    x0 = np.maximum(x0, 1e-9)

    def residuals(x: NDArray[np.float64]) -> NDArray[np.float64]:
        model = x[0] * t_scale + x[1] * c_scale * w
        return np.asarray(sw * np.log(np.maximum(model, 1e-300) / t), dtype=np.float64)

    result = least_squares(
        residuals, x0, bounds=([0.0, 0.0], [np.inf, np.inf]), loss="soft_l1", f_scale=_LOSS_SCALE
    )
    t0 = float(result.x[0] * t_scale)
    c = float(result.x[1] * c_scale)
    rate = 1.0 / c if c > 0 else math.inf
    log_res = np.log((t0 + c * w) / t)
    logt = np.log(t)
    mean = np.average(logt, weights=wt)
    ss_res = float(np.sum(wt * log_res**2))
    ss_tot = float(np.sum(wt * (logt - mean) ** 2))
    # Every time equal (ss_tot == 0): the fit is perfect if the model is flat too.
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float(ss_res < 1e-12)
    rel_rms = math.sqrt(float(np.sum(wt * np.expm1(log_res) ** 2)) / float(np.sum(wt)))
    return Fit(
        t0_s=t0, rate_per_s=rate, r2=r2, n_points=int(w.size), work_unit=work_unit, rel_rms=rel_rms
    )
