"""The breakdown of a captured callable: a table, a JSON document and a bar chart.

Each :class:`~benchbench.analysis.breakdown.Breakdown` becomes one table (calls ranked
by count x median, their share, throughput and % of the roofline ceiling) with the
sum, the whole callable and the coverage in its notes, and one horizontal bar chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchbench.analysis.breakdown import Breakdown
from benchbench.core.units import format_rate, format_time
from benchbench.views.tables import Column, Grid, Justify

__all__ = [
    "breakdown_figure",
    "breakdown_grid",
    "breakdown_json",
    "compiled_note",
    "coverage_note",
]

#: Calls drawn in the chart before the rest are summed into one bar.
PLOT_CALLS = 15


def coverage_note(b: Breakdown) -> str:
    """One line: the sum of the calls beside the whole callable, and what is left."""
    parts = f"sum of {len(b.calls)} timed calls x count = {format_time(b.sum_s)}"
    if b.whole_s is None or b.coverage is None or b.remainder_s is None:
        return f"{parts}; the whole callable was not measured in this run"
    rest = b.remainder_s
    what = (
        "Python, dispatch and autograd around the ops, and the views left out"
        if rest >= 0
        else "the calls measured alone add up to more than the whole"
    )
    return (
        f"{parts}; whole callable {format_time(b.whole_s)}; coverage {b.coverage:.2f} "
        f"(remainder {format_time(abs(rest))}{'' if rest >= 0 else ' over'}: {what})"
    )


def compiled_note(b: Breakdown) -> str | None:
    """One line on the whole through ``torch.compile`` beside the eager whole, and
    after how many calls compiling pays; None when the compiled whole was not measured."""
    if b.compiled_s is None:
        return None
    line = f"torch.compile: whole {format_time(b.compiled_s)}"
    if b.whole_s is not None and b.compiled_s > 0:
        line += f", {b.whole_s / b.compiled_s:.2f}x the eager whole's speed"
    if b.compile_s is not None:
        line += f"; compiling took {format_time(b.compile_s)}"
        pays = b.compile_pays_after
        if pays is not None:
            line += f", paid back after {pays:,.0f} calls"
        elif b.whole_s is not None:
            line += ", never paid back: the compiled callable is not faster"
    return line


def _rate(call: Any) -> str:
    if call.flop_per_s:
        return format_rate(call.flop_per_s, "FLOP/s")
    if call.bytes_per_s:
        return format_rate(call.bytes_per_s, "B/s")
    return "-"


def breakdown_grid(b: Breakdown) -> Grid:
    """The ranked calls of one breakdown, the coverage and what was not measured in
    the notes."""
    rows = [
        (
            str(rank),
            call.workload,
            call.op,
            call.dtype,
            str(call.count),
            format_time(call.median_s),
            format_time(call.total_s),
            f"{100 * call.share:.1f} %",
            _rate(call),
            "-" if call.percent_of_peak is None else f"{call.percent_of_peak:.0f} %",
        )
        for rank, call in enumerate(b.calls, 1)
    ]
    notes = [coverage_note(b)]
    compiled = compiled_note(b)
    if compiled is not None:
        notes.append(compiled)
    notes += [f"not measured: {workload}: {reason}" for workload, reason in b.not_measured]
    right: Justify = "right"
    return Grid.of(
        [
            Column("#", right),
            Column("workload"),
            Column("op"),
            Column("dtype"),
            Column("count", right),
            Column("median", right),
            Column("count x median", right),
            Column("share", right),
            Column("throughput", right),
            Column("% of ceiling", right),
        ],
        rows,
        title=f"{b.suite} · {b.capture} · {b.device}",
        notes=notes,
    )


def breakdown_json(breakdowns: Sequence[Breakdown]) -> list[dict[str, Any]]:
    """The breakdowns as one JSON-ready list (times in seconds, shares in 0..1)."""
    return [
        {
            "suite": b.suite,
            "capture": b.capture,
            "device": b.device,
            "sum_s": b.sum_s,
            "whole_s": b.whole_s,
            "coverage": b.coverage,
            "remainder_s": b.remainder_s,
            "compiled_s": b.compiled_s,
            "compile_s": b.compile_s,
            "compile_pays_after": b.compile_pays_after,
            "calls": [
                {
                    "workload": c.workload,
                    "op": c.op,
                    "dtype": c.dtype,
                    "count": c.count,
                    "median_s": c.median_s,
                    "total_s": c.total_s,
                    "share": c.share,
                    "bytes_per_s": c.bytes_per_s,
                    "flop_per_s": c.flop_per_s,
                    "percent_of_peak": c.percent_of_peak,
                }
                for c in b.calls
            ],
            "not_measured": [{"workload": w, "reason": r} for w, r in b.not_measured],
        }
        for b in breakdowns
    ]


def breakdown_figure(breakdowns: Sequence[Breakdown], title: str = "") -> Any:
    """One horizontal bar chart per breakdown: each call's count x median, largest on
    top (the calls past :data:`PLOT_CALLS` summed into one bar), and the whole
    callable's time as a bar of its own below them."""
    # matplotlib costs ~1.5 s to import: only `breakdown --plot` pays it.
    from matplotlib.figure import Figure

    heights = [min(len(b.calls), PLOT_CALLS) + 3 for b in breakdowns]
    figure = Figure(figsize=(9, max(3.0, 0.32 * sum(heights) + 1.2 * len(breakdowns))))
    axes = figure.subplots(len(breakdowns), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, b in zip(axes, breakdowns, strict=True):
        shown = list(b.calls[:PLOT_CALLS])
        # the title names the capture: a models-suite prefix would repeat it on every bar
        labels = [f"{c.workload.removeprefix(b.capture + ' ')} x{c.count}" for c in shown]
        values = [c.total_s * 1e3 for c in shown]
        rest = b.calls[PLOT_CALLS:]
        if rest:
            labels.append(f"{len(rest)} other calls")
            values.append(sum(c.total_s for c in rest) * 1e3)
        colors = ["tab:blue"] * len(values)
        labels.append("sum of calls")
        values.append(b.sum_s * 1e3)
        colors.append("tab:gray")
        if b.whole_s is not None:
            labels.append("whole callable")
            values.append(b.whole_s * 1e3)
            colors.append("tab:orange")
        positions = list(range(len(values)))[::-1]
        ax.barh(positions, values, color=colors)
        ax.set_yticks(positions, labels, fontsize=8)
        for y, v in zip(positions, values, strict=True):
            ax.text(v, y, f" {v:.3g} ms", va="center", fontsize=7)
        cov = f", coverage {b.coverage:.2f}" if b.coverage is not None else ""
        ax.set_title(f"{b.capture} · {b.device}{cov}", fontsize=9)
        ax.set_xlabel("time per call of the callable (ms): count x median")
        ax.set_xlim(0, max(values) * 1.25 if values else 1)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure
