"""Rendering stored measurements: a rich table for people, a JSON document for tools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from benchbench.units import format_rate, format_size, format_time

#: Keys of every result in ``--json`` output (seconds as floats).
RESULT_KEYS = (
    "suite",
    "workload",
    "variant",
    "device",
    "dtype",
    "size",
    "shape",
    "params",
    "status",
    "reason",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "q1_s",
    "q3_s",
    "n",
    "samples",
    "calls_per_sample",
    "bytes_per_s",
    "flop_per_s",
    "items_per_s",
    "max_rel_error",
    "peak_memory_bytes",
    "converged",
    "cache_mode",
    "threads",
    "warnings",
)


def result_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """One stored measurement (joined with its benchmark) as a ``--json`` result."""
    out = {key: row.get(key) for key in RESULT_KEYS}
    out["samples"] = list(row.get("samples_s") or [])
    return out


def run_document(run: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``--json`` document of a run: ``{"run_id": ..., "results": [...]}``."""
    return {
        "run_id": run["id"],
        "label": run.get("label"),
        "status": run.get("status"),
        "started_at": _iso(run.get("started_at")),
        "finished_at": _iso(run.get("finished_at")),
        "environment_id": run.get("environment_id"),
        "git_sha": run.get("git_sha"),
        "results": [result_json(r) for r in rows],
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None and hasattr(value, "isoformat") else value


def _throughput(row: Mapping[str, Any]) -> str:
    if row.get("bytes_per_s") is not None:
        return format_rate(row["bytes_per_s"], "B/s")
    if row.get("flop_per_s") is not None:
        return format_rate(row["flop_per_s"], "FLOP/s")
    return "no work model"


def results_table(rows: Sequence[Mapping[str, Any]], title: str | None = None) -> Table:
    """Median with its 95 % CI, throughput, accuracy and warnings per point."""
    table = Table(title=title, header_style="bold", show_lines=False)
    for name, justify in (
        ("workload", "left"),
        ("variant", "left"),
        ("dtype", "left"),
        ("device", "left"),
        ("size", "right"),
        ("median", "right"),
        ("±95% CI", "right"),
        ("GB/s", "right"),
        ("GFLOP/s", "right"),
        ("max rel err", "right"),
        ("notes", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        shape = row.get("shape") or [row.get("size")]
        size = "x".join(map(str, shape)) if len(shape) > 1 else format_size(int(row["size"]))
        if row["status"] != "ok":
            style = "yellow" if row["status"] == "skipped" else "red"
            table.add_row(
                row["workload"],
                row["variant"],
                row["dtype"],
                row["device"],
                size,
                Text(row["status"], style=style),
                "",
                "",
                "",
                "",
                Text(str(row.get("reason") or ""), style=style),
            )
            continue
        bandwidth = row.get("bytes_per_s")
        flops = row.get("flop_per_s")
        warnings = row.get("warnings") or []
        error = row.get("max_rel_error")
        table.add_row(
            row["workload"],
            row["variant"],
            row["dtype"],
            row["device"],
            size,
            format_time(row.get("median_s")),
            _ci_percent(row),
            f"{bandwidth / 1e9:.3g}" if bandwidth is not None else "-",
            f"{flops / 1e9:.3g}" if flops is not None else "-",
            f"{error:.2g}" if error is not None else "-",
            Text(", ".join(short_warning(w) for w in warnings), style="yellow"),
        )
    return table


def _ci_percent(row: Mapping[str, Any]) -> str:
    median, low, high = row.get("median_s"), row.get("ci_low_s"), row.get("ci_high_s")
    if not median or low is None or high is None:
        return "-"
    return f"±{(high - low) / (2 * median):.1%}"


def short_warning(text: str) -> str:
    """The part of a warning before its first colon or parenthesis: ``not converged``."""
    return text.split(":", 1)[0].split(" (", 1)[0]


def summary_line(rows: Sequence[Mapping[str, Any]]) -> str:
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("ok", "skipped", "error")}
    return f"{counts['ok']} measured, {counts['skipped']} skipped, {counts['error']} failed"
