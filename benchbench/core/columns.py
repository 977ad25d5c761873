"""The columns of a stored result, defined once.

Every list of result columns derives from this module: the store's tables
(:mod:`benchbench.store.schema`) and rows (:mod:`benchbench.store.rows`), the
DataFrame of :meth:`Store.dataframe` and the CSV export, the ``--json`` results of
:mod:`benchbench.views.results`, the dashboard contract and the run bundle.

:data:`BENCHMARK` and :data:`MEASUREMENT` list the columns of those two tables in
their stored order (adding one here changes the schema and needs a migration in
:mod:`benchbench.store.migrations`; a migration appends, so new columns come last).
Each :class:`Column` says what the value is (``kind``, ``unit``) and where it comes
from (``origin``):

- ``point``: the measured point (suite, workload, ..., the benchmark's code version);
- ``result``: the :class:`~benchbench.core.values.Result` attribute of the same name;
- ``stat``: the :class:`~benchbench.core.stats.Stats` field of the same name, derived
  from the raw samples (:data:`STATISTICS`);
- ``rate``: the per-call work column ``per_call`` divided by the median time;
- ``store``: set by the store when the row is written.

The named selections below (:data:`MEDIAN_CI`, :data:`QUARTILES`, :data:`RATES` ...)
are what the tables and documents compose their column lists from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["int", "bigint", "float", "text", "bool", "json", "time"]
Origin = Literal["point", "result", "stat", "rate", "store"]


@dataclass(frozen=True)
class Column:
    """One stored value: name, kind of value, unit, origin, and whether it may be null.

    ``max_length`` bounds a short ``text`` (a status, a device name); without it a
    text is unbounded. ``per_call`` names, for a ``rate``, the per-call work it divides.
    """

    name: str
    kind: Kind
    origin: Origin
    unit: str = ""
    nullable: bool = True
    max_length: int | None = None
    per_call: str | None = None


#: Statistics of the per-call times, in stored order: the fields of ``Stats``.
STATISTICS: tuple[str, ...] = (
    "n",
    "median_s",
    "mean_s",
    "min_s",
    "max_s",
    "q1_s",
    "q3_s",
    "stdev_s",
    "ci_low_s",
    "ci_high_s",
)
#: The headline (median per-call time) and its confidence interval.
MEDIAN_CI: tuple[str, ...] = ("median_s", "ci_low_s", "ci_high_s")
#: The band plots and the dashboard draw around the median.
QUARTILES: tuple[str, ...] = ("q1_s", "q3_s")
#: The remaining time statistics, shown in the DataFrame and the CSV export only.
SPREAD: tuple[str, ...] = ("mean_s", "min_s", "max_s", "stdev_s")


#: Statistics stored as JSON lists: one per-call median per worker process.
PROCESS_STATISTICS: tuple[str, ...] = ("process_medians_s",)


def _stat(name: str) -> Column:
    # n counts samples; every other statistic is a per-call time in seconds.
    if name == "n":
        return Column("n", "int", "stat")
    return Column(name, "float", "stat", unit="s")


#: The ``benchmark`` table's columns after its ``id``: what identifies a point.
BENCHMARK: tuple[Column, ...] = (
    Column("suite", "text", "point", nullable=False, max_length=255),
    Column("workload", "text", "point", nullable=False, max_length=255),
    Column("variant", "text", "point", nullable=False, max_length=255),
    Column("device", "text", "point", nullable=False, max_length=32),
    Column("dtype", "text", "point", nullable=False, max_length=32),
    Column("size", "bigint", "point", unit="elements", nullable=False),
    Column("shape", "json", "point", nullable=False),
    Column("params", "json", "point", nullable=False),
    Column("code_version", "int", "point", nullable=False),
)

#: The ``measurement`` table's columns after ``id``, ``run_id`` and ``benchmark_id``.
MEASUREMENT: tuple[Column, ...] = (
    Column("status", "text", "result", nullable=False, max_length=16),
    Column("reason", "text", "result"),
    *(_stat(name) for name in STATISTICS),
    Column("bytes_per_call", "float", "result", unit="bytes"),
    Column("flop_per_call", "float", "result", unit="flop"),
    Column("items_per_call", "float", "result", unit="items"),
    Column("bytes_per_s", "float", "rate", unit="bytes/s", per_call="bytes_per_call"),
    Column("flop_per_s", "float", "rate", unit="flop/s", per_call="flop_per_call"),
    Column("items_per_s", "float", "rate", unit="items/s", per_call="items_per_call"),
    # The reference check's largest |actual - expected| / max(|expected|, floor), the
    # floor being the dtype's default atol (1e-5; 1e-7 in float64): relative error
    # that stays finite where outputs cross zero (benchbench.measure.accuracy).
    Column("max_rel_error", "float", "result"),
    Column("duration_s", "float", "result", unit="s"),
    Column("samples_s", "json", "result", unit="s", nullable=False),
    Column("calls_per_sample", "int", "result", nullable=False),
    Column("warmup", "json", "result", nullable=False),
    Column("converged", "bool", "result"),
    Column("stop_reason", "text", "result"),
    Column("cache_mode", "text", "result", nullable=False, max_length=16),
    Column("threads", "int", "result"),
    Column("peak_memory_bytes", "bigint", "result", unit="bytes"),
    Column("warnings", "json", "result", nullable=False),
    Column("extra", "json", "result", nullable=False),
    Column("created_at", "time", "store", nullable=False),
    # Schema version 2: the reference check's absolute error, and the process level.
    # max_abs_error: the largest |actual - expected| over the output's elements.
    Column("max_abs_error", "float", "result"),
    Column("process_samples", "json", "result"),
    Column("process_medians_s", "json", "stat", unit="s"),
    # Schema version 3: instruction counts under callgrind (``run --metric instructions``).
    # instructions_per_call: the headline count, the median of the processes' counts;
    # instruction_counts: each instrumented process's count per call, in order.
    Column("instructions_per_call", "float", "result", unit="instructions"),
    Column("instruction_counts", "json", "result", unit="instructions"),
)

#: Point columns shown beside a result (the code version only splits history).
POINT_KEYS: tuple[str, ...] = tuple(c.name for c in BENCHMARK if c.name != "code_version")
#: Measurement columns copied from a ``Result`` as they are, in stored order.
RESULT_FIELDS: tuple[str, ...] = tuple(c.name for c in MEASUREMENT if c.origin == "result")
#: Throughputs, each the work per call over the median time.
RATES: tuple[str, ...] = tuple(c.name for c in MEASUREMENT if c.origin == "rate")
#: ``(work per call, rate)`` pairs, e.g. ``("bytes_per_call", "bytes_per_s")``.
THROUGHPUTS: tuple[tuple[str, str], ...] = tuple(
    (c.per_call, c.name) for c in MEASUREMENT if c.origin == "rate" and c.per_call
)

COLUMNS: dict[str, Column] = {c.name: c for c in (*BENCHMARK, *MEASUREMENT)}
