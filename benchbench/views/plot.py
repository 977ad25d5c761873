"""Plots of stored runs: throughput versus size, and the roofline.

:func:`throughput_figure` draws, per workload, one line per curve on log-log axes with
a band from Q1 to Q3, vertical markers at the cache sizes (the boundaries the probe
found, else the OS's sizes), the probe's ceilings as horizontal lines and the measured
crossovers. :func:`roofline_figure` places every point by intensity and FLOP/s under the
roofs. Points above their measured ceiling are named in an orange note. Both return a
:class:`matplotlib.figure.Figure` built without pyplot (no global state: safe in
servers and threads); :func:`save_figure` writes PNG, SVG or PDF by file extension.

Rows are stored measurements tagged with their run (:func:`benchbench.analysis.curves.with_run`).
"""

from __future__ import annotations

import itertools
import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from benchbench.analysis.axes import ELEMENTS, Axis, axis_of, work_unit_of
from benchbench.analysis.curves import Analysis, Curve, CurveKey, analyze
from benchbench.core import defaults
from benchbench.core.errors import NotFoundError, UsageError
from benchbench.core.units import format_bytes, format_rate, format_size
from benchbench.machine.hardware import Profile
from benchbench.views.plot_marks import draw_crossovers, plain, plain_y
from benchbench.views.results import above_ceiling_note

__all__ = ["BY_FIELDS", "FORMATS", "roofline_figure", "save_figure", "throughput_figure"]

#: ``--by`` choices and the curve key field each one colours lines by.
BY_FIELDS = {
    "variant": "variant",
    "device": "device",
    "dtype": "dtype",
    "environment": "environment_id",
}
FORMATS = defaults.PLOT_FORMATS
_UNITS = {"bytes": ("GB/s", 1e9), "flop": ("GFLOP/s", 1e9), "items": ("Mitems/s", 1e6)}
_STYLES = ("-", "--", ":", "-.")
_WORK_AXES = {
    "flop": "FLOPs per call (work model)",
    "items": "items per call (work model)",
}


def save_figure(figure: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Write ``figure`` as PNG, SVG or PDF, chosen by the extension of ``path``."""
    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UsageError(
            f"output file {str(out)!r}: extension {out.suffix or '(none)'!r} is not supported; "
            f"use one of {', '.join('.' + f for f in FORMATS)}"
        )
    figure.savefig(out, format=fmt, dpi=dpi)
    return out


def _workloads(
    analysis: Analysis, rows: Sequence[Mapping[str, Any]], wanted: Sequence[str]
) -> list[str]:
    present = list(dict.fromkeys(c.key.workload for c in analysis.curves))
    every = sorted({str(r["workload"]) for r in rows})
    if not present:
        raise NotFoundError(
            "nothing to plot: no point of the run(s) was measured"
            + (f" (workloads there: {', '.join(every)})" if every else " (the run is empty)")
        )
    missing = [w for w in wanted if w not in present]
    if missing:
        raise NotFoundError(
            f"no measured workload {', '.join(map(repr, missing))} in the run(s); "
            f"workloads there: {', '.join(present)}"
        )
    return [w for w in present if w in wanted] if wanted else present


def _grid(count: int, width: float = 7.0, height: float = 5.4) -> tuple[Figure, list[Axes]]:
    cols = 1 if count == 1 else 2
    rows = math.ceil(count / cols)
    figure = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(figure)  # Agg, never pyplot: no global state, no display needed
    axes = [figure.add_subplot(rows, cols, i + 1) for i in range(count)]
    return figure, axes


def params_text(params: str) -> str:
    """A curve's named axes as a legend reads them: ``mode=bwd, peak=88.0``."""
    return ", ".join(f"{k}={v}" for k, v in json.loads(params).items())


def _label(key: CurveKey, by: str, varying: Sequence[str], names: Mapping[str, str]) -> str:
    def text(field: str) -> str:
        value = getattr(key, field)
        if field == "environment_id":
            return names.get(value, str(value)[:8])
        if field == "run_id":
            return "run " + names.get(value, str(value)[:8])
        if field == "params":
            return params_text(value)
        return str(value)

    rest = [text(f) for f in varying if f != by]
    return text(by) + (f" ({', '.join(rest)})" if rest else "")


def _x_axis(
    curves: Sequence[Curve], axes_of: Mapping[CurveKey, Axis]
) -> tuple[str, dict[CurveKey, list[float]]]:
    """The panel's x-axis and each curve's x values: a declared axis shared by every
    curve; else bytes moved when every curve has a bytes model growing along its points
    (so cache sizes line up); else the curves' common axis; else elements."""
    names = {a.name for a in axes_of.values()}
    declared = next(iter(names)) if len(names) == 1 else None
    if declared is not None and declared not in (ELEMENTS, "bytes", "flop", "items"):
        return declared, {k: list(a.values) for k, a in axes_of.items()}
    moved = {c.key: [p.bytes_per_call or 0.0 for p in c.points] for c in curves}
    if all(v[0] > 0 and all(b > a for a, b in itertools.pairwise(v)) for v in moved.values()):
        return "bytes", moved
    if declared is not None:
        return declared, {k: list(a.values) for k, a in axes_of.items()}
    return ELEMENTS, {c.key: [float(s) for s in c.sizes] for c in curves}


def _bytes_axis(axis: Any) -> None:
    axis.set_major_locator(LogLocator(base=4.0))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: format_bytes(v).replace(".0 ", " ")))
    axis.set_minor_formatter(NullFormatter())


def _cache_marks(profile: Profile | None, os_caches: Mapping[str, int]) -> list[tuple[float, str]]:
    if profile is not None and profile.cache_levels:
        return [
            (lv.size_bytes, f"cache edge {format_bytes(lv.size_bytes)} (probe)")
            for lv in profile.cache_levels
        ]
    return [(size, f"{name} {format_bytes(size)} (OS)") for name, size in os_caches.items()]


def throughput_figure(
    rows: Sequence[Mapping[str, Any]],
    *,
    by: str = "variant",
    metric: str = "throughput",
    workloads: Sequence[str] = (),
    profile: Profile | None = None,
    os_caches: Mapping[str, int] | None = None,
    names: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Throughput (or time) versus size, one subplot per workload, one line per curve.

    ``by`` (``variant``, ``device``, ``dtype``, ``environment``) picks what the colours
    tell apart; other fields that vary get their own line style and appear in the label.
    ``metric`` is ``throughput`` (work per second in the unit the fit chose: GB/s for
    elementwise ops, GFLOP/s for matmul) or ``time`` (median time per call). The x-axis
    is the bytes a call moves when the workload has a bytes model (so cache sizes line
    up), else elements. ``profile`` (of the device plotted) gives cache edges and
    ceilings; ``os_caches`` (``{"L2": bytes}``) is the fallback for cache markers.
    ``names`` maps run or environment ids to readable names for labels. Raises
    :class:`NotFoundError` naming the workloads present when one asked for is absent.
    """
    if by not in BY_FIELDS:
        raise UsageError(f"--by {by!r} is not one of {', '.join(BY_FIELDS)}")
    if metric not in ("throughput", "time"):
        raise UsageError(f"--metric {metric!r} is not one of throughput, time")
    analysis = analyze(rows)
    chosen = _workloads(analysis, rows, workloads)
    figure, axes = _grid(len(chosen))
    for ax, workload in zip(axes, chosen, strict=True):
        curves = [c for c in analysis.curves if c.key.workload == workload]
        _throughput_axes(
            ax, curves, analysis, BY_FIELDS[by], metric, profile, os_caches or {}, names or {}
        )
    if title:
        figure.suptitle(title, fontsize=12)
    if above := above_ceiling_note(rows, profile):
        figure.supxlabel(textwrap.fill(above, 150), fontsize=8, color="darkorange")
    return figure


def _throughput_axes(
    ax: Axes,
    curves: Sequence[Curve],
    analysis: Analysis,
    by: str,
    metric: str,
    profile: Profile | None,
    os_caches: Mapping[str, int],
    names: Mapping[str, str],
) -> None:
    fields = ("suite", "variant", "device", "dtype", "params", "environment_id", "run_id")
    varying = [f for f in fields if len({getattr(c.key, f) for c in curves}) > 1]
    axes_of = {c.key: axis_of(c) for c in curves}
    x_name, x_of = _x_axis(curves, axes_of)
    x_bytes = x_name == "bytes"
    unit = work_unit_of(curves) if metric == "throughput" else None
    colours = list(dict.fromkeys(getattr(c.key, by) for c in curves))
    others = list(
        dict.fromkeys(tuple(getattr(c.key, f) for f in varying if f != by) for c in curves)
    )
    palette = [f"C{i % 10}" for i in range(len(colours))]
    xs_of: dict[CurveKey, np.ndarray] = {}
    ys_of: dict[CurveKey, np.ndarray] = {}
    for curve in curves:
        pts = curve.points
        x = np.array(x_of[curve.key], dtype=float)
        median = np.array([p.median_s for p in pts])
        q1, q3 = np.array([p.q1_s for p in pts]), np.array([p.q3_s for p in pts])
        if unit is None:
            y, low, high = median, q1, q3
        else:
            scale = _UNITS[unit][1]
            work = np.array([p.work(unit) for p in pts], dtype=float)
            y, low, high = work / median / scale, work / q3 / scale, work / q1 / scale
        colour = palette[colours.index(getattr(curve.key, by))]
        other = tuple(getattr(curve.key, f) for f in varying if f != by)
        (line,) = ax.plot(
            x,
            y,
            marker="o",
            markersize=3.5,
            linewidth=1.6,
            color=colour,
            linestyle=_STYLES[others.index(other) % len(_STYLES)],
            label=_label(curve.key, by, varying, names),
        )
        line.set_gid("curve")
        ax.fill_between(x, low, high, color=colour, alpha=0.18, linewidth=0)
        xs_of[curve.key], ys_of[curve.key] = x, y
    ax.set_xscale("log")
    ax.set_yscale("log")
    if x_bytes:
        _bytes_axis(ax.xaxis)
        ax.set_xlabel("bytes moved per call (inputs read + outputs written)")
    elif x_name == ELEMENTS:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_size(round(v))))
        ax.set_xlabel("elements per tensor")
    elif x_name in _WORK_AXES:
        symbol = "FLOP" if x_name == "flop" else ""
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_rate(v, symbol)))
        ax.set_xlabel(_WORK_AXES[x_name])
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(plain))
        ax.set_xlabel(f"{x_name} (the workload's declared x-axis)")
    plain_y(ax.yaxis)
    if unit is None:
        ax.set_ylabel("median time per call (s); band: Q1–Q3")
    else:
        ax.set_ylabel(f"throughput ({_UNITS[unit][0]}); band: Q1–Q3")
    devices = {c.key.device for c in curves}
    on_profile = profile is not None and profile.device in devices
    if x_bytes and (on_profile or devices == {"cpu"}):
        _draw_caches(ax, _cache_marks(profile if on_profile else None, os_caches), xs_of)
    if on_profile and profile is not None and unit in ("bytes", "flop"):
        _draw_ceilings(ax, profile, unit, {c.key.dtype for c in curves})
    draw_crossovers(ax, curves, analysis, axes_of, xs_of, ys_of)
    subtitle = curves[0].key.workload
    if metric == "throughput" and unit is None:
        subtitle += " (no work model: time per call)"
    reason = next((a.reason for a in axes_of.values() if a.reason), None)
    if reason:  # said once per panel, under the title
        subtitle += "\n" + textwrap.fill(reason, 90)
    ax.set_title(subtitle, fontsize=11, fontweight="bold")
    ax.grid(True, which="major", alpha=0.3)
    # Below the axes, not inside: inside, "best" placement still covers cache labels.
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)


def _draw_caches(
    ax: Axes, marks: Sequence[tuple[float, str]], xs_of: Mapping[CurveKey, np.ndarray]
) -> None:
    lo = min(float(x.min()) for x in xs_of.values())
    hi = max(float(x.max()) for x in xs_of.values())
    for size, text in marks:
        if not lo <= size <= hi:
            continue
        ax.axvline(size, color="0.45", linestyle=(0, (2, 2)), linewidth=1.0, zorder=0)
        ax.text(
            size,
            0.02,
            " " + text,
            transform=ax.get_xaxis_transform(),
            rotation=90,
            fontsize=7,
            color="0.3",
            ha="right",
            va="bottom",
        )


def _draw_ceilings(ax: Axes, profile: Profile, unit: str, dtypes: set[str]) -> None:
    if unit == "bytes":
        lines = [
            (profile.peak_cache_bytes_per_s, "probe: best in-cache bandwidth"),
            (profile.peak_memory_bytes_per_s, "probe: main-memory bandwidth"),
        ]
        symbol = "B/s"
    else:
        lines = [
            (profile.peak_flop_per_s[d], f"probe: {d} matmul peak")
            for d in sorted(dtypes)
            if d in profile.peak_flop_per_s
        ]
        symbol = "FLOP/s"
    for index, (value, text) in enumerate(lines):
        if value > 0:
            ax.axhline(
                value / 1e9,
                color="0.15" if index % 2 else "0.45",
                linewidth=1.1,
                linestyle=(0, (6, 3)) if index % 2 else (0, (3, 1, 1, 1)),
                label=f"{text} {format_rate(value, symbol)}",
                zorder=1,
            )


def roofline_figure(
    rows: Sequence[Mapping[str, Any]],
    *,
    workloads: Sequence[str] = (),
    profile: Profile | None = None,
    names: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Achieved FLOP/s versus arithmetic intensity (FLOP per byte) of every point, under
    the bandwidth roofs (main memory, best in cache, and main memory for an in-place
    update where the profile measured one) and the matmul peak per dtype.

    Only curves with both a bytes and a FLOP model can be placed; raises
    :class:`NotFoundError` naming the workloads when none has both.
    """
    analysis = analyze(rows)
    chosen = _workloads(analysis, rows, workloads)
    curves = [
        c
        for c in analysis.curves
        if c.key.workload in chosen and {"bytes", "flop"} <= set(c.work_units())
    ]
    if not curves:
        raise NotFoundError(
            f"no curve of workloads {', '.join(chosen)} has both a bytes and a FLOP model; "
            "a roofline plot needs both (bytes= and flops= on the workload)"
        )
    figure = Figure(figsize=(8.5, 5.5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    fields = ("workload", "variant", "device", "dtype", "params", "environment_id", "run_id")
    varying = [f for f in fields if len({getattr(c.key, f) for c in curves}) > 1]
    intensities: list[float] = []
    for index, curve in enumerate(curves):
        nbytes = np.array([p.bytes_per_call or 0.0 for p in curve.points])
        flop = np.array([p.flop_per_call or 0.0 for p in curve.points])
        median = np.array(curve.medians_s)
        intensity = flop / nbytes
        intensities += intensity.tolist()
        label = " ".join(
            params_text(curve.key.params) if f == "params" else str(getattr(curve.key, f))
            for f in varying
            if f != "run_id"
        ) or (f"{curve.key.workload} {curve.key.variant}")
        (line,) = ax.plot(
            intensity,
            flop / median / 1e9,
            marker="o",
            markersize=4,
            linewidth=0.8,
            color=f"C{index % 10}",
            label=label,
        )
        line.set_gid("curve")
    lo, hi = min(intensities) / 4, max(intensities) * 4
    if profile is not None:
        grid = np.geomspace(lo, hi, 200)
        peak = max(
            (profile.peak_flop_per_s.get(c.key.dtype, 0.0) for c in curves), default=0.0
        ) or max(profile.peak_flop_per_s.values(), default=math.inf)
        # In-place points are held to the update curve (analysis/roofline.py): its
        # main-memory roof too, dotted, when the profile has one.
        for bandwidth, text, style in (
            (profile.peak_cache_bytes_per_s, "best in-cache bandwidth", "--"),
            (profile.peak_memory_bytes_per_s, "main-memory bandwidth", "-"),
            (profile.memory_bytes_per_s.get("update", 0.0), "main memory, in-place update", ":"),
        ):
            if bandwidth > 0:
                ax.plot(
                    grid,
                    np.minimum(grid * bandwidth, peak) / 1e9,
                    color="0.15",
                    linestyle=style,
                    linewidth=1.3,
                    label=f"roof: {text} {format_rate(bandwidth, 'B/s')}",
                )
        for dtype in sorted({c.key.dtype for c in curves}):
            if dtype in profile.peak_flop_per_s:
                ax.axhline(
                    profile.peak_flop_per_s[dtype] / 1e9,
                    color="0.5",
                    linestyle=":",
                    linewidth=1.0,
                    label=f"{dtype} matmul peak "
                    f"{format_rate(profile.peak_flop_per_s[dtype], 'FLOP/s')}",
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved GFLOP/s (median)")
    plain_y(ax.yaxis)
    ax.xaxis.set_major_formatter(FuncFormatter(plain))
    ax.grid(True, which="major", alpha=0.3)
    note = "" if profile is not None else " (no hardware profile: run `benchbench probe` for roofs)"
    ax.set_title("roofline" + note, fontsize=11, fontweight="bold")
    ax.legend(fontsize=7.5, loc="best", framealpha=0.85)
    if title:
        figure.suptitle(title, fontsize=12)
    if above := above_ceiling_note(rows, profile):
        figure.supxlabel(textwrap.fill(above, 150), fontsize=8, color="darkorange")
    return figure
