"""The merge: a point's processes, every one of them, into one result; and the paired
merge of ``ab``'s two sides.

The per-process results of a point are merged into one
:class:`~benchbench.core.values.Result` whose ``process_samples`` say which samples came
from which process, and whose interval is the two-level one of
:class:`~benchbench.core.stats.Stats` (:func:`merge`). ``benchbench ab`` merges its two
sides round by round, so that they stay paired (:func:`merge_pair`).

**Stopping.** Within a process the policy's stopping rule runs as always (on its share
of the budget). Between processes: after ``rounds`` rounds a point whose two-level
interval is still wider than the policy's target (``target_rel_ci``) takes another
round, up to ``max_rounds``; the others are done. ``converged`` of the merged result is
that test: every process met its own rule and the two-level interval is within the
target.

**Every process counts.** No process leaves a point's statistics because of its time:
a point whose processes fall in two groups (:func:`~benchbench.core.stats.modes`) keeps
them all, its interval as wide as they make it, and a ``bimodal`` (or ``outlier``, for a
group of one) note says where the groups lie. A process is replaced only on evidence
that does not look at its time: telemetry saw its torch threads outnumber the idle
cores (a crowded core); the runner measures it again and the ``retaken`` note names
it, its samples kept in ``extra.set_aside``. A paired comparison stays paired: a round
lost on one side of ``ab`` leaves both.

This module is pure (no processes); the plan of the rounds is
:mod:`benchbench.run.rounds`, the processes are taken by
:class:`benchbench.run.visits.Visits` (``run``, ``time``) and :mod:`benchbench.run.ab`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from benchbench.core.notes import BIMODAL, OUTLIER, RETAKEN, merge_warnings
from benchbench.core.stats import Stats, modes
from benchbench.core.units import format_time
from benchbench.core.values import Result
from benchbench.measure import gpu

#: The two sides of a pair, as :func:`merge_pair`'s warnings name them.
SIDES = ("base", "head")


def merge(
    rounds: Sequence[Result],
    target_rel_ci: float | None,
    walls_s: Sequence[float] = (),
    why: str | None = None,
    set_aside: Sequence[SetAside] = (),
) -> Result:
    """One result of a point from its per-process results, in round order.

    A point whose first process did not measure it (error or skip) is that result: the
    next rounds are not asked for. A later process that failed is left out, with a
    warning; if none measured it the first failure is the result. Samples are scaled to
    the first process's calls per sample (each process calibrates its own), so per-call
    statistics are exact.

    Every process that measured the point is in the statistics; when their medians
    fall in two groups a ``bimodal`` / ``outlier`` note says so (:func:`groups_note`).
    ``set_aside``: processes the runner replaced by a retake (a crowded core, seen by
    telemetry), named in a ``retaken`` note, their samples kept in ``extra.set_aside``.

    ``converged`` means the reported (two-level) interval met ``target_rel_ci``; when it
    did not, the processes' own ``not converged`` warnings give way to one that says so
    in a person's words (``not converged: ±3.1 % after 5 processes (target ±3 %); budget
    spent``), ``why`` being the reason no more processes were taken. ``walls_s``: each
    process's wall time as the runner saw it, kept in ``extra.processes``.
    """
    first = rounds[0]
    if first.status != "ok" or (len(rounds) == 1 and not set_aside):
        return first
    kept = [k for k, r in enumerate(rounds) if r.status == "ok" and r.samples_s]
    measured = [rounds[k] for k in kept]
    calls = first.calls_per_sample
    samples = _scaled(measured, calls)
    counts = tuple(len(r.samples_s) for r in measured)
    medians = [_median(r) for r in measured]  # each process's, for its notes and extra
    stats = Stats.from_samples(samples, calls, counts)
    target = target_rel_ci if len(counts) > 1 else None  # the two-level test's, if any
    converged = all(bool(r.converged) for r in measured)
    if target is not None:  # the two-level interval decides
        converged = stats.rel_ci_half_width <= target
    warnings = _warnings(rounds, kept, medians, target is not None, set_aside)
    if target is not None and not converged:
        warnings.insert(0, not_converged(stats.rel_ci_half_width, len(counts), target, why))
    extra, warnings = gpu.merge_extra(
        first.extra, warnings, [r.extra for r in measured], stats.median_s
    )
    extra.update(_processes_extra(rounds, kept, medians, walls_s, set_aside))
    reasons = "; ".join(dict.fromkeys(str(r.stop_reason) for r in measured))
    return replace(
        first,
        samples_s=tuple(samples),
        process_samples=counts,
        converged=converged,
        stop_reason=f"{len(counts)} processes: {reasons}",
        warnings=tuple(warnings),
        extra=extra,
        max_rel_error=_largest(r.max_rel_error for r in measured),
        max_abs_error=_largest(r.max_abs_error for r in measured),
        peak_memory_bytes=_largest(r.peak_memory_bytes for r in measured),
        duration_s=_total(r.duration_s for r in [*rounds, *(a.result for a in set_aside)]),
    )


def _scaled(measured: Sequence[Result], calls: int) -> list[float]:
    """Every process's samples scaled to ``calls`` calls per sample (each process
    calibrates its own), so that per-call statistics are exact."""
    return [s * (calls / r.calls_per_sample) for r in measured for s in r.samples_s]


def _warnings(
    rounds: Sequence[Result],
    kept: Sequence[int],
    medians: Sequence[float],
    two_level: bool,
    set_aside: Sequence[SetAside],
) -> list[str]:
    """A merged point's warnings: its measuring processes' own, each failed process named,
    the retakes, and the groups its process ``medians`` (those of ``kept``) fall in."""
    measured = [rounds[k] for k in kept]
    # One note per kind (the busiest other process, page faults as a range), before the
    # failed processes are named; the processes' own "not converged" give way to one that
    # the merge writes.
    warnings = merge_warnings(
        [w for r in measured for w in r.warnings if not (two_level and w.startswith(NOT_CONVERGED))]
    )
    warnings += [
        f"process {k + 1} of {len(rounds)} failed: {r.reason}"
        for k, r in enumerate(rounds)
        if r.status != "ok" or not r.samples_s
    ]
    warnings += _retake_notes(set_aside, len(rounds) + len(set_aside))
    modes_note = groups_note(medians)
    if modes_note is not None:
        warnings.append(modes_note)
    return warnings


def _processes_extra(
    rounds: Sequence[Result],
    kept: Sequence[int],
    medians: Sequence[float],
    walls_s: Sequence[float],
    set_aside: Sequence[SetAside],
) -> dict[str, Any]:
    """What ``extra`` keeps of a point's processes: each measuring one (``processes``,
    with its median of ``medians``), and those a retake replaced (``set_aside``), if any."""
    out: dict[str, Any] = {
        "processes": [
            _process_extra(rounds[k], median, walls_s[k] if k < len(walls_s) else None)
            for k, median in zip(kept, medians, strict=True)
        ]
    }
    if set_aside:
        out["set_aside"] = [_set_aside_extra(a) for a in set_aside]
    return out


def _largest(values: Iterable[Any]) -> Any:
    """The largest of ``values`` that are known (None when none is)."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _retake_notes(set_aside: Sequence[SetAside], total: int) -> list[str]:
    """One line for all of a point's retakes (``process 1-5 of 10``, ``1.8-1.9 cores``)."""
    return merge_warnings(
        [
            f"{RETAKEN}: process {a.process} of {total} ran on a crowded core ({a.why}); "
            "a fresh process took its place"
            for a in set_aside
        ]
    )


def _process_extra(result: Result, median_s: float, wall_s: float | None) -> dict[str, Any]:
    """What ``extra.processes`` keeps of one process that measured the point."""
    return {
        "calls_per_sample": result.calls_per_sample,
        "samples": len(result.samples_s),
        "median_s": median_s,
        "stop_reason": result.stop_reason,
        **({"wall_s": wall_s} if wall_s is not None else {}),
        **({"cost": result.extra["cost"]} if "cost" in result.extra else {}),
        # A compile variant compiles afresh in every process: each one's compile time.
        **({"compile_s": result.extra["compile_s"]} if "compile_s" in result.extra else {}),
    }


def _set_aside_extra(aside: SetAside) -> dict[str, Any]:
    """What ``extra.set_aside`` keeps of a process a retake replaced."""
    return {
        "process": aside.process,
        "why": aside.why,
        "median_s": _median(aside.result) if aside.result.samples_s else None,
        "calls_per_sample": aside.result.calls_per_sample,
        "samples_s": list(aside.result.samples_s),
    }


@dataclass(frozen=True)
class SetAside:
    """A process of a point replaced by a later one (1-based ``process`` in the point's
    order) and why, in words (``2 torch threads but only 1 of 2 cores were idle``)."""

    process: int
    result: Result
    why: str


def _median(result: Result) -> float:
    return Stats.from_samples(result.samples_s, result.calls_per_sample).median_s


def groups_note(medians: Sequence[float]) -> str | None:
    """The note of a point whose process medians fall in two groups
    (:func:`~benchbench.core.stats.modes`), every process kept: ``bimodal: 3 processes at
    1.21 µs, 2 at 1.83 µs (all kept)``, or for a group of one ``outlier: 1 process at
    9.80 ms, 4 at 24.0 µs (all kept)``; None when they do not."""
    found = modes(medians)
    if found is None:
        return None
    low, high = ([medians[k] for k in group] for group in found)
    word = OUTLIER if min(len(low), len(high)) == 1 else BIMODAL
    # The bigger group first (the lower on a tie): what most processes saw.
    first, second = (low, high) if len(low) >= len(high) else (high, low)
    return (
        f"{word}: {len(first)} process{'es' if len(first) > 1 else ''} at "
        f"{format_time(float(np.median(first)))}, {len(second)} at "
        f"{format_time(float(np.median(second)))} (all kept)"
    )


#: How every ``not converged`` warning starts (the engine's per process, the merge's).
NOT_CONVERGED = "not converged"


def not_converged(half_width: float, processes: int, target: float, why: str | None) -> str:
    """``not converged: ±3.1 % after 5 processes (target ±3 %); budget spent``."""
    text = (
        f"{NOT_CONVERGED}: ±{100 * half_width:.1f} % after {processes} processes "
        f"(target ±{100 * target:g} %)"
    )
    return f"{text}; {why}" if why else text


def wants_more(results: Sequence[Result], target_rel_ci: float | None) -> bool:
    """True when a merged point's processes disagree beyond the target precision."""
    if target_rel_ci is None:
        return False
    for result in results:
        if result.status != "ok" or len(result.process_samples) < 2:
            continue
        stats = Stats.from_samples(
            result.samples_s, result.calls_per_sample, result.process_samples
        )
        if not math.isfinite(stats.rel_ci_half_width) or stats.rel_ci_half_width > target_rel_ci:
            return True
    return False


def _total(values: Any) -> float | None:
    known = [float(v) for v in values if v is not None]
    return sum(known) if known else None


def merge_pair(
    base: Sequence[Result], head: Sequence[Result], target_rel_ci: float | None
) -> list[Result]:
    """A point's two sides merged over the rounds both measured, round by round: a round
    that failed on either side is dropped from both (and named on both), so process k
    of one side always sits beside process k of the other, each process keeping its
    round number (``extra.processes[k].round``) for the paired test. With no round
    whole on both sides, each side is its own merge (its failure)."""
    sides = (list(base), list(head))
    whole = [
        k
        for k in range(len(base))
        if all(side[k].status == "ok" and side[k].samples_s for side in sides)
    ]
    if not whole:
        return [merge(side, target_rel_ci) for side in sides]
    lost = [
        f"round {k + 1} of {len(base)} dropped from both sides: {SIDES[s]} "
        f"{sides[s][k].status}: {sides[s][k].reason}"
        for k in range(len(base))
        if k not in whole
        for s in (0, 1)
        if sides[s][k].status != "ok" or not sides[s][k].samples_s
    ]
    out = []
    for side in sides:
        merged = merge([side[k] for k in whole], target_rel_ci)
        extra = dict(merged.extra)
        if "processes" in extra:
            extra["processes"] = [
                {**process, "round": whole[j] + 1} for j, process in enumerate(extra["processes"])
            ]
        out.append(replace(merged, extra=extra, warnings=(*merged.warnings, *lost)))
    return out
