"""Picture of a variants comparison: throughput versus size, one line per variant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchbench.analysis.variants import Row


def plot_rows(rows: Sequence[Row], title: str | None = None) -> Any:
    """Throughput (elements/s) versus size, log-log: one line per variant, device and
    dtype, with a band from the Q1 to the Q3 time. Returns a matplotlib Figure."""
    # Imported here: matplotlib costs ~0.3 s, paid only when a picture is asked for.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.subplots()
    lines: dict[tuple[str, str, str], list[Row]] = {}
    for row in rows:
        if row.status == "ok" and row.median_s and row.q1_s and row.q3_s:
            lines.setdefault((row.variant, row.device, row.dtype), []).append(row)
    several = len({(d, t) for _, d, t in lines}) > 1
    for (variant, device, dtype), group in lines.items():
        group = sorted(group, key=lambda r: r.size)
        sizes = [r.size for r in group]
        label = f"{variant} [{dtype}, {device}]" if several else variant
        rates = [r.size / (r.median_s or 1) for r in group]
        (line,) = ax.plot(sizes, rates, marker="o", label=label)
        ax.fill_between(
            sizes,
            [r.size / (r.q3_s or 1) for r in group],
            [r.size / (r.q1_s or 1) for r in group],
            color=line.get_color(),
            alpha=0.2,
            linewidth=0,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (elements)")
    ax.set_ylabel("throughput (elements/s; band: Q1-Q3)")
    if title:
        ax.set_title(title)
    if lines:
        ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return figure
