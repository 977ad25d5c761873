"""A stored row read as one side of a comparison: its per-call times, its samples per
process, its instruction counts, the instruction fields of a point's comparison, and
whether two runs are the two sides of one ``ab`` run, and several ``ab`` runs of a side
pooled into one (``bisect``'s looks at a commit)
(:mod:`benchbench.analysis.compare`, claims and the dashboard read rows through these)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchbench.analysis.verdict import estimate_counts, mark_counts
from benchbench.core.stats import pair_log_ratios

Row = Mapping[str, Any]

#: The instruction mark of a point whose runs counted with different counters (``run
#: --counter``): callgrind's counts leave the C allocator out and the CPU's hold it, so
#: their ratio would measure the counters, not the code. Never a regression.
COUNTERS_DIFFER = "counters differ"


def per_call(row: Row) -> list[float]:
    """A stored row's samples as per-call seconds (raw sample / calls per sample)."""
    calls = int(row["calls_per_sample"])
    return [float(s) / calls for s in row["samples_s"]]


def processes(row: Row) -> tuple[int, ...]:
    """A stored row's samples per worker process (empty: one process, or an older store)."""
    return tuple(int(k) for k in row.get("process_samples") or ())


def rounds_of(row: Row) -> list[int] | None:
    """The round of each of a stored row's processes (``extra.processes[k].round``,
    written by ``ab``); None where the row does not say (a ``run``, an older ``ab``)."""
    found = [p.get("round") for p in ((row.get("extra") or {}).get("processes") or [])]
    if not found or any(r is None for r in found) or len(found) != len(processes(row)):
        return None
    return [int(r) for r in found]


def in_rounds(row: Row, rounds: list[int]) -> tuple[list[float], tuple[int, ...]]:
    """A row's per-call times and samples per process, kept to the processes of
    ``rounds`` (in that order): one side of a pair restricted to the rounds both kept."""
    own = rounds_of(row) or []
    times, counts = per_call(row), processes(row)
    starts = [sum(counts[:k]) for k in range(len(counts))]
    kept_times: list[float] = []
    kept_counts: list[int] = []
    for r in rounds:
        k = own.index(r)
        kept_times += times[starts[k] : starts[k] + counts[k]]
        kept_counts.append(counts[k])
    return kept_times, tuple(kept_counts)


def common_rounds(base: Row, contender: Row) -> list[int] | None:
    """The rounds both ``ab`` rows kept, in the base's order; None where a row does not
    name its rounds."""
    base_rounds, con_rounds = rounds_of(base), rounds_of(contender)
    if base_rounds is None or con_rounds is None:
        return None
    kept = set(con_rounds)
    return [r for r in base_rounds if r in kept]


def paired_sides(
    base: Row, contender: Row, rounds: list[int] | None = None
) -> tuple[list[float], tuple[int, ...], list[float], tuple[int, ...]]:
    """Two ``ab`` rows as the per-call times and process counts of the rounds both sides
    kept (``rounds``: :func:`common_rounds`, found when not given), round by round (a
    round lost on one side is dropped from both); rows that do not name their rounds are
    as stored (paired by position when their counts match)."""
    common = rounds if rounds is not None else common_rounds(base, contender)
    if common is None:
        return per_call(base), processes(base), per_call(contender), processes(contender)
    return (*in_rounds(base, common), *in_rounds(contender, common))


def round_log_ratios(base: Row, contender: Row) -> dict[int, float]:
    """A point's per-round log ratios, contender over base, by round: the median of each
    round's pairs of samples taken side by side, as the paired test takes them
    (:func:`~benchbench.core.stats.pair_log_ratios`), for the rounds both sides kept (by
    position where the rows do not name their rounds; empty when their process counts
    differ)."""
    common = common_rounds(base, contender)
    b, b_counts, c, c_counts = paired_sides(base, contender, common)
    if len(b_counts) != len(c_counts):
        return {}
    ratios = pair_log_ratios(b, c, b_counts, c_counts)
    keys = common if common is not None else list(range(len(ratios)))
    return dict(zip(keys, ratios, strict=True))


def instructions(row: Row) -> tuple[list[float], float] | None:
    """A stored row's instruction counts per call (one per instrumented process) and their
    within-process spread; None where none were counted."""
    if row.get("instructions_per_call") is None:
        return None
    counts = [float(c) for c in row.get("instruction_counts") or [row["instructions_per_call"]]]
    spread = float(((row.get("extra") or {}).get("instructions") or {}).get("spread") or 0.0)
    return counts, spread


def counter_of(row: Row) -> str:
    """What counted a stored row's instructions (``extra.instructions.tool``): callgrind
    or pmu; rows from before the hardware tier were counted by callgrind."""
    return str(((row.get("extra") or {}).get("instructions") or {}).get("tool") or "callgrind")


def counted_fields(base: Row | None, contender: Row, min_effect: float) -> dict[str, Any]:
    """The instruction fields of a point's comparison (empty unless both runs counted;
    only the mark :data:`COUNTERS_DIFFER` where they counted with different counters)."""
    base_side = instructions(base) if base is not None else None
    con_side = instructions(contender)
    if base_side is None or con_side is None or contender["status"] != "ok":
        return {}
    if base is not None and counter_of(base) != counter_of(contender):
        return {"instructions_mark": COUNTERS_DIFFER}
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


#: Round numbers of pooled runs (:func:`pooled_runs`): run k's round r becomes
#: ``k * ROUND_STRIDE + r``, so a pair from one run never meets a round of another.
ROUND_STRIDE = 1000


def pooled_runs(runs: Sequence[Sequence[Row]]) -> list[Row]:
    """One side's rows from several ``ab`` runs of the same points (a ``bisect`` step's
    looks, oldest first) as one run over all their rounds, point by point
    (:func:`pooled`), in the order of the last run's rows; the other side pooled from
    its runs in the same order keeps every pair a pair."""
    by_id = [{row["benchmark_id"]: row for row in run} for run in runs]
    return [pooled([found.get(row["benchmark_id"]) for found in by_id]) for row in runs[-1]]


def pooled(rows: Sequence[Row | None]) -> Row:
    """One point's rows from several ``ab`` runs (None: the point is not in that run) as
    one row over all their rounds: per-call samples, samples per process, process
    medians and round numbers concatenated (run k's round r renumbered
    ``k * ROUND_STRIDE + r``), the rest from the last row. A row that is not ``ok`` or
    does not name its rounds is left out; the last row is returned as it is when it is
    one of those, or the only one left."""
    last = rows[-1]
    if last is None:
        raise ValueError("pooled needs the point in the last run")
    usable = [
        (k, row, numbers)
        for k, row in enumerate(rows)
        if row is not None
        and row["status"] == "ok"
        and row["samples_s"]
        and (numbers := rounds_of(row))
    ]
    if len(usable) < 2 or usable[-1][1] is not last:
        return last
    samples: list[float] = []
    counts: list[int] = []
    medians: list[float] = []
    processes_of: list[dict[str, Any]] = []
    for k, row, numbers in usable:
        samples += per_call(row)
        counts += processes(row)
        medians += [float(m) for m in row.get("process_medians_s") or ()]
        for process, number in zip(row["extra"]["processes"], numbers, strict=True):
            processes_of.append({**process, "round": k * ROUND_STRIDE + number})
    return {
        **last,
        "samples_s": samples,
        "calls_per_sample": 1,
        "n": len(samples),
        "median_s": statistics.median(samples),
        "process_samples": counts,
        "process_medians_s": medians if len(medians) == len(counts) else None,
        "extra": {**last["extra"], "processes": processes_of},
    }
