"""Which x-axis a curve's fit, crossovers and plot are read along, and in which work unit.

A curve's ``size`` is its element count: a good axis for an elementwise op, whose one
dimension grows, and a meaningless one for a ``(m, k, n)`` matmul whose size is the
product of three dimensions (a crossover "at n≈25,301,668" says nothing). The axis of a
curve (:func:`axis_of`) is, in order:

1. the axis its workload declares (``Suite.workload(..., x="k")`` or ``x=1``, stored
   with every point as ``extra.x``);
2. elements, when at most one dimension of the shape varies along the curve;
3. the work per call (FLOPs, bytes or items; :func:`work_unit_of` first), when the
   workload has a work model that grows strictly with the curve's points;
4. none: the curve gets no fit and no crossover, and :attr:`Axis.reason` says why.

:func:`work_unit_of` is the throughput unit of a workload's curves, decided by its work
model alone, never by timings, so a plot's unit is the same run after run: FLOPs when
the workload declares FLOPs and bytes whose ratio (arithmetic intensity) changes with
the size, as a matmul's does; else bytes; else FLOPs; else items.

Pure functions: nothing here reads the store or a clock.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from benchbench.core.units import format_rate

__all__ = ["ELEMENTS", "Axis", "axis_of", "axis_text", "work_unit_of"]

ELEMENTS = "elements"
#: How a position on each work axis reads: ``2.1 GFLOP per call``.
_WORK_SYMBOLS = {"bytes": "B", "flop": "FLOP", "items": "items"}
# Intensity (FLOP per byte) varying by more than this along the points: compute-bound.
_INTENSITY_SPREAD = 1.01


class _Point(Protocol):  # benchbench.analysis.curves.CurvePoint, read only
    @property
    def size(self) -> int: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def x_name(self) -> str | None: ...
    @property
    def x(self) -> float | None: ...
    @property
    def bytes_per_call(self) -> float | None: ...
    @property
    def flop_per_call(self) -> float | None: ...
    def work(self, unit: str) -> float | None: ...


class Curve(Protocol):  # benchbench.analysis.curves.Curve, read only
    @property
    def points(self) -> Sequence[_Point]: ...
    @property
    def sizes(self) -> list[int]: ...


@dataclass(frozen=True)
class Axis:
    """A curve's x-axis: ``name`` (``elements``, ``bytes``, ``flop``, ``items`` or the
    declared one, e.g. ``k``) and one strictly increasing value per point; ``reason``
    (and no values) when the curve has no meaningful axis."""

    name: str | None
    values: tuple[float, ...] = ()
    reason: str | None = None


def work_unit_of(curves: Sequence[Curve]) -> str | None:
    """The work unit the throughput of ``curves`` is shown in (module docstring)."""
    points = [p for c in curves for p in c.points]
    if not points:
        return None
    declared = [u for u in ("bytes", "flop", "items") if all((p.work(u) or 0) > 0 for p in points)]
    if {"bytes", "flop"} <= set(declared):
        ratios = [(p.flop_per_call or 0.0) / (p.bytes_per_call or 1.0) for p in points]
        if max(ratios) > min(ratios) * _INTENSITY_SPREAD:
            return "flop"
    return next((u for u in ("bytes", "flop", "items") if u in declared), None)


def _increasing(values: Sequence[float]) -> bool:
    return all(b > a for a, b in itertools.pairwise(values))


def _varying_dims(curve: Curve) -> list[int]:
    shapes = [p.shape for p in curve.points if p.shape]
    if len(shapes) < len(curve.points) or len({len(s) for s in shapes}) > 1:
        return []  # no or mixed shapes: the size is all we know
    return [d for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1]


def axis_of(curve: Curve) -> Axis:
    """The x-axis of ``curve`` (module docstring for the order of choice)."""
    named = {p.x_name for p in curve.points}
    if len(named) == 1 and None not in named:
        values = [p.x or 0.0 for p in curve.points]
        if _increasing(values) and values[0] > 0:
            return Axis(named.pop(), tuple(values))
    dims = _varying_dims(curve)
    if len(dims) <= 1:
        return Axis(ELEMENTS, tuple(float(s) for s in curve.sizes))
    preferred = work_unit_of([curve])
    for unit in dict.fromkeys([u for u in (preferred, "flop", "bytes", "items") if u]):
        values = [p.work(unit) or 0.0 for p in curve.points]
        if values[0] > 0 and _increasing(values):
            return Axis(unit, tuple(values))
    names = " x ".join(f"dim{d}" for d in dims)
    return Axis(
        None,
        reason=f"no fit or crossover: the size is a product of varying dimensions ({names}) "
        "and no work model grows with it; declare the x-axis (Suite.workload(..., x=...))",
    )


def axis_text(name: str, value: float) -> str:
    """A position on an axis: ``n≈1,024 (2^10.0)``, ``2.15 GFLOP per call``, ``k≈512``."""
    if name == ELEMENTS:
        return f"n≈{round(value):,} (2^{math.log2(value):.1f})"
    if name in _WORK_SYMBOLS:
        return format_rate(value, _WORK_SYMBOLS[name]) + " per call"
    return f"{name}≈{value:,.4g}"
