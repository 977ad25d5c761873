"""Stored measurements as curves (time versus size), their model fits and crossovers.

A **curve** is every measured size of one (suite, workload, variant, device, dtype,
params, environment, run): the rows :meth:`benchbench.store.Store.measurements` returns,
tagged with their run by :func:`with_run`. Each curve gets the robust fit
``time_s = t0_s + work / rate`` of :func:`benchbench.analysis.fit.fit_curve`, where the work is
the one of the work model's bytes, FLOPs or items per call that the time is most linear
in (highest R²; ties go to bytes, then FLOPs): an elementwise op's bytes and FLOPs are
proportional and fit alike, a matmul's time follows its n³ FLOPs, not its n² bytes.

Fits and crossovers are read along the curve's x-axis
(:func:`benchbench.analysis.axes.axis_of`): elements for a one-dimensional size, the
axis the workload declares, else its work per call; a curve whose size is a product of
several varying dimensions with none of these gets neither, and says why.

A **crossover** is a position on that axis at which two curves of the same workload,
dtype and params that differ only in their variant, or only in their device, swap order. It is found
on the measured medians by :func:`benchbench.analysis.crossover.crossings`, anchored on the
sizes where the two differ by at least the verdict's minimum effect (5 %,
:func:`benchbench.analysis.verdict.decisive`): below it the order is noise, and on our
shared machine two equal variants would otherwise "cross" at random. The model
crossover (where the two fits predict equal times,
:func:`benchbench.analysis.crossover.model_crossover`) is given beside it when both fits
use the same work unit.

Pure functions: nothing here reads the store or a clock.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from benchbench.analysis.axes import ELEMENTS, Axis, axis_of
from benchbench.analysis.crossover import crossings, model_crossover
from benchbench.analysis.fit import Fit, fit_curve
from benchbench.analysis.verdict import MIN_EFFECT, decisive
from benchbench.core.errors import MeasurementError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "WORK_UNITS",
    "Analysis",
    "Crossover",
    "Curve",
    "CurveFit",
    "CurveKey",
    "analyze",
    "crossovers_frame",
    "curves_from_rows",
    "fit_run",
    "with_run",
]

#: Work-model column per work unit, in order of preference on equal goodness of fit.
WORK_UNITS = {"bytes": "bytes_per_call", "flop": "flop_per_call", "items": "items_per_call"}
_R2_TIE = 1e-6
_MIN_SIZES = 3


@dataclass(frozen=True)
class CurveKey:
    """What one curve is of. ``params`` is the canonical JSON of the point's named axes."""

    suite: str
    workload: str
    variant: str
    device: str
    dtype: str
    params: str = "{}"
    environment_id: str | None = None
    run_id: str | None = None

    def differs_only_in(self, other: CurveKey) -> str | None:
        """``"variant"`` or ``"device"`` when that is the one field the keys differ in."""
        for name in ("variant", "device"):
            if (
                getattr(self, name) != getattr(other, name)
                and replace(self, **{name: getattr(other, name)}) == other
            ):
                return name
        return None


@dataclass(frozen=True)
class CurvePoint:
    """One measured size of a curve: its median and quartile times per call and work,
    its shape and its declared x-axis value (``x_name``, ``x``; None when undeclared)."""

    size: int
    median_s: float
    q1_s: float
    q3_s: float
    bytes_per_call: float | None
    flop_per_call: float | None
    items_per_call: float | None
    shape: tuple[int, ...] = ()
    x_name: str | None = None
    x: float | None = None

    def work(self, unit: str) -> float | None:
        """Work per call in ``unit`` (``bytes``, ``flop``, ``items``), None without a model."""
        value: float | None = getattr(self, WORK_UNITS[unit])
        return value


@dataclass(frozen=True)
class Curve:
    """A curve's points, ascending in size (one per size, or per declared x value:
    repeats keep the lowest median)."""

    key: CurveKey
    points: tuple[CurvePoint, ...]

    @property
    def sizes(self) -> list[int]:
        return [p.size for p in self.points]

    @property
    def medians_s(self) -> list[float]:
        return [p.median_s for p in self.points]

    def work_units(self) -> list[str]:
        """Units every point has a positive work figure in, in order of preference."""
        return [
            u for u in WORK_UNITS if self.points and all((p.work(u) or 0) > 0 for p in self.points)
        ]


@dataclass(frozen=True)
class CurveFit:
    """A curve's fit, or why there is none (``fit`` None and ``reason`` set)."""

    key: CurveKey
    fit: Fit | None
    reason: str | None = None


@dataclass(frozen=True)
class Crossover:
    """Where curves ``a`` and ``b`` swap order, on their x-axis ``axis``.

    ``size`` is the position on ``axis`` (elements, ``flop``/``bytes``/``items`` per
    call, or the declared axis, e.g. ``k``; :func:`benchbench.analysis.axes.axis_of`).
    ``faster_below`` is the key of the curve that is faster below it; the other
    overtakes it at ``size`` (the first measured crossing; ``more`` counts further
    ones, from noise or a real second swap). ``model_size`` is where the fits cross within
    the measured range, on the same axis, None when they do not or their work units differ.
    """

    a: CurveKey
    b: CurveKey
    differs: str
    size: float
    faster_below: CurveKey
    more: int = 0
    model_size: float | None = None
    axis: str = ELEMENTS

    @property
    def faster_above(self) -> CurveKey:
        return self.b if self.faster_below == self.a else self.a


@dataclass(frozen=True)
class Analysis:
    """Curves of a set of rows with their fits and the crossovers between them."""

    curves: tuple[Curve, ...]
    fits: tuple[CurveFit, ...]
    crossovers: tuple[Crossover, ...]

    def fit_of(self, key: CurveKey) -> Fit | None:
        return next((f.fit for f in self.fits if f.key == key), None)


def with_run(run: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one run tagged with its ``run_id``, ``run_label`` and ``environment_id``."""
    return [
        {
            **row,
            "run_id": run["id"],
            "run_label": run.get("label"),
            "environment_id": run.get("environment_id"),
        }
        for row in rows
    ]


def key_of(row: Mapping[str, Any]) -> CurveKey:
    """The curve a stored row belongs to."""
    return CurveKey(
        suite=str(row.get("suite", "")),
        workload=str(row["workload"]),
        variant=str(row["variant"]),
        device=str(row["device"]),
        dtype=str(row["dtype"]),
        params=json.dumps(row.get("params") or {}, sort_keys=True, default=str),
        environment_id=row.get("environment_id"),
        run_id=row.get("run_id"),
    )


def _positive(value: Any) -> float | None:
    return float(value) if value is not None and float(value) > 0 else None


def curves_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Curve]:
    """Group measured (status ``ok``) rows into curves, in first-seen order."""
    grouped: dict[CurveKey, dict[float, CurvePoint]] = defaultdict(dict)
    for row in rows:
        median = row.get("median_s")
        if row.get("status") != "ok" or median is None or not median > 0:
            continue
        size = int(row["size"])
        extra = row.get("extra")
        declared = extra.get("x") if isinstance(extra, Mapping) else None
        declared = declared if isinstance(declared, Mapping) else {}
        x_name = declared.get("name")
        params = dict(row.get("params") or {})
        if x_name in params:  # a declared parameter axis joins its values into one curve
            params.pop(x_name)
            row = {**row, "params": params}
        point = CurvePoint(
            size=size,
            median_s=float(median),
            q1_s=float(row.get("q1_s") or median),
            q3_s=float(row.get("q3_s") or median),
            bytes_per_call=_positive(row.get("bytes_per_call")),
            flop_per_call=_positive(row.get("flop_per_call")),
            items_per_call=_positive(row.get("items_per_call")),
            shape=tuple(int(d) for d in row.get("shape") or ()),
            x_name=x_name,
            x=_positive(declared.get("value")),
        )
        points = grouped[key_of(row)]
        at = point.x if point.x is not None else size
        if at not in points or point.median_s < points[at].median_s:
            points[at] = point
    return [Curve(key, tuple(points[s] for s in sorted(points))) for key, points in grouped.items()]


def fit_of_curve(curve: Curve) -> CurveFit:
    """The best-fitting ``t0 + work/rate`` over the curve's work units (module docstring)."""
    if len(curve.points) < _MIN_SIZES:
        return CurveFit(
            curve.key, None, f"needs {_MIN_SIZES} sizes to fit, has {len(curve.points)}"
        )
    units = curve.work_units()
    if not units:
        return CurveFit(curve.key, None, "no work model")
    if (axis := axis_of(curve)).reason is not None:
        return CurveFit(curve.key, None, axis.reason)
    best: Fit | None = None
    for unit in units:
        work = [p.work(unit) or 0.0 for p in curve.points]
        try:
            fit = fit_curve(work, curve.medians_s, work_unit=unit)
        except MeasurementError as exc:
            return CurveFit(curve.key, None, str(exc))
        if best is None or fit.r2 > best.r2 + _R2_TIE:
            best = fit
    return CurveFit(curve.key, best)


def _model_crossover(a: Curve, axis: Axis, fa: Fit | None, fb: Fit | None) -> float | None:
    if fa is None or fb is None or fa.work_unit != fb.work_unit:
        return None
    work = [p.work(fa.work_unit) or 0.0 for p in a.points]
    try:
        at = model_crossover(fa, fb, (min(work), max(work)))
    except MeasurementError:
        return None
    if at is None:
        return None
    # Work grows monotonically along the axis: read the position off curve a, in log-log.
    return float(np.exp(np.interp(math.log(at), np.log(work), np.log(axis.values))))


def find_crossovers(
    curves: Sequence[Curve], fits: Sequence[CurveFit] = (), *, min_effect: float = MIN_EFFECT
) -> list[Crossover]:
    """Crossovers between every pair of curves differing only in variant or in device,
    on their common x-axis (none when either has no meaningful one or they differ)."""
    fit_by_key = {f.key: f.fit for f in fits}
    axes = {c.key: axis_of(c) for c in curves}
    found: list[Crossover] = []
    for a, b in itertools.combinations(curves, 2):
        differs = a.key.differs_only_in(b.key)
        axis = axes[a.key]
        if differs is None or axis.name is None or axes[b.key].name != axis.name:
            continue
        ta = dict(zip(axis.values, a.medians_s, strict=True))
        tb = dict(zip(axes[b.key].values, b.medians_s, strict=True))
        sizes = sorted(set(ta) & set(tb))
        ratios = [ta[s] / tb[s] for s in sizes]
        at = crossings(sizes, ratios, [decisive(r, min_effect) for r in ratios])
        if not at:
            continue
        found.append(
            Crossover(
                a=a.key,
                b=b.key,
                differs=differs,
                size=at[0].size,
                faster_below=a.key if at[0].below < 0 else b.key,
                more=len(at) - 1,
                model_size=_model_crossover(a, axis, fit_by_key.get(a.key), fit_by_key.get(b.key)),
                axis=axis.name,
            )
        )
    return found


def analyze(rows: Iterable[Mapping[str, Any]], *, min_effect: float = MIN_EFFECT) -> Analysis:
    """Curves, fits and crossovers of stored rows (tag them with :func:`with_run` first)."""
    curves = curves_from_rows(rows)
    fits = [fit_of_curve(c) for c in curves]
    return Analysis(
        tuple(curves), tuple(fits), tuple(find_crossovers(curves, fits, min_effect=min_effect))
    )


def _key_columns(key: CurveKey) -> dict[str, Any]:
    return {
        "suite": key.suite,
        "workload": key.workload,
        "variant": key.variant,
        "device": key.device,
        "dtype": key.dtype,
        "params": key.params,
        "environment_id": key.environment_id,
        "run_id": key.run_id,
    }


def fit_run(rows: Iterable[Mapping[str, Any]], *, min_effect: float = MIN_EFFECT) -> pd.DataFrame:
    """One row per curve: its key, ``points``, ``work_unit``, ``t0_s``, ``rate_per_s``
    (work units per second), ``r2``, ``rel_rms``, ``min_size``, ``max_size``, ``note``
    (why there is no fit) and ``crossovers`` (how many involve it).

    ``rows`` are stored measurements (``Store.measurements``), ideally tagged by
    :func:`with_run`; see :func:`crossovers_frame` for the crossovers themselves.
    """
    import pandas as pd  # ~0.3 s, for the two frames only: `show` and the dashboard use analyze

    analysis = analyze(rows, min_effect=min_effect)
    records = []
    for curve, cf in zip(analysis.curves, analysis.fits, strict=True):
        fit = cf.fit
        records.append(
            {
                **_key_columns(curve.key),
                "points": len(curve.points),
                "work_unit": fit.work_unit if fit else None,
                "t0_s": fit.t0_s if fit else None,
                "rate_per_s": fit.rate_per_s if fit else None,
                "r2": fit.r2 if fit else None,
                "rel_rms": fit.rel_rms if fit else None,
                "min_size": min(curve.sizes),
                "max_size": max(curve.sizes),
                "note": cf.reason,
                "crossovers": sum(curve.key in (x.a, x.b) for x in analysis.crossovers),
            }
        )
    return pd.DataFrame.from_records(
        records,
        columns=[
            *_key_columns(CurveKey("", "", "", "", "")),
            "points",
            "work_unit",
            "t0_s",
            "rate_per_s",
            "r2",
            "rel_rms",
            "min_size",
            "max_size",
            "note",
            "crossovers",
        ],
    )


def crossovers_frame(
    rows: Iterable[Mapping[str, Any]], *, min_effect: float = MIN_EFFECT
) -> pd.DataFrame:
    """One row per crossover: workload, dtype, what ``differs``, the two sides, the
    measured ``size`` on the ``axis`` (elements, a work unit per call or the declared
    axis), which is ``faster_below`` / ``faster_above`` it, further crossings (``more``)
    and the ``model_size``."""
    import pandas as pd

    analysis = analyze(rows, min_effect=min_effect)
    return pd.DataFrame.from_records(
        [
            {
                "workload": x.a.workload,
                "dtype": x.a.dtype,
                "differs": x.differs,
                "a": getattr(x.a, x.differs),
                "b": getattr(x.b, x.differs),
                "size": x.size,
                "faster_below": getattr(x.faster_below, x.differs),
                "faster_above": getattr(x.faster_above, x.differs),
                "more": x.more,
                "model_size": x.model_size,
                "axis": x.axis,
            }
            for x in analysis.crossovers
        ],
        columns=[
            "workload",
            "dtype",
            "differs",
            "a",
            "b",
            "size",
            "faster_below",
            "faster_above",
            "more",
            "model_size",
            "axis",
        ],
    )
