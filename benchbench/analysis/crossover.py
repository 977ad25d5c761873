"""The one crossover: the size at which one side overtakes the other.

Two notions, one definition each:

- :func:`crossings` — **measured**: where the sign of ``log(ratio)`` flips between two
  sizes at which the comparison is *decisive*, interpolated in log-log. ``benchbench
  time`` and :func:`benchbench.compare_variants` call a size decisive when the verdict
  there is ``faster`` or ``slower`` (:mod:`benchbench.analysis.verdict`); the curves of
  ``show`` and ``plot``, which have medians and no pairing, when the ratio is beyond the
  verdict's minimum effect (:func:`benchbench.analysis.verdict.decisive`). Views show
  this one: it is what was observed, with no model assumption.
- :func:`model_crossover` — **modelled**: where two fitted ``t0 + work / rate`` lines
  (:mod:`benchbench.analysis.fit`) predict equal times, within the measured range. It
  exists also when the curves were measured at different sizes; it is trustworthy where
  both fits have ``r2`` close to 1. The dashboard draws it on its model lines.

How the measured crossing is placed. Decisive sizes anchor the flip: between two
consecutive decisive sizes whose ratios lie on opposite sides of 1, the crossing is at
the first sign change of ``log(ratio)`` among the *adjacent* measured sizes from one
anchor to the other, interpolated linearly in ``log(size)``; a size where the ratio is
exactly 1 is itself the crossing. Earlier code did this two ways: the ``time`` table
interpolated between adjacent sizes (as here), the curves between the two decisive
sizes only. Adjacent sizes are kept because the sizes that are not decisive are the
ones where the ratio is near 1, i.e. where the crossing is: on 2x-spaced sizes they
place it within one octave, where the decisive anchors alone can be several octaves
apart. Decisiveness only decides *whether* there is a crossing, so two equal variants
whose medians wobble by 2 % around each other never "cross".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchbench.core.errors import MeasurementError

if TYPE_CHECKING:  # only its fields are read: fit.py loads scipy.optimize (~1 s), which
    # `benchbench time`'s rows, that use crossings and not fits, have no need of.
    from benchbench.analysis.fit import Fit

__all__ = ["Crossing", "crossings", "model_crossover"]


@dataclass(frozen=True)
class Crossing:
    """One measured crossing: ``size`` interpolated, ``below`` -1 when the ratio is under
    1 at the smaller sizes (+1 when over), ``between`` the decisive sizes around it."""

    size: float
    below: int
    between: tuple[float, float]

    @property
    def above(self) -> int:
        return -self.below


def crossings(
    sizes: Sequence[float], ratios: Sequence[float], decisive: Sequence[bool] | None = None
) -> list[Crossing]:
    """Every size at which ``ratios`` (one per size, e.g. ``time_b / time_a``) cross 1.

    ``decisive[i]`` says whether the comparison at ``sizes[i]`` counts as an anchor
    (default: every size does); see the module docstring for the method. Sizes may come
    in any order; each must appear once. Raises :class:`MeasurementError` for sizes or
    ratios that are not finite and > 0, repeated sizes or lengths that disagree.
    """
    flags = [True] * len(sizes) if decisive is None else list(decisive)
    if not len(sizes) == len(ratios) == len(flags):
        raise MeasurementError(
            f"crossings: sizes, ratios and decisive must have one entry per size, got "
            f"{len(sizes)}, {len(ratios)} and {len(flags)}"
        )
    for name, values in (("sizes", sizes), ("ratios", ratios)):
        bad = [v for v in values if not (math.isfinite(v) and v > 0)]
        if bad:
            raise MeasurementError(
                f"crossings: {name} must be finite and > 0, got {bad[0]!r}; "
                "drop failed or skipped points first"
            )
    if len(set(sizes)) != len(sizes):
        raise MeasurementError(f"crossings: each size must appear once, got {list(sizes)}")
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    xs = [math.log(sizes[i]) for i in order]
    ys = [math.log(ratios[i]) for i in order]
    anchors = [k for k, i in enumerate(order) if flags[i] and ys[k] != 0.0]
    found: list[Crossing] = []
    for a, b in itertools.pairwise(anchors):
        if (ys[a] < 0.0) == (ys[b] < 0.0):
            continue
        for k in range(a, b):
            if ys[k] == 0.0 or (ys[k] < 0.0) != (ys[k + 1] < 0.0):
                t = ys[k] / (ys[k] - ys[k + 1]) if ys[k] != 0.0 else 0.0
                size = math.exp(xs[k] + t * (xs[k + 1] - xs[k]))
                below = -1 if ys[a] < 0.0 else 1
                found.append(Crossing(size, below, (sizes[order[a]], sizes[order[b]])))
                break
    return found


def model_crossover(fit_a: Fit, fit_b: Fit, work_range: tuple[float, float]) -> float | None:
    """Work at which the models of curves ``a`` and ``b`` predict equal times.

    Two lines ``t0 + work/rate`` cross at most once:
    ``work = (t0_b - t0_a) / (1/rate_a - 1/rate_b)``. Returns that work if it lies within
    ``work_range`` (inclusive; beyond it the models extrapolate), else ``None``; also
    ``None`` when the lines are parallel (same rate). Beyond the crossing the curve with
    the higher rate is faster. Raises :class:`MeasurementError` for fits in different
    work units or an empty range.
    """
    if fit_a.work_unit != fit_b.work_unit:
        raise MeasurementError(
            f"crossover: fits are in different work units ({fit_a.work_unit!r} vs "
            f"{fit_b.work_unit!r}); compare curves of the same work model"
        )
    lo, hi = work_range
    if not (0 <= lo <= hi and math.isfinite(hi)):
        raise MeasurementError(
            f"crossover: work_range must be finite with 0 <= low <= high, got {work_range!r}"
        )
    slope = 1.0 / fit_a.rate_per_s - 1.0 / fit_b.rate_per_s
    if slope == 0.0:
        return None
    work = (fit_b.t0_s - fit_a.t0_s) / slope
    return work if lo <= work <= hi else None
