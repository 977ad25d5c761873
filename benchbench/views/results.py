"""Rendering stored measurements: a rich table for people, a JSON document for tools."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from benchbench.analysis.roofline import ceiling_for
from benchbench.core.columns import MEDIAN_CI, POINT_KEYS, QUARTILES, RATES
from benchbench.core.errors import MeasurementError
from benchbench.core.units import format_rate, format_size, format_time
from benchbench.machine.hardware import Profile

#: What ``results_table`` prints under the table when no profile covers the run.
NO_PROFILE_NOTE = "% of peak: no hardware profile for this environment; run `benchbench probe`"

#: Keys of every result in ``--json`` output (seconds as floats).
RESULT_KEYS: tuple[str, ...] = (
    *POINT_KEYS,
    "status",
    "reason",
    *MEDIAN_CI,
    *QUARTILES,
    "n",
    "samples",
    "calls_per_sample",
    *RATES,
    "percent_of_peak",
    "ceiling",
    "max_rel_error",
    "max_abs_error",
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


def roofline_numbers(
    row: Mapping[str, Any], profile: Profile | None
) -> tuple[float | None, dict[str, Any] | None]:
    """``(percent_of_peak, ceiling)`` of one measured row against its device's profile.

    The ceiling is :func:`benchbench.analysis.roofline.ceiling_for` with the bytes per call as the
    working set (the inputs and outputs a call touches; a workload that reuses a buffer
    would need its own figure). ``(None, None)`` without a profile, for a point that was
    not measured, or for one with no work model.
    """
    if profile is None or row.get("status") != "ok":
        return None, None
    nbytes = row.get("bytes_per_call") or 0.0
    flop = row.get("flop_per_call") or 0.0
    if nbytes <= 0 and flop <= 0:
        return None, None
    try:
        ceiling = ceiling_for(
            profile, nbytes, flop, nbytes if nbytes > 0 else 1.0, dtype=str(row.get("dtype"))
        )
    except MeasurementError:
        return None, None
    achieved = row.get("bytes_per_s") if ceiling.kind == "memory" else row.get("flop_per_s")
    if achieved is None or not ceiling.value > 0 or not math.isfinite(ceiling.value):
        return None, None
    return 100.0 * achieved / ceiling.value, {
        "kind": ceiling.kind,
        "value": ceiling.value,
        "unit": "bytes/s" if ceiling.kind == "memory" else "flop/s",
        "intensity_flop_per_byte": _finite(ceiling.intensity_flop_per_byte),
        "attainable_flop_per_s": _finite(ceiling.attainable_flop_per_s),
        "profile_device": profile.device,
    }


def with_roofline(
    rows: Sequence[Mapping[str, Any]], profiles: Mapping[str, Profile]
) -> list[dict[str, Any]]:
    """Rows with ``percent_of_peak`` and ``ceiling`` from the profile of their device."""
    out = []
    for row in rows:
        percent, ceiling = roofline_numbers(row, profiles.get(str(row.get("device"))))
        out.append({**row, "percent_of_peak": percent, "ceiling": ceiling})
    return out


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def run_document(
    run: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``--json`` document of a run: ``{"run_id": ..., "results": [...]}``, plus
    ``extra`` keys (``fits``, ``crossovers`` from :mod:`benchbench.views.fits`)."""
    return {
        "run_id": run["id"],
        "label": run.get("label"),
        "status": run.get("status"),
        "started_at": _iso(run.get("started_at")),
        "finished_at": _iso(run.get("finished_at")),
        "environment_id": run.get("environment_id"),
        "git_sha": run.get("git_sha"),
        "results": [result_json(r) for r in rows],
        **(extra or {}),
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None and hasattr(value, "isoformat") else value


def _throughput(row: Mapping[str, Any]) -> str:
    if row.get("bytes_per_s") is not None:
        return format_rate(row["bytes_per_s"], "B/s")
    if row.get("flop_per_s") is not None:
        return format_rate(row["flop_per_s"], "FLOP/s")
    return "no work model"


def results_table(
    rows: Sequence[Mapping[str, Any]], title: str | None = None, *, profiled: bool = False
) -> Table:
    """Median with its 95 % CI, throughput, % of peak, accuracy and warnings per point.

    ``profiled``: the rows carry roofline numbers (:func:`with_roofline`) from a stored
    profile; without one the caption says how to get it.
    """
    table = Table(
        title=title,
        header_style="bold",
        show_lines=False,
        caption=None if profiled else NO_PROFILE_NOTE,
        caption_justify="left",
    )
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
        ("% peak", "right"),
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
            _peak_cell(row),
            f"{error:.2g}" if error is not None else "-",
            # dict.fromkeys: one telemetry warning per sample window would repeat 5 times.
            Text(", ".join(dict.fromkeys(short_warning(w) for w in warnings)), style="yellow"),
        )
    return table


def _peak_cell(row: Mapping[str, Any]) -> str:
    if row.get("bytes_per_s") is None and row.get("flop_per_s") is None:
        return "no work model"
    percent, ceiling = row.get("percent_of_peak"), row.get("ceiling")
    if percent is None or not ceiling:
        return "-"
    text = f"{percent:,.0f}" if percent >= 100 else f"{percent:.2g}"
    return f"{text}% {'mem' if ceiling['kind'] == 'memory' else 'flop'}"


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
