"""What a run's table says in a word per row and once under it.

A point's warnings are sentences (``2 torch threads but only 1 of 2 cores were idle during
the point (other processes used 1.3 cores): ...``), kept whole in the store and in
``--format json``. The table gives each a word or two (:func:`note_word`: ``busy core``,
``retaken``, ``< 1 ms sample``) and says the details once, in its footer
(:func:`footer`): the other processes that were busy, each named once with the points
they were busy during; the points measured again; and a one-line verdict on the run
(how many points are within ±3 % and ±10 %, how many are unstable, and what to do next).

**Unstable.** No interval wider than ±:data:`UNSTABLE` is printed: such a row reads
``unstable`` with the range of its processes' medians (``24.0 µs–19.8 ms, 3 proc.``) and
the cause when one is known.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchbench.analysis.rerun import Shift
from benchbench.core.notes import (
    BIMODAL,
    BUSY_PROCESS,
    OUTLIER,
    RETAKEN,
    merge_warnings,
    names_process,
)
from benchbench.core.units import TIME_UNITS, format_size, format_time
from benchbench.store import Store
from benchbench.views.tables import wrap_note

#: Relative half-width beyond which a row prints ``unstable`` instead of its interval.
UNSTABLE = 0.5
#: The widths the verdict counts points within.
WITHIN = (0.03, 0.10)
#: Points named on a footer line before ``and K more``; unstable ones, with their range.
NAMED, UNSTABLE_NAMED = 6, 4

#: The word for each kind of warning, by how its sentence starts (or what it holds).
_WORDS: tuple[tuple[str, str], ...] = (
    (RETAKEN, "retaken"),
    (BIMODAL, "bimodal"),
    (OUTLIER, "outlier process"),
    (BUSY_PROCESS, "neighbour"),
    ("sample < 1 ms", "< 1 ms sample"),
    ("noisy", "noisy"),
    ("each call maps", "page faults"),
    ("CPU frequency dropped", "clock drop"),
    ("output holds", "NaN/Inf output"),
    ("above the measured ceiling", "above ceiling"),
)
_THREADS = re.compile(r"^\d+ torch threads? but ")
_GPU = re.compile(r"^GPU \d+ (clocks throttled|is also used)")
_FAILED = re.compile(r"^process \d+ of \d+ failed")
#: The name, pid and mean CPU of a busy-process warning.
_BUSY = re.compile(r": (?P<name>.*) \(pid (?P<pid>\d+)\) at (?P<cpu>\d+(?:\.\d+)?)% CPU")


def note_word(warning: str) -> str | None:
    """A warning's word or two for the table's notes; None for ``not converged``, which
    the footer's verdict counts instead (the interval column already shows the width)."""
    if warning.startswith("not converged"):
        return None
    if _THREADS.match(warning):
        return "busy core"
    if _FAILED.match(warning):
        return "process failed"
    gpu = _GPU.match(warning)
    if gpu:
        return "GPU throttled" if gpu.group(1).startswith("clocks") else "GPU shared"
    for start, word in _WORDS:
        if warning.startswith(start):
            return word
    if names_process(warning):
        return "another process"
    return warning.split(":", 1)[0].split(" (", 1)[0]


def rel_half_width(row: Mapping[str, Any]) -> float | None:
    """The interval's half-width over the median; None when the row has none."""
    median, low, high = row.get("median_s"), row.get("ci_low_s"), row.get("ci_high_s")
    if not median or low is None or high is None:
        return None
    return (high - low) / (2 * median)


def unstable(row: Mapping[str, Any]) -> bool:
    """True when the row's interval is wider than ±:data:`UNSTABLE` (or unbounded)."""
    width = rel_half_width(row)
    return width is not None and not width <= UNSTABLE


def process_range(row: Mapping[str, Any]) -> str:
    """``24.0 µs–19.8 ms over 3 processes``: the range of the processes' medians where
    they disagree (by :data:`DISAGREE` or more), else of the samples (the processes
    agree, their samples do not)."""
    medians = [float(m) for m in row.get("process_medians_s") or []]
    count = max(1, len(medians))
    where = f"over {count} processes" if count > 1 else "in 1 process"
    if count > 1 and min(medians) > 0 and max(medians) / min(medians) >= DISAGREE:
        return f"{_span(min(medians), max(medians))} {where}"
    return f"samples {_span(row.get('min_s'), row.get('max_s'))} {where}"


def range_cell(row: Mapping[str, Any]) -> str:
    """The interval column of an unstable row: the range alone (``24 µs–19.8 ms``)."""
    text = process_range(row)
    return text.removeprefix("samples ").split(" over ", 1)[0].split(" in 1 ", 1)[0]


def _span(low: float | None, high: float | None) -> str:
    """``24 µs–19.8 ms``; in the upper end's unit alone where both ends share it
    (``9.59–23.6 µs``) or the lower end reads at least 0.1 of it (``0.39–1.19 ms``, not
    ``390 µs–1.19 ms``), so that an unstable row's interval cell widens the table no more
    than it must: two units made a quiet run's table 162 characters wide (160 at most)."""
    first, last = format_time(low), format_time(high)
    number, _, unit = first.partition(" ")
    if unit and last.endswith(f" {unit}"):
        return f"{number}–{last}"
    scale = TIME_UNITS.get(last.rpartition(" ")[2])
    if low is not None and scale is not None and 0.1 <= low / scale < 1:
        return f"{low / scale:.2f}–{last}"
    return f"{first}–{last}"


#: Process medians this far apart (max / min) are the cause of an unstable interval.
DISAGREE = 1.5
#: Words a row's notes hold at most; the footer counts the others.
MAX_WORDS = 2
#: The order in which words take a row's few places: what changes the number first.
PRIORITY = (
    "unstable",
    "bimodal",
    "outlier process",
    "retaken",
    "busy core",
    "process failed",
    "NaN/Inf output",
    "above ceiling",
    "clock drop",
    "GPU throttled",
    "GPU shared",
    "page faults",
    "< 1 ms sample",
    "neighbour",
    "noisy",
)


def row_words(row: Mapping[str, Any], words: Sequence[str]) -> list[str]:
    """Every word of an ok row, ``unstable`` first when it is, in :data:`PRIORITY` order."""
    kept = list(dict.fromkeys(w for w in words if w))
    if unstable(row):
        kept.insert(0, "unstable")
    rank = {word: k for k, word in enumerate(PRIORITY)}
    return sorted(kept, key=lambda w: rank.get(w, len(PRIORITY)))


#: The notes column's width; a longer pair of words takes a line each (154 wide before).
NOTES_WIDTH = 26


def notes_cell(row: Mapping[str, Any], words: Sequence[str]) -> str:
    """An ok row's first :data:`MAX_WORDS` words (:func:`row_words`), one a line where
    they do not fit in :data:`NOTES_WIDTH`."""
    kept = row_words(row, words)[:MAX_WORDS]
    return ", ".join(kept) if len(", ".join(kept)) <= NOTES_WIDTH else ",\n".join(kept)


def threads_phrase(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """``1 thread`` / ``2 threads`` / ``1-2 threads``: the CPU points' torch threads."""
    counts = sorted(
        {
            int(r["threads"])
            for r in rows
            if r.get("status") == "ok" and r.get("device") == "cpu" and r.get("threads")
        }
    )
    if not counts:
        return None
    text = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"{text} thread{'' if counts == [1] else 's'}"


def _label(row: Mapping[str, Any]) -> str:
    """``sum torch.sum 2^18``, ``matmul torch.matmul 128x128``."""
    shape = row.get("shape") or []
    size = "x".join(map(str, shape)) if len(shape) > 1 else format_size(int(row["size"]))
    return f"{row['workload']} {row['variant']} {size}"


def _named(labels: Sequence[str], named: int = NAMED) -> str:
    more = f" and {len(labels) - named} more" if len(labels) > named else ""
    return ", ".join(labels[:named]) + more


def run_footer(
    run: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    previous: Sequence[Mapping[str, Any]] | None,
    shift: Shift | None = None,
) -> list[str]:
    """:func:`footer` of a stored run: its target from its config, and the shift from
    ``previous``, the rows of the run before it of the same suites on the same
    environment (:class:`Shown`), when there is one; first, for one side of an ``ab``
    run, :func:`ab_side_line`."""
    config = run.get("config") or {}
    policy = config.get("policy") or {}
    target = policy.get("target_rel_ci")
    lines = footer(rows, float(target) if target else None, previous, shift)
    side = config.get("ab") or {}
    if not side.get("paired_run") or not run.get("id"):
        return lines
    own, other = str(run["id"]), str(side["paired_run"])
    base, head = (other, own) if side.get("side") == "head" else (own, other)
    return [*wrap_note(ab_side_line(str(side.get("side") or "base"), base, head)), *lines]


@dataclass(frozen=True)
class Shown:
    """A run as its table shows it (:func:`shown`)."""

    #: The rows, each several-process interval widened by the run-to-run factor.
    rows: list[dict[str, Any]]
    #: What the intervals hold, for the title: ``95% CI incl. run-to-run (...)``.
    words: str
    #: The factor for ``--format json`` (``run_to_run``), or None.
    rerun: dict[str, Any] | None
    #: The rows of the run before it (same suites and environment), for the drift line.
    previous: Sequence[Mapping[str, Any]] | None
    #: What every point moved by together since that run, judged as ``compare`` judges it.
    shift: Shift | None = None


def shown(store: Store, run: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> Shown:
    """A run's rows as its table shows them, the run-to-run factor read from the runs
    before it (:mod:`benchbench.analysis.rerun`), which are read once: the newest of
    them is also the footer's previous run."""
    from benchbench.analysis import rerun as rr
    from benchbench.analysis.calibration import calibration_of
    from benchbench.analysis.verdict import ALPHA, MIN_EFFECT

    history = rr.history_runs(store, run)
    read, now = [rr.points(r) for r in history], rr.points(rows)  # once for factor and shift
    rerun = rr.factor_of(read, now, calibration=calibration_of(store, run, rows))
    previous = history[-1] if history else None
    shift = rr.apart(read, now, ALPHA, MIN_EFFECT)[1] if previous else None
    words = f"95% CI {rr.scope(rerun)}"
    return Shown(rr.widened(rows, rerun), words, rr.rerun_dict(rerun), previous, shift)


def ab_side_line(side: str, base: str, head: str) -> str:
    """What an ``ab`` side's own intervals are, and where its verdict is. Each side's
    interval comes from this run's processes alone, and on a shared machine a later
    ``ab`` run's median lies outside it far more often than one time in twenty
    (BENCHMARKS.md, "`ab` beside the neighbour, and whether its intervals hold a rerun",
    2026-11-29: 47-74 % of points held, ±6-7 % wide); the paired ratio, whose interval
    held identical code's 1 at 92-93 % of points, is what ``ab`` decides on."""
    return (
        f"ab {side} side (base {base[:8]}, head {head[:8]}): ±95% CI within this run only, "
        "another ab run's medians often lie outside it; ab decides on the paired ratio: "
        f"`benchbench compare {base[:8]} {head[:8]}`"
    )


def words_of(row: Mapping[str, Any]) -> list[str]:
    """An ok row's words, every one (:func:`row_words` of its merged warnings)."""
    merged = merge_warnings(list(row.get("warnings") or []))
    return row_words(row, [note_word(w) or "" for w in merged])


def footer(
    rows: Sequence[Mapping[str, Any]],
    target: float | None = None,
    previous: Sequence[Mapping[str, Any]] | None = None,
    shift: Shift | None = None,
) -> list[str]:
    """The lines under a run's table: busy processes, retaken and unstable points, the
    words the rows had no room for, the verdict (and the shift from ``previous``, the
    rows of the run before it of the same suites on this machine: :func:`drift_line`)."""
    ok = [r for r in rows if r.get("status") == "ok"]
    words = [words_of(r) for r in ok]
    lines: list[str] = []
    busy = _busy_processes(ok)
    if busy:
        lines.append("busy beside the run: " + "; ".join(busy))
    retaken = [_label(r) for r, w in zip(ok, words, strict=True) if "retaken" in w]
    if retaken:
        lines.append(
            f"retaken ({len(retaken)} point(s): a process telemetry saw on a crowded core "
            f"measured again, its place taken by the retake): {_named(retaken)}"
        )
    split = [_label(r) for r, w in zip(ok, words, strict=True) if "bimodal" in w]
    if split:
        lines.append(
            f"bimodal ({len(split)} point(s): processes in two groups, all kept, the "
            f"interval as wide as they make it): {_named(split)}"
        )
    crowded = [_label(r) for r, w in zip(ok, words, strict=True) if "busy core" in w]
    if crowded:
        lines.append(
            f"busy core ({len(crowded)} point(s) kept a process with more torch threads than "
            f"idle cores): {_named(crowded)}"
        )
    shaky = [
        f"{_label(r)}: {process_range(r)}" + (f" ({', '.join(w[1:3])})" if len(w) > 1 else "")
        for r, w in zip(ok, words, strict=True)
        if w[:1] == ["unstable"]
    ]
    if shaky:
        lines.append(
            f"unstable ({len(shaky)} point(s), interval wider than ±{100 * UNSTABLE:g} %): "
            + _named(shaky, UNSTABLE_NAMED)
        )
    unshown = Counter(word for w in words for word in w[MAX_WORDS:])
    if unshown:
        counts = ", ".join(f"{word} at {n}" for word, n in unshown.most_common())
        lines.append(
            f"also ({MAX_WORDS} notes a row at most): {counts}; every warning whole: --format json"
        )
    lines.append(verdict(ok, target))
    drift = drift_line(ok, previous, shift) if previous else None
    if drift:
        lines.append(drift)
    return [part for line in lines for part in wrap_note(line)]


#: Other busy processes the footer names, busiest (most points) first.
BUSY_NAMED = 4


def _busy_processes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The busy other processes, each once, those beside most points first: ``python3
    (pid 6750) at 40-95% CPU during 12 points, 03:01:10-03:01:55``, then ``and K more``."""
    seen: dict[tuple[str, str], list[tuple[float, Any]]] = {}
    for row in rows:
        for warning in row.get("warnings") or []:
            found = _BUSY.search(warning) if warning.startswith(BUSY_PROCESS) else None
            if found:
                key = (found["name"], found["pid"])
                seen.setdefault(key, []).append((float(found["cpu"]), row.get("created_at")))
    ranked = sorted(seen.items(), key=lambda kv: -len(kv[1]))
    out = []
    for (name, pid), hits in ranked[:BUSY_NAMED]:
        cpus = [c for c, _ in hits]
        low, high = min(cpus), max(cpus)
        cpu = f"{low:.0f}%" if round(low) == round(high) else f"{low:.0f}-{high:.0f}%"
        out.append(f"{name} (pid {pid}) at {cpu} CPU during {len(hits)} point(s){_when(hits)}")
    if len(ranked) > BUSY_NAMED:
        out.append(f"and {len(ranked) - BUSY_NAMED} more process(es) at fewer points")
    return out


def _when(hits: Sequence[tuple[float, Any]]) -> str:
    """``, 03:01:10-03:01:55``: when the points a process was busy beside were stored."""
    times = sorted(t for _, t in hits if hasattr(t, "strftime"))
    if not times:
        return ""
    first, last = times[0].strftime("%H:%M:%S"), times[-1].strftime("%H:%M:%S")
    return f", {first}" if first == last else f", {first}-{last}"


def verdict(rows: Sequence[Mapping[str, Any]], target: float | None = None) -> str:
    """``verdict: 40 of 53 points within ±3 %, 50 within ±10 %, 2 unstable; next: ...``."""
    widths = [w for r in rows if (w := rel_half_width(r)) is not None]
    if not widths:
        return "verdict: no interval to judge (one process per point: --rounds 3 gives one)"
    within = [sum(1 for w in widths if w <= limit) for limit in WITHIN]
    wild = sum(1 for r in rows if unstable(r))
    text = (
        f"verdict: {within[0]} of {len(widths)} points within ±{100 * WITHIN[0]:g} %, "
        f"{within[1]} within ±{100 * WITHIN[1]:g} %, {wild} unstable"
    )
    if target is not None and target not in WITHIN:
        text += f", {sum(1 for w in widths if w <= target)} within the target ±{100 * target:g} %"
    return f"{text}; next: {next_step(rows, widths, wild)}"


def next_step(rows: Sequence[Mapping[str, Any]], widths: Sequence[float], wild: int) -> str:
    """What to do about a run's precision, in a command or two."""
    steps = []
    threads = [int(r["threads"]) for r in rows if r.get("threads")]
    crowded = any(_THREADS.match(w) for r in rows for w in r.get("warnings") or [])
    if crowded and threads and max(threads) > 1:
        steps.append("--threads 1 (threads outnumbered the idle cores)")
    loose = sum(1 for w in widths if w > WITHIN[1])
    if wild or loose > 0.2 * len(widths):
        steps.append("--rounds 6 (more processes per point), on a quieter machine")
    steps.append("to compare two builds, `benchbench ab` (interleaved: it sees smaller changes)")
    return "; ".join(steps)


def drift_line(
    rows: Sequence[Mapping[str, Any]],
    previous: Sequence[Mapping[str, Any]],
    shift: Shift | None = None,
) -> str | None:
    """What every point moved by together since the previous run of the same points, and
    how many of this run's intervals hold the previous median; None with no common point.
    ``shift``: the two runs' shared shift as ``compare`` judges it (:func:`~benchbench.
    analysis.rerun.shared_shift`, against the earlier runs' shifts); without it (fewer
    than ten points of several processes) the median of the points' ratios."""
    before = {_key(r): r for r in previous if r.get("status") == "ok" and r.get("median_s")}
    logs: list[float] = []
    held = 0
    for row in rows:
        old = before.get(_key(row))
        if old is None or not row.get("median_s"):
            continue
        logs.append(math.log(float(row["median_s"]) / float(old["median_s"])))
        low, high = row.get("ci_low_s"), row.get("ci_high_s")
        held += low is not None and high is not None and low <= old["median_s"] <= high
    if not logs:
        return None
    run = str(previous[0].get("run_id") or "")[:8]
    moved = (
        shift.line
        if shift is not None
        else f"every point x{math.exp(float(np.median(logs))):.3f} together (median of "
        f"{len(logs)}; too few points of several processes to judge)"
    )
    text = f"between runs, from run {run}: {moved}; this run's interval holds its median at "
    text += f"{held} of {len(logs)}"
    if held < 0.7 * len(logs):
        text += (
            ": the machine moves runs beyond their intervals; compare runs with "
            "`benchbench ab` or repeat them"
        )
    return text


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    params = row.get("params") or {}
    return (
        row.get("suite"),
        row.get("workload"),
        row.get("variant"),
        row.get("dtype"),
        row.get("device"),
        row.get("size"),
        tuple(sorted((str(k), str(v)) for k, v in params.items())),
    )
