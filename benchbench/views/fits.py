"""Rendering model fits and crossovers: the "fits" table below ``show``'s results, and JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from benchbench.analysis.axes import axis_text
from benchbench.analysis.curves import Analysis, Crossover, CurveKey
from benchbench.analysis.fit import Fit
from benchbench.core.units import format_rate, format_time
from benchbench.core.values import point_name
from benchbench.views.tables import Column, Grid

_RATE_UNIT = {"bytes": "B/s", "flop": "FLOP/s", "items": "items/s"}


def curve_label(key: CurveKey, varying: Sequence[str] = ()) -> str:
    """``sqrt:torch.sqrt[float32, cpu]`` (a point's label without the size), with its
    params as ``(dim=1)`` and the run and environment when they vary."""
    text = point_name(key.workload, key.variant, key.dtype, key.device)
    params = json.loads(key.params) if key.params else {}
    if params:
        text += "(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")"
    if "run_id" in varying and key.run_id:
        text += f" run {key.run_id[:8]}"
    if "environment_id" in varying and key.environment_id:
        text += f" env {key.environment_id[:8]}"
    return text


def varying_fields(keys: Sequence[CurveKey]) -> list[str]:
    """The key fields that take more than one value among ``keys``."""
    fields = ("suite", "workload", "variant", "device", "dtype", "params")
    return [
        f for f in (*fields, "environment_id", "run_id") if len({getattr(k, f) for k in keys}) > 1
    ]


def format_fit_rate(fit: Fit) -> str:
    """``12.3 GB/s``; ``∞ (all overhead)`` when the time does not grow with the work."""
    if not math.isfinite(fit.rate_per_s):
        return "∞ (all overhead)"
    return format_rate(fit.rate_per_s, _RATE_UNIT.get(fit.work_unit, fit.work_unit + "/s"))


def _t0_text(t0_s: float) -> str:
    # The fit bounds t0 at 0; a solver stopping at 1e-19 s means "no measurable overhead".
    return "≈0" if t0_s < 1e-9 else format_time(t0_s)


def crossover_text(crossing: Crossover, key: CurveKey) -> str:
    """What ``crossing`` means for the curve ``key``: ``overtakes numpy.sqrt from n≈…``
    (or ``from 2.1 GFLOP per call``, ``from k≈512``: the position on the curves' axis)."""
    other = crossing.b if key == crossing.a else crossing.a
    name = getattr(other, crossing.differs)
    verb = "overtakes" if key == crossing.faster_above else "overtaken by"
    text = f"{verb} {name} from {axis_text(crossing.axis, crossing.size)}"
    return text + (f" (+{crossing.more} more)" if crossing.more else "")


#: Width the crossovers column wraps within: which crossovers a run finds depends on
#: the machine's measurements (one more made ``show``'s fits lines 175 wide on one
#: machine and 140 on another), so the table's width may depend on the names alone.
CROSSOVERS_WIDTH = 40
#: The columns of :func:`fits_grid`.
FIT_COLUMNS = (
    Column("curve"),
    Column("sizes", "right"),
    Column("t0", "right"),
    Column("rate", "right"),
    Column("R²", "right"),
    Column("crossovers", max_width=CROSSOVERS_WIDTH),
)


def fits_grid(analysis: Analysis, title: str = "fits: time = t0 + work / rate") -> Grid:
    """Per curve: points, fixed cost t0, asymptotic rate, R² and crossovers. A reason
    for no fit shared by several curves of a workload is said once, then "as above"."""
    varying = varying_fields([c.key for c in analysis.curves])
    said: set[tuple[str, str]] = set()
    rows = []
    for curve, cf in zip(analysis.curves, analysis.fits, strict=True):
        crossings = [
            crossover_text(x, curve.key) for x in analysis.crossovers if curve.key in (x.a, x.b)
        ]
        fit = cf.fit
        why = cf.reason or "-"
        if fit is None and cf.reason:
            seen = (curve.key.workload, cf.reason)
            why = "no fit (as above)" if seen in said else cf.reason
            said.add(seen)
        rows.append(
            (
                curve_label(curve.key, varying),
                str(len(curve.points)),
                _t0_text(fit.t0_s) if fit else "-",
                format_fit_rate(fit) if fit else why,
                f"{fit.r2:.3f}" if fit else "-",
                # One crossover a line: two side by side made show's lines 184 wide.
                "\n".join(crossings),
            )
        )
    return Grid.of(FIT_COLUMNS, rows, title=title)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def fits_json(analysis: Analysis) -> dict[str, Any]:
    """``{"fits": [...], "crossovers": [...]}`` for ``--json`` documents (no NaN/inf)."""
    fits = []
    for curve, cf in zip(analysis.curves, analysis.fits, strict=True):
        fit = cf.fit
        fits.append(
            {
                "workload": curve.key.workload,
                "variant": curve.key.variant,
                "device": curve.key.device,
                "dtype": curve.key.dtype,
                "params": json.loads(curve.key.params),
                "environment_id": curve.key.environment_id,
                "run_id": curve.key.run_id,
                "points": len(curve.points),
                "work_unit": fit.work_unit if fit else None,
                "t0_s": fit.t0_s if fit else None,
                "rate_per_s": _finite(fit.rate_per_s) if fit else None,
                "r2": _finite(fit.r2) if fit else None,
                "rel_rms": _finite(fit.rel_rms) if fit else None,
                "note": cf.reason
                or (None if fit is None or math.isfinite(fit.rate_per_s) else "all overhead"),
            }
        )
    crossovers = [
        {
            "workload": x.a.workload,
            "dtype": x.a.dtype,
            "device": x.a.device if x.differs == "variant" else None,
            "variant": x.a.variant if x.differs == "device" else None,
            "differs": x.differs,
            "faster_below": getattr(x.faster_below, x.differs),
            "faster_above": getattr(x.faster_above, x.differs),
            "size": x.size,
            "more": x.more,
            "model_size": x.model_size,
            "axis": x.axis,
        }
        for x in analysis.crossovers
    ]
    return {"fits": fits, "crossovers": crossovers}
