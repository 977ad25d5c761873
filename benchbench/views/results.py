"""Rendering stored measurements: a table for people (:mod:`benchbench.views.tables`),
a JSON document for tools."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from benchbench.analysis.roofline import ABOVE_CEILING_TOLERANCE, roofline_numbers
from benchbench.core.columns import MEDIAN_CI, POINT_KEYS, QUARTILES, RATES
from benchbench.core.notes import merge_warnings, names_process
from benchbench.core.units import format_rate, format_size, format_time
from benchbench.core.values import Point
from benchbench.machine.hardware import Profile
from benchbench.measure.cuda_graph import timing_method
from benchbench.views.run_notes import (
    NOTES_WIDTH,
    note_word,
    notes_cell,
    range_cell,
    threads_phrase,
    unstable,
)
from benchbench.views.tables import Cell, Column, Grid

#: What ``results_grid`` notes under the table when no profile covers the run.
NO_PROFILE_NOTE = "% of peak: no hardware profile for this environment; run `benchbench probe`"
#: The start of the warning a point above its measured ceiling carries.
ABOVE_CEILING = "above the measured ceiling"

#: Keys of every result in ``--json`` output (seconds as floats); ``timing`` is
#: :func:`timing` (how a CUDA point was timed; null elsewhere).
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
    "timing",
    "derived",
    "instructions_per_call",
    "instruction_counts",
)

#: The note under a table with a derived work model (the ``*`` of its rates).
DERIVED_NOTE = (
    "* derived work model: FLOPs counted by torch's FlopCounterMode (matmuls, "
    "convolutions, attention), bytes of the call's input and output tensors"
)


def derived(row: Mapping[str, Any]) -> list[str]:
    """The work-model figures of ``row`` that were derived, not declared (``["flops",
    "bytes"]``, from ``extra.derived``; see :mod:`benchbench.measure.workmodel`)."""
    return [str(name) for name in (row.get("extra") or {}).get("derived") or []]


def result_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """One stored measurement (joined with its benchmark) as a ``--json`` result."""
    out = {key: row.get(key) for key in RESULT_KEYS}
    out["samples"] = list(row.get("samples_s") or [])
    out["timing"] = timing(row)
    out["derived"] = derived(row)
    return out


def with_roofline(
    rows: Sequence[Mapping[str, Any]], profiles: Mapping[str, Profile]
) -> list[dict[str, Any]]:
    """Rows with ``percent_of_peak`` and ``ceiling`` from the profile of their device.

    A row above its measured ceiling (``ceiling["above_measured"]``) also gets a warning
    that says so and how to fix it, so it travels to ``--json`` and the table's notes; so
    does an in-place row held to the copy curves of a profile without the update curve
    (``ceiling["note"]``).
    """
    out = []
    for row in rows:
        percent, ceiling = roofline_numbers(row, profiles.get(str(row.get("device"))))
        extra: dict[str, Any] = {"percent_of_peak": percent, "ceiling": ceiling}
        warnings = [*(row.get("warnings") or [])]
        if ceiling and ceiling.get("note"):
            warnings.append(ceiling["note"])
        if ceiling and ceiling["above_measured"] and percent is not None:
            unit = "B/s" if ceiling["kind"] == "memory" else "FLOP/s"
            warnings.append(
                f"{ABOVE_CEILING}: {percent:.0f} % of the probe's "
                f"{format_rate(ceiling['value'], unit)}; the probe underestimates this "
                "machine at this size: re-run `benchbench probe`"
            )
        if ceiling and len(warnings) > len(row.get("warnings") or []):
            extra["warnings"] = warnings
        out.append({**row, **extra})
    return out


def above_ceiling_note(
    rows: Sequence[Mapping[str, Any]], profile: Profile | None = None
) -> str | None:
    """One line on the rows above their measured ceiling, naming up to three; ``None``
    when there are none. Rows come from :func:`with_roofline`, or are held to ``profile``
    here (rows on other devices then count as not above)."""
    if profile is not None:
        rows = with_roofline(rows, {profile.device: profile})
    above = [r for r in rows if (r.get("ceiling") or {}).get("above_measured")]
    if not above:
        return None
    named = ", ".join(
        f"{r['workload']} {r['variant']} at {format_size(int(r['size']))} "
        f"({r['percent_of_peak']:.0f} %)"
        for r in above[:3]
    )
    more = f" and {len(above) - 3} more" if len(above) > 3 else ""
    return (
        f"{len(above)} point(s) {ABOVE_CEILING} (over {100 * (1 + ABOVE_CEILING_TOLERANCE):.0f} "
        f"% of it): {named}{more}. The probe underestimates the machine at those sizes, so "
        "their % of peak means nothing; re-run `benchbench probe`"
    )


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


#: The columns of :func:`results_grid`.
RESULT_COLUMNS = (
    Column("workload"),
    Column("variant"),
    Column("dtype"),
    Column("device"),
    Column("size", "right"),
    Column("median", "right"),
    Column("±95% CI", "right"),
    Column("GB/s", "right"),
    Column("GFLOP/s", "right"),
    Column("% peak", "right"),
    Column("max rel err", "right"),
    Column("notes", max_width=NOTES_WIDTH),
)
#: Shown before ``notes`` when a table holds a CUDA point: how it was timed (``events``
#: or ``graph xK``, which excludes launch overhead) and whether it was launch-bound.
TIMING_COLUMN = Column("timing")
#: Shown after the CI when a table holds a point whose instructions were counted
#: (``run --metric instructions``): instructions per call under callgrind.
INSTRUCTIONS_COLUMN = Column("instr/call", "right")


def format_instructions(value: float | None) -> str:
    """Instructions per call for a table: ``8,367``, ``12.3 M``, ``4.56 G``; ``-`` for none."""
    if value is None:
        return "-"
    for scale, suffix in ((1e9, " G"), (1e6, " M")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:,.0f}"


def timing(row: Mapping[str, Any]) -> str | None:
    """How a CUDA point was timed (``events``, ``graph x100``, ``, launch-bound``);
    None for other devices, whose host clock is the only clock."""
    return timing_method(row.get("device"), row.get("extra"))


def results_grid(
    rows: Sequence[Mapping[str, Any]],
    title: str | None = None,
    *,
    profiled: bool = False,
    footer: Sequence[str] = (),
) -> Grid:
    """Median with its 95 % CI, throughput, % of peak, accuracy and notes per point.

    The notes are a word or two per kind of warning (:func:`~benchbench.views.run_notes.
    note_word`); a row whose interval is wider than ±50 % reads ``unstable`` with its
    processes' range instead. ``footer``: lines under the table after the others (a
    run's :func:`~benchbench.views.run_notes.footer`). The title gets the CPU points'
    torch threads (``· 1 thread``).

    ``profiled``: the rows carry roofline numbers (:func:`with_roofline`) from a stored
    profile; without one a note under the table says how to get it. A ``params``
    column (``mode=bwd, peak=88.0``) follows the size when any row has named axes; a
    rate from a derived work model ends in ``*`` (:data:`DERIVED_NOTE`).
    """
    with_params = any(row.get("params") for row in rows)
    cells: list[tuple[Cell, ...]] = []
    methods = [timing(row) for row in rows]
    for row in rows:
        shape = row.get("shape") or [row.get("size")]
        size = "x".join(map(str, shape)) if len(shape) > 1 else format_size(int(row["size"]))
        names: tuple[Cell, ...] = (
            row["workload"],
            row["variant"],
            row["dtype"],
            row["device"],
            size,
        )
        if with_params:
            names = (*names, ", ".join(f"{k}={v}" for k, v in (row.get("params") or {}).items()))
        if row["status"] != "ok":
            style = "yellow" if row["status"] == "skipped" else "red"
            reason = Text(_reason_cell(row), style=style)
            cells.append((*names, Text(row["status"], style=style), *[""] * 5, reason))
            continue
        bandwidth = row.get("bytes_per_s")
        flops = row.get("flop_per_s")
        warnings = row.get("warnings") or []
        error = row.get("max_rel_error")
        marks = derived(row)
        cells.append(
            (
                *names,
                format_time(row.get("median_s")),
                Text(range_cell(row), style="yellow") if unstable(row) else _ci_percent(row),
                _rate(bandwidth, "bytes" in marks),
                _rate(flops, "flops" in marks),
                _peak_cell(row),
                f"{error:.2g}" if error is not None else "-",
                # One note per kind (a point's processes each bring theirs), a word each;
                # the footer says the details once.
                Text(
                    notes_cell(row, [note_word(w) or "" for w in merge_warnings(warnings)]),
                    style="yellow",
                ),
            )
        )
    above = above_ceiling_note(rows) if profiled else None
    notes = ((above,) if above else ()) if profiled else (NO_PROFILE_NOTE,)
    if any(derived(row) for row in rows if row["status"] == "ok"):
        notes = (*notes, DERIVED_NOTE)
    notes = (*notes, *footer)
    threads = threads_phrase(rows)
    if title is not None and threads is not None:
        title = f"{title} · {threads}"
    columns: tuple[Column, ...] = RESULT_COLUMNS
    if with_params:
        columns = (*RESULT_COLUMNS[:5], Column("params"), *RESULT_COLUMNS[5:])
    if any(row.get("instructions_per_call") is not None for row in rows):
        at = columns.index(RESULT_COLUMNS[6]) + 1  # after the CI
        columns = (*columns[:at], INSTRUCTIONS_COLUMN, *columns[at:])
        cells = [
            (*c[:at], format_instructions(row.get("instructions_per_call")), *c[at:])
            if row["status"] == "ok"
            else (*c[:at], "", *c[at:])
            for c, row in zip(cells, rows, strict=True)
        ]
    if any(m is not None for m in methods):
        columns = (*columns[:-1], TIMING_COLUMN, columns[-1])
        cells = [
            (*c[:-1], _timing_cell(row, m), c[-1])
            for c, row, m in zip(cells, rows, methods, strict=True)
        ]
    return Grid.of(columns, cells, title=title, notes=notes)


#: A failure's reason longer than this shows its head in the table (``RuntimeError``):
#: ``run`` and ``show`` print it whole under the table (``failed: LABEL: REASON``).
REASON_WIDTH = 40


def _reason_cell(row: Mapping[str, Any]) -> str:
    reason = str(row.get("reason") or "")
    if row["status"] != "error" or len(reason) <= REASON_WIDTH:
        return reason
    return reason.split(":", 1)[0][:REASON_WIDTH] + " (whole below)"


def _rate(value: float | None, is_derived: bool) -> str:
    """A rate in units of 1e9 per second; ``*`` when its work model was derived."""
    if value is None:
        return "-"
    return f"{value / 1e9:.3g}{'*' if is_derived else ''}"


def _timing_cell(row: Mapping[str, Any], method: str | None) -> Cell:
    if method is None or row.get("status") != "ok":
        return "-" if method is None else ""
    return Text(method, style="yellow") if "launch-bound" in method else method


def failures(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(label, full reason)`` of every failed (status error) stored row, in order."""
    return [
        (Point.from_row(row).label, str(row.get("reason") or "no reason recorded"))
        for row in rows
        if row.get("status") == "error"
    ]


def _peak_cell(row: Mapping[str, Any]) -> str | Text:
    if row.get("bytes_per_s") is None and row.get("flop_per_s") is None:
        return "no work model"
    percent, ceiling = row.get("percent_of_peak"), row.get("ceiling")
    if percent is None or not ceiling:
        return "-"
    if ceiling.get("above_measured"):
        # A probe's error, not a percentage: the notes and the caption say by how much.
        return Text("> ceiling", style="yellow")
    text = f"{percent:,.0f}" if percent >= 100 else f"{percent:.2g}"
    return f"{text}% {'mem' if ceiling['kind'] == 'memory' else 'flop'}"


def _ci_percent(row: Mapping[str, Any]) -> str:
    median, low, high = row.get("median_s"), row.get("ci_low_s"), row.get("ci_high_s")
    if not median or low is None or high is None:
        return "-"
    return f"±{(high - low) / (2 * median):.1%}"


def short_warning(text: str) -> str:
    """The part of a warning before its first colon or parenthesis: ``not converged``;
    a warning about another process keeps which one and its CPU use: ``another process
    was busy during the point: python3 (pid 6750) at 81% CPU``."""
    if names_process(text):
        return _PEAK.sub("", text)
    return text.split(":", 1)[0].split(" (", 1)[0]


#: The peak figure a busy-process warning adds to its mean; the table shows the mean.
_PEAK = re.compile(r" \(max [^)]*\)")


def summary_line(rows: Sequence[Mapping[str, Any]]) -> str:
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("ok", "skipped", "error")}
    return f"{counts['ok']} measured, {counts['skipped']} skipped, {counts['error']} failed"
