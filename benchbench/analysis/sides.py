"""A stored row read as one side of a comparison: its per-call times, its samples per
process, its instruction counts, the instruction fields of a point's comparison, and
whether two runs are the two sides of one ``ab`` run
(:mod:`benchbench.analysis.compare`, claims and the dashboard read rows through these)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from benchbench.analysis.verdict import estimate_counts, mark_counts

Row = Mapping[str, Any]


def per_call(row: Row) -> list[float]:
    """A stored row's samples as per-call seconds (raw sample / calls per sample)."""
    calls = int(row["calls_per_sample"])
    return [float(s) / calls for s in row["samples_s"]]


def processes(row: Row) -> tuple[int, ...]:
    """A stored row's samples per worker process (empty: one process, or an older store)."""
    return tuple(int(k) for k in row.get("process_samples") or ())


def instructions(row: Row) -> tuple[list[float], float] | None:
    """A stored row's instruction counts per call (one per instrumented process) and their
    within-process spread; None where none were counted."""
    if row.get("instructions_per_call") is None:
        return None
    counts = [float(c) for c in row.get("instruction_counts") or [row["instructions_per_call"]]]
    spread = float(((row.get("extra") or {}).get("instructions") or {}).get("spread") or 0.0)
    return counts, spread


def counted_fields(base: Row | None, contender: Row, min_effect: float) -> dict[str, Any]:
    """The instruction fields of a point's comparison (empty unless both runs counted)."""
    base_side = instructions(base) if base is not None else None
    con_side = instructions(contender)
    if base_side is None or con_side is None or contender["status"] != "ok":
        return {}
    (base_counts, base_spread), (con_counts, con_spread) = base_side, con_side
    if min(base_counts + con_counts) <= 0:
        return {}  # a count of 0 (an empty call): no ratio to take
    found = estimate_counts(base_counts, con_counts, base_spread, con_spread)
    return {
        "base_instructions": statistics.median(base_counts),
        "contender_instructions": statistics.median(con_counts),
        "instructions_ratio": found.ratio,
        "instructions_mark": mark_counts(found, min_effect),
    }


def lockstep_pair(base_run: Mapping[str, Any], contender_run: Mapping[str, Any]) -> bool:
    """True when two stored runs are the two sides of one ``benchbench ab`` run."""
    paired = ((base_run.get("config") or {}).get("ab") or {}).get("paired_run")
    return paired is not None and paired == contender_run.get("id")
