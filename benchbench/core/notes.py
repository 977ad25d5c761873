"""A point's warnings, one per kind: what a table prints and what the store keeps.

A point measured in several processes gets each process's warnings, and the runner's
telemetry warns once per busy process, so the same kind of warning comes back several
times with different figures: ``each call maps ~420 KiB``, ``each call maps ~405 KiB``
(one per process). :func:`merge_warnings` keeps one line per kind:

- a warning that names a process (``... (pid 6750) ...``) is one kind per text before
  its first colon (``another process was busy during the point``); the merged line is
  the busiest process's (the highest ``at N% CPU``; else the first), with ``(and K
  more)`` when K other processes were named;
- other warnings that differ only in their figures are one kind; the merged line has
  each differing figure as its range, lowest-highest (``each call maps ~405-420 KiB
  (99-103 page faults per call)``), and the figures they share as they are.

Warnings that differ in words stay apart: merging ``process 1 failed: out of memory``
with ``process 2 failed: timeout`` would lose a reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The start of the telemetry warning about another process's CPU use, before its colon.
BUSY_PROCESS = "another process was busy during the point"

#: The start of the note about a process replaced because telemetry saw it on a crowded
#: core (never for its time): ``retaken: process 2 of 6 ran on a crowded core (...)``.
RETAKEN = "retaken"
#: The start of the note about a point whose processes fall in two groups, all kept:
#: ``bimodal: 3 processes at 1.21 µs, 2 at 1.83 µs (all kept)``.
BIMODAL = "bimodal"
#: The same for a group of one process: ``outlier: 4 processes at 24.0 µs, 1 at 9.80 ms``.
OUTLIER = "outlier"

#: A process named in a warning: ``(pid 6750)``. A pid is an identity, not a figure.
_PID = re.compile(r"\(pid (\d+)\)")
#: A figure: a decimal number standing alone (not in ``float32``, ``2^16``, ``pid 6750``).
_FIGURE = re.compile(r"(?<![\w.^])(?<!pid )\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.^])")
#: The CPU figure of a busy-process warning: ``at 81% CPU``.
_CPU = re.compile(r"at (\d+(?:\.\d+)?)% CPU")


def names_process(warning: str) -> bool:
    """True for a warning about one other process, named with its pid."""
    return _PID.search(warning) is not None


def merge_warnings(warnings: Sequence[str]) -> list[str]:
    """One line per kind of warning, in the order each kind first appears (the rules are
    the module's docstring). Pure; exact duplicates collapse to one."""
    groups: dict[tuple[str, str], list[str]] = {}
    for text in warnings:
        if names_process(text):
            key = ("process", text.split(":", 1)[0])
        else:
            key = ("figures", _FIGURE.sub("#", text))
        groups.setdefault(key, []).append(text)
    return [
        _busiest(texts) if kind == "process" else _ranges(texts)
        for (kind, _), texts in groups.items()
    ]


def _busiest(texts: list[str]) -> str:
    """The line of the busiest named process, and how many others were named."""
    by_pid: dict[str, str] = {}
    for text in texts:
        pid = _PID.search(text)
        by_pid.setdefault(pid.group(1) if pid else text, text)
    lines = list(by_pid.values())
    worst = max(lines, key=_cpu_percent)  # max keeps the first of equals
    return worst if len(lines) == 1 else f"{worst} (and {len(lines) - 1} more)"


def _cpu_percent(text: str) -> float:
    found = _CPU.search(text)
    return float(found.group(1)) if found else -1.0


def _ranges(texts: list[str]) -> str:
    """Texts equal but for their figures, as one with each differing figure a range."""
    first = texts[0]
    if all(text == first for text in texts):
        return first
    columns = list(zip(*(_FIGURE.findall(text) for text in texts), strict=True))
    pieces = _FIGURE.split(first)
    out = [pieces[0]]
    for figures, piece in zip(columns, pieces[1:], strict=True):
        low, high = min(figures, key=float), max(figures, key=float)
        out.append(low if float(low) == float(high) else f"{low}-{high}")
        out.append(piece)
    return "".join(out)
