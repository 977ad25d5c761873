"""Exports the CI benchmark trackers read: github-action-benchmark and Bencher (BMF).

Both take one stored run (its row, its environment row and its measurement rows, as
:class:`Store` returns them) and give one entry per measured point (status ``ok``,
as :func:`~benchbench.interchange.exports.measured_points` selects), named by the
point's label (prefixed by its suite when a run has several). The value is the
median per-call time in nanoseconds, the unit both tools chart latencies in, and the
interval is the stored 95 % confidence interval of that median
(:data:`~benchbench.core.stats.CONFIDENCE`), which accounts for the process level
when the point ran in several processes.

- **github-action-benchmark** (``tool: customSmallerIsBetter``): a JSON list of
  ``{name, unit, value, range, extra}``. The action reads ``range`` as a symmetric
  ``"± X"`` (``extractRangeInfo``: ``(\\+-|±)\\s*(\\d.+)``, then ``Number()``); our
  interval is not symmetric, so ``X`` is the larger of its two half-widths (the ``±``
  band then covers the whole interval) and the exact bounds are in ``extra``.
- **Bencher Metric Format**: ``{benchmark: {measure: {value, lower_value,
  upper_value}}}`` with Bencher's built-in ``latency`` measure (nanoseconds), its
  lower and upper values the interval's bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchbench.core.errors import UsageError
from benchbench.core.stats import CONFIDENCE
from benchbench.interchange.exports import Row, measured_points

#: The unit of every value: github-action-benchmark normalises between runs only
#: within ``s``, ``ms``, ``us`` and ``ns`` (``normalizeUnit``), and Bencher's built-in
#: ``latency`` measure is in nanoseconds, so one unit serves both and never changes
#: between nightlies (a unit that followed the magnitude would split a chart at 1 µs).
UNIT = "ns"
NS_PER_S = 1e9
#: Bencher's built-in measure for a time per operation (its slug; unit nanoseconds).
BMF_MEASURE = "latency"


def _interval_ns(row: Row) -> tuple[float, float, float]:
    """(median, CI low, CI high) of one point's per-call time, in nanoseconds."""
    median = float(row["median_s"]) * NS_PER_S
    # A row without an interval (one sample) gets a zero-width one, never a made-up one.
    low = float(row["ci_low_s"] if row.get("ci_low_s") is not None else row["median_s"])
    high = float(row["ci_high_s"] if row.get("ci_high_s") is not None else row["median_s"])
    return median, low * NS_PER_S, high * NS_PER_S


def _unique(points: list[tuple[str, Row]], run: Row) -> list[tuple[str, Row]]:
    # Both formats key a series by its name alone: two points with one name would
    # merge into one chart line (github-action-benchmark) or one metric (Bencher).
    seen: dict[str, Row] = {}
    for name, row in points:
        if name in seen:
            raise UsageError(
                f"run {run['id']}: two measured points are both named {name!r} "
                f"(benchmarks {seen[name]['benchmark_id']} and {row['benchmark_id']}); "
                "these formats key a series by name: export the run as a bundle or CSV"
            )
        seen[name] = row
    return points


def _processes(row: Row) -> int:
    medians = row.get("process_medians_s")
    return len(medians) if medians else 1


def github_action_benchmark(run: Row, env: Row | None, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The ``customSmallerIsBetter`` list github-action-benchmark reads.

    One ``{name, unit, value, range, extra}`` per measured point; ``value`` is the
    median per-call time in :data:`UNIT`, ``range`` ``"± X"`` with X the larger
    half-width of its 95 % interval, ``extra`` the interval's bounds, the samples and
    processes behind it, and the run. Empty when the run measured nothing.
    """
    machine = ((env or {}).get("fields") or {}).get("machine")
    entries = []
    for name, row in _unique(measured_points(run, rows, "github-action-benchmark"), run):
        median, low, high = _interval_ns(row)
        half_width = max(median - low, high - median)
        extra = [
            f"{CONFIDENCE:.0%} CI: {low:.3f} to {high:.3f} {UNIT}",
            f"samples: {row['n']} in {_processes(row)} processes",
            f"run: {run['id']}",
        ]
        if machine:
            extra.append(f"machine: {machine}")
        entries.append(
            {
                "name": name,
                "unit": UNIT,
                "value": median,
                # Fixed-point with three decimals: the action's pattern needs a digit
                # followed by at least one more character ("± 5" would not match),
                # and Number() must parse it (no exponent needed for nanoseconds).
                "range": f"± {half_width:.3f}",
                "extra": "\n".join(extra),
            }
        )
    return entries


def bencher_metric_format(run: Row, env: Row | None, rows: Sequence[Row]) -> dict[str, Any]:
    """The Bencher Metric Format document: ``{name: {"latency": {value, lower, upper}}}``.

    ``value`` is the median per-call time in nanoseconds, ``lower_value`` and
    ``upper_value`` the bounds of its 95 % interval. ``env`` is unused (BMF has no
    place for the machine: Bencher's testbed says it) and kept for the common
    signature of the export builders.
    """
    del env
    document: dict[str, Any] = {}
    for name, row in _unique(measured_points(run, rows, "bmf"), run):
        median, low, high = _interval_ns(row)
        document[name] = {BMF_MEASURE: {"value": median, "lower_value": low, "upper_value": high}}
    return document
