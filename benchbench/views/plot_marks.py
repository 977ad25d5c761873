"""What :mod:`benchbench.views.plot` writes on its axes: tick labels and crossover notes.

Tick labels read without exponents (``0.5``, ``20``, ``4000``). A log axis spanning
less than a decade has at most one power of ten in view, so it gets evenly spaced plain
ticks instead (:class:`FewDecadesLocator`): every panel shows more than one y tick.

Crossover notes name their dtype and where the curves cross (``crossover (float32) at
n≈4,096 (2^12.0): numpy.sqrt overtakes torch.sqrt``) and are placed in axes
coordinates, inside the axes, on the side away from the crossing: never over the axis
titles below and left of the axes, nor over the crossing itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

from benchbench.analysis.axes import Axis, axis_text
from benchbench.analysis.curves import Analysis, Curve, CurveKey

__all__ = ["FewDecadesLocator", "draw_crossovers", "plain", "plain_y"]

_MAX_CROSSOVER_NOTES = 4


def plain(value: float, _pos: object = None) -> str:
    """``0.5``, ``20``, ``4000``: tick labels a reader reads without exponents."""
    return f"{value:g}" if 1e-3 <= value < 1e5 else f"{value:.3g}"


def _plain_minor(value: float, _pos: object = None) -> str:
    # Label the 2s and 5s between decades only: all nine minor ticks collide.
    lead = round(value / 10 ** math.floor(math.log10(value) + 1e-9), 6) if value > 0 else 0
    return plain(value) if lead in (2, 5) else ""


def _decades(vmin: float, vmax: float) -> float:
    lo, hi = sorted((vmin, vmax))
    return math.log10(hi / lo) if lo > 0 else math.inf


class FewDecadesLocator(LogLocator):
    """A log locator that, below one decade in view, places 3-6 evenly spaced plain
    ticks (majors) or none (minors), so that a narrow panel still reads."""

    def __init__(self, *, minor: bool = False) -> None:
        super().__init__(base=10.0, subs="auto" if minor else (1.0,))
        self._minor = minor

    def tick_values(self, vmin: float, vmax: float) -> Any:
        if _decades(vmin, vmax) < 1:
            if self._minor:
                return np.array([])
            lo, hi = sorted((vmin, vmax))
            ticks = np.asarray(
                MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi), dtype=float
            )
            return ticks[ticks > 0]
        return super().tick_values(vmin, vmax)


def plain_y(axis: Any) -> None:
    """Plain tick labels on a log y-axis, more than one in view at any span."""
    axis.set_major_locator(FewDecadesLocator())
    axis.set_minor_locator(FewDecadesLocator(minor=True))
    axis.set_major_formatter(FuncFormatter(plain))
    axis.set_minor_formatter(FuncFormatter(_plain_minor))


def _note_place(ax: Axes, x: float, y: float, index: int) -> tuple[float, float, str, str]:
    """Where a note about the crossing at data ``(x, y)`` goes, in axes fraction:
    the opposite half, stacked by ``index``, aligned so the text stays inside."""
    fx, fy = ax.transLimits.transform(ax.transScale.transform((x, y)))
    right = fx > 0.5
    top = fy <= 0.5
    nx = 0.97 if right else 0.03
    ny = 0.97 - 0.16 * index if top else 0.03 + 0.16 * index
    return nx, ny, "right" if right else "left", "top" if top else "bottom"


def draw_crossovers(
    ax: Axes,
    curves: Sequence[Curve],
    analysis: Analysis,
    axes_of: Mapping[CurveKey, Axis],
    xs_of: Mapping[CurveKey, np.ndarray],
    ys_of: Mapping[CurveKey, np.ndarray],
) -> None:
    """Mark the crossovers among ``curves`` and write one note per nearby group."""
    keys = {c.key for c in curves}
    notes: list[tuple[float, float, list[str]]] = []
    for crossing in [x for x in analysis.crossovers if x.a in keys and x.b in keys]:
        key = crossing.a
        along = np.log(np.asarray(axes_of[key].values, dtype=float))
        logx = np.interp(math.log(crossing.size), along, np.log(xs_of[key]))
        logy = float(np.interp(logx, np.log(xs_of[key]), np.log(ys_of[key])))
        winner = getattr(crossing.faster_above, crossing.differs)
        loser = getattr(crossing.faster_below, crossing.differs)
        text = (
            f"crossover ({key.dtype}) at {axis_text(crossing.axis, crossing.size)}: "
            f"{winner} overtakes {loser}"
        )
        # Crossings within ~25 % of each other in x and y share one note: two notes there
        # were seen printed on top of each other.
        near = next(
            (
                n
                for n in notes
                if abs(math.log(n[0]) - logx) < 0.25 and abs(math.log(n[1]) - logy) < 0.25
            ),
            None,
        )
        if near is not None:
            near[2].append(text)
        elif len(notes) < _MAX_CROSSOVER_NOTES:
            notes.append((math.exp(logx), math.exp(logy), [text]))
    ax.get_xlim(), ax.get_ylim()  # settle autoscaling: the notes are placed by the limits
    for index, (x, y, texts) in enumerate(notes):
        ax.plot([x], [y], marker="X", markersize=9, color="black", linestyle="none", zorder=5)
        nx, ny, ha, va = _note_place(ax, x, y, index)
        note = ax.annotate(
            "\n".join(texts),
            (x, y),
            xytext=(nx, ny),
            textcoords="axes fraction",
            ha=ha,
            va=va,
            fontsize=7,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.85, "linewidth": 0},
            arrowprops={"arrowstyle": "-", "color": "0.3", "linewidth": 0.8},
            zorder=6,
        )
        note.set_gid("crossover")
