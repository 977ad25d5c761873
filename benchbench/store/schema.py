"""The store's tables (SQLAlchemy Core), identical on SQLite and PostgreSQL.

``SCHEMA_VERSION`` history:
  1 — run, environment, benchmark, measurement, telemetry, profile, alert, annotation.
  2 — measurement gains ``max_abs_error``, ``process_samples`` (samples per worker
      process, in the order of ``samples_s``) and ``process_medians_s``.
  3 — measurement gains ``instructions_per_call`` and ``instruction_counts`` (callgrind
      counts per call, one per instrumented process).
  4 — ``ix_measurement_series`` replaces ``ix_measurement_benchmark_run``: the same two
      leading columns plus every measurement column a series reads, so one point's
      history and the regression detector's scan of every series read the index alone
      (~195 bytes an entry on PostgreSQL, ~80 more than the index it replaces), not
      the ~2 KB rows with their samples and documents.
  5 — ``series_judgement``: the regression detector's last verdict on each series and
      metric, with the digest of the values it judged, so a series that has not changed
      since is not judged again (a fleet's 40,000 series take ~36 s of detection).
A store written by a newer benchbench is refused; an older one is migrated forward
by the steps in :mod:`benchbench.store.migrations`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from benchbench.core import columns

SCHEMA_VERSION = 5

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


class UtcDateTime(sa.TypeDecorator[dt.datetime]):
    """A timestamp stored in UTC and read back timezone-aware on both engines.

    SQLite has no timezone type: SQLAlchemy writes the wall-clock digits and reads
    back a naive datetime. Converting to UTC on the way in and tagging UTC on the way
    out makes both engines return the same aware value (same DDL: not a schema change).
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value


Timestamp = UtcDateTime()


def _column(spec: columns.Column) -> sa.Column[Any]:
    """The SQL column of one :mod:`benchbench.core.columns` definition."""
    kind: Any
    if spec.kind == "text":
        kind = sa.String(spec.max_length) if spec.max_length else sa.Text
    else:
        kind = {
            "int": sa.Integer,
            "bigint": sa.BigInteger,
            "float": sa.Float,
            "bool": sa.Boolean,
            "json": JSONType,
            "time": Timestamp,
        }[spec.kind]
    return sa.Column(spec.name, kind, nullable=spec.nullable)


metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
)

environment = sa.Table(
    "environment",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("machine", sa.String(255), nullable=False),
    sa.Column("fields", JSONType, nullable=False),
    sa.Column("info", JSONType, nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
)

run = sa.Table(
    "run",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("group_id", sa.String(36), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("label", sa.String(255)),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", Timestamp, nullable=False),
    sa.Column("finished_at", Timestamp),
    sa.Column("suites", JSONType, nullable=False),
    sa.Column("harness_version", sa.String(32), nullable=False),
    sa.Column("git_sha", sa.String(64)),
    sa.Column("git_branch", sa.String(255)),
    sa.Column("git_dirty", sa.Boolean),
    sa.Column("tags", JSONType, nullable=False),
    sa.Column("config", JSONType, nullable=False),
    sa.Column("environment_id", sa.String(32), sa.ForeignKey("environment.id")),
    sa.Index("ix_run_environment_started", "environment_id", "started_at"),
    sa.Index("ix_run_group", "group_id"),
    sa.Index("ix_run_label", "label"),
)

benchmark = sa.Table(
    "benchmark",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    *(_column(c) for c in columns.BENCHMARK),
    sa.Index("ix_benchmark_workload", "suite", "workload"),
)

#: The measurement columns a series of runs is read with (``Store.history``, the regression
#: detector's ``series_table``), stored in ``ix_measurement_series`` after its key
#: ``(benchmark_id, run_id)`` so that those reads never touch the table's rows: a fleet's
#: year is ~15 million rows of ~2 KB (samples, extra, warm-up), and a history of 365
#: runs then costs 365 index entries next to each other instead of 365 random row reads.
SERIES_COLUMNS: tuple[str, ...] = (
    "status",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "q1_s",
    "q3_s",
    "n",
    "instructions_per_call",
)

measurement = sa.Table(
    "measurement",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(36), sa.ForeignKey("run.id"), nullable=False),
    sa.Column("benchmark_id", sa.String(32), sa.ForeignKey("benchmark.id"), nullable=False),
    *(_column(c) for c in columns.MEASUREMENT),
    sa.UniqueConstraint("run_id", "benchmark_id", name="uq_measurement_run_benchmark"),
    sa.Index("ix_measurement_series", "benchmark_id", "run_id", *SERIES_COLUMNS),
)

telemetry = sa.Table(
    "telemetry",
    metadata,
    sa.Column("measurement_id", sa.Integer, sa.ForeignKey("measurement.id"), primary_key=True),
    sa.Column("data", JSONType, nullable=False),
)

profile = sa.Table(
    "profile",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("environment_id", sa.String(32), sa.ForeignKey("environment.id"), nullable=False),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("data", JSONType, nullable=False),
    sa.Index("ix_profile_environment_device", "environment_id", "device"),
)

alert = sa.Table(
    "alert",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("benchmark_id", sa.String(32), sa.ForeignKey("benchmark.id"), nullable=False),
    sa.Column("environment_id", sa.String(32), sa.ForeignKey("environment.id"), nullable=False),
    sa.Column("last_good_run_id", sa.String(36)),
    sa.Column("first_bad_run_id", sa.String(36), nullable=False),
    sa.Column("rel_change", sa.Float, nullable=False),
    sa.Column("severity", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("detail", JSONType, nullable=False),
    sa.UniqueConstraint("benchmark_id", "environment_id", "first_bad_run_id", name="uq_alert"),
)

#: One row per (benchmark, environment, metric) the detector judged: ``digest`` is
#: :func:`benchbench.analysis.judgements.digest` of the judged values, ``analysis`` the
#: verdict as JSON text (NaN allowed, which PostgreSQL's JSON types refuse). A cache of
#: derived data: no foreign keys to check on the 40,000 rows a fleet's night rewrites.
series_judgement = sa.Table(
    "series_judgement",
    metadata,
    sa.Column("benchmark_id", sa.String(32), primary_key=True),
    sa.Column("environment_id", sa.String(32), primary_key=True),
    sa.Column("metric", sa.String(16), primary_key=True),
    sa.Column("digest", sa.String(32), nullable=False),
    sa.Column("analysis", sa.Text, nullable=False),
    sa.Column("judged_at", Timestamp, nullable=False),
)

annotation = sa.Table(
    "annotation",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("benchmark_id", sa.String(32)),
    sa.Column("environment_id", sa.String(32)),
    sa.Column("run_id", sa.String(36)),
    sa.Column("alert_id", sa.Integer),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
)
