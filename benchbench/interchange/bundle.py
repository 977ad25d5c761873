"""Run bundles: one run as one self-contained JSON document, to move runs between stores.

A fleet's nightly jobs each export their run (``benchbench export RUN --format
bundle -o shard3.json.gz``) and one job imports them all into the shared store
(``benchbench import shard*.json.gz``). Import is idempotent point by point (a point
already in the store is left as it is; a run already there gains the points it lacks,
as when a run spooled them while its store's server was away) and transactional: every
file is read and validated before anything is written, and all of them are written in
one transaction, so a bad file leaves the store exactly as it was.

A bundle is data from elsewhere and is not trusted: every field is type- and
range-checked, the environment and benchmark ids are recomputed from what they hash,
every measurement must refer to a benchmark of the bundle, and the statistics are
derived again from the raw samples (a bundle whose median disagrees is rejected).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.core.columns import BENCHMARK, MEDIAN_CI, RESULT_FIELDS
from benchbench.core.errors import BundleError
from benchbench.core.values import Point, Result
from benchbench.interchange.validate import Checker
from benchbench.machine.environment import Environment
from benchbench.store import schema as t
from benchbench.store.store import Store, benchmark_row_for, measurement_row_for

#: Bundle format version. History:
#:   1 — (benchbench 0.1) run, environment, benchmarks, measurements with raw samples,
#:       telemetry per measurement. Statistics are written for readers but
#:       recomputed from the samples on import.
#: A reader refuses a newer version; an older one is upgraded on read when a later
#: version changes the layout (none yet).
BUNDLE_VERSION = 1
FORMAT_NAME = "benchbench-bundle"

# The bundle's keys are the stored columns (benchbench.core.columns and the run table):
# a bundle is a run's rows. Statistics are written for readers (n and the median with
# its CI) but derived again from the samples on import.
_RUN_KEYS = tuple(t.run.columns.keys())
_BENCHMARK_KEYS = ("id", *(c.name for c in BENCHMARK))
_STAT_KEYS = ("n", *MEDIAN_CI)
_MEASUREMENT_KEYS = ("benchmark_id", *RESULT_FIELDS, "created_at")


@dataclass(frozen=True)
class Bundle:
    """A validated bundle: the run row, its environment and its results."""

    path: str
    run: dict[str, Any]
    environment: Environment
    results: tuple[Result, ...]
    created_at: tuple[dt.datetime, ...]


# -- export --------------------------------------------------------------------------------


def _iso(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)  # SQLite returns naive UTC
        return value.isoformat()
    return value


def _finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: non-finite floats become null, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def export_bundle(store: Store, run_ref: str) -> dict[str, Any]:
    """The bundle document of one stored run (RUN: id, prefix, label or ``latest``)."""
    run = store.resolve_run(run_ref)
    env = store.environment(run["environment_id"]) if run.get("environment_id") else None
    if env is None:
        raise BundleError(f"run {run['id']} has no stored environment; it cannot be exported")
    rows = store.measurements(run["id"])
    telemetry = store.telemetry(run["id"])
    for row in rows:
        row["telemetry"] = telemetry.get(row["id"])
    return _document(run, env, rows)


def bundle_of(
    run: Mapping[str, Any],
    env: Environment,
    results: Sequence[Result],
    created_at: Sequence[dt.datetime],
) -> dict[str, Any]:
    """The bundle document of run row ``run`` holding ``results`` (measured at
    ``created_at``): the rows a store would hold, built by the store's own code, for a
    run whose store cannot take them now (:mod:`benchbench.interchange.spool`)."""
    rows = []
    for result, stamp in zip(results, created_at, strict=True):
        benchmark = benchmark_row_for(result)
        row = measurement_row_for(run["id"], benchmark["id"], result, None, stamp)
        rows.append({**benchmark, **row, "telemetry": result.telemetry})
    environment = {"id": env.id, "machine": env.machine, "fields": env.fields, "info": env.info}
    return _document(run, environment, rows)


def _document(
    run: Mapping[str, Any], env: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A bundle of the run row, its environment row and its measurement rows (joined with
    their benchmark's columns, ``telemetry`` the point's document or None)."""
    benchmarks: dict[str, dict[str, Any]] = {}
    measurements = []
    for row in rows:
        benchmarks[row["benchmark_id"]] = {
            "id": row["benchmark_id"],
            **{key: row[key] for key in _BENCHMARK_KEYS if key != "id"},
        }
        measurement = {key: _iso(row[key]) for key in _MEASUREMENT_KEYS}
        measurement.update({key: row[key] for key in _STAT_KEYS})
        measurement["telemetry"] = row["telemetry"]
        measurements.append(measurement)
    return _finite(
        {
            "format": FORMAT_NAME,
            "schema_version": BUNDLE_VERSION,
            "run": {key: _iso(run[key]) for key in _RUN_KEYS},
            "environment": {
                "id": env["id"],
                "machine": env["machine"],
                "fields": env["fields"],
                "info": env["info"],
            },
            "benchmarks": list(benchmarks.values()),
            "measurements": measurements,
        }
    )


def write_bundle(document: Mapping[str, Any], path: Path) -> None:
    """Write a bundle document, gzip-compressed when ``path`` ends in ``.gz``, whole: a
    temporary file beside it renamed over it, so a reader (or a crash) never meets half."""
    text = json.dumps(document, indent=1, allow_nan=False, sort_keys=False)
    data = text.encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


# -- import --------------------------------------------------------------------------------


def read_bundle(path: Path) -> Bundle:
    """Read and validate one bundle file; :class:`BundleError` names the file and the fault."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"bundle {path}: cannot read it: {exc.strerror}") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise BundleError(
            f"bundle {path}: not a readable bundle (truncated or corrupt gzip/UTF-8: {exc})"
        ) from None
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise BundleError(
            f"bundle {path}: not valid JSON ({exc}); the file is truncated or not a bundle"
        ) from None
    return parse_bundle(document, str(path))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_bundle(document: Any, path: str) -> Bundle:
    """Validate a decoded bundle document (everything is checked; nothing is trusted)."""
    check = Checker(path)
    doc = check.mapping(document, "the document")
    if doc.get("format") != FORMAT_NAME:
        check.fail("format", f"must be {FORMAT_NAME!r}", doc.get("format"))
    version = check.integer(doc, "schema_version", low=1)
    if version > BUNDLE_VERSION:
        check.fail(
            "schema_version",
            f"is newer than this benchbench reads ({BUNDLE_VERSION}); upgrade benchbench",
            version,
        )
    environment = _parse_environment(check, check.mapping(doc.get("environment"), "environment"))
    run = _parse_run(check, check.mapping(doc.get("run"), "run"))
    if run["environment_id"] != environment.id:
        check.fail(
            "run.environment_id",
            f"does not match the bundle's environment {environment.id}",
            run["environment_id"],
        )
    points = _parse_benchmarks(check, check.sequence(doc, "benchmarks"))
    results, created = _parse_measurements(check, check.sequence(doc, "measurements"), points)
    return Bundle(path, run, environment, tuple(results), tuple(created))


def _parse_environment(check: Checker, env: Mapping[str, Any]) -> Environment:
    fields = check.json_object(env, "fields", "environment")
    info = check.json_object(env, "info", "environment")
    result = Environment(fields=fields, info=info)
    env_id = check.string(env, "id", "environment")
    if env_id != result.id:
        check.fail("environment.id", f"is not the hash of its fields ({result.id})", env_id)
    if check.string(env, "machine", "environment") != result.machine:
        check.fail("environment.machine", f"differs from fields.machine ({result.machine})")
    return result


def _parse_run(check: Checker, run: Mapping[str, Any]) -> dict[str, Any]:
    where = "run"
    out: dict[str, Any] = {
        "id": check.uuid(run, "id", where),
        "group_id": check.uuid(run, "group_id", where),
        "kind": check.choice(run, "kind", ("adhoc", "nightly", "ci"), where),
        "label": check.string(run, "label", where, optional=True, max_length=255),
        "status": check.choice(run, "status", ("running", "finished", "interrupted"), where),
        "started_at": check.timestamp(run, "started_at", where),
        "finished_at": check.timestamp(run, "finished_at", where, optional=True),
        "suites": check.json_list(run, "suites", where),
        "harness_version": check.string(run, "harness_version", where, max_length=32),
        "git_sha": check.string(run, "git_sha", where, optional=True, max_length=64),
        "git_branch": check.string(run, "git_branch", where, optional=True, max_length=255),
        "git_dirty": check.boolean(run, "git_dirty", where, optional=True),
        "tags": check.string_list(run, "tags", where),
        "config": check.json_object(run, "config", where),
        "environment_id": check.string(run, "environment_id", where),
    }
    if out["finished_at"] is not None and out["finished_at"] < out["started_at"]:
        check.fail("run.finished_at", "is before run.started_at", run.get("finished_at"))
    return out


def _parse_benchmarks(check: Checker, items: Sequence[Any]) -> dict[str, tuple[Point, int]]:
    points: dict[str, tuple[Point, int]] = {}
    for index, item in enumerate(items):
        where = f"benchmarks[{index}]"
        b = check.mapping(item, where)
        shape = check.int_list(b, "shape", where, low=0)
        params = check.json_object(b, "params", where)
        point = Point(
            suite=check.string(b, "suite", where, max_length=255),
            workload=check.string(b, "workload", where, max_length=255),
            variant=check.string(b, "variant", where, max_length=255),
            size=check.integer(b, "size", where, low=0),
            shape=tuple(shape),
            dtype=check.string(b, "dtype", where, max_length=32),
            device=check.string(b, "device", where, max_length=32),
            params=tuple(params.items()),
        )
        version = check.integer(b, "code_version", where, low=1)
        benchmark_id = check.string(b, "id", where)
        if benchmark_id != point.benchmark_id(version):
            check.fail(
                f"{where}.id",
                f"is not the hash of the benchmark ({point.benchmark_id(version)})",
                benchmark_id,
            )
        if benchmark_id in points:
            check.fail(f"{where}.id", "appears twice", benchmark_id)
        points[benchmark_id] = (point, version)
    return points


def _parse_measurements(
    check: Checker, items: Sequence[Any], points: Mapping[str, tuple[Point, int]]
) -> tuple[list[Result], list[dt.datetime]]:
    results: list[Result] = []
    created: list[dt.datetime] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"measurements[{index}]"
        m = check.mapping(item, where)
        benchmark_id = check.string(m, "benchmark_id", where)
        if benchmark_id not in points:
            check.fail(
                f"{where}.benchmark_id",
                "refers to a benchmark missing from the bundle",
                benchmark_id,
            )
        if benchmark_id in seen:
            check.fail(f"{where}.benchmark_id", "is measured twice in the run", benchmark_id)
        seen.add(benchmark_id)
        point, version = points[benchmark_id]
        status = check.choice(m, "status", ("ok", "skipped", "error"), where)
        samples = check.float_list(m, "samples_s", where, low=0.0)
        # Absent in bundles written before instruction counts (schema version 3).
        counts = (
            check.float_list(m, "instruction_counts", where, low=0.0)
            if m.get("instruction_counts") is not None
            else []
        )
        instructions = (
            check.number(m, "instructions_per_call", where, low=0.0, optional=True)
            if "instructions_per_call" in m
            else None
        )
        if status == "ok" and not samples and instructions is None:
            check.fail(
                f"{where}.samples_s",
                "is empty for an ok measurement that counted no instructions either",
                samples,
            )
        telemetry = m.get("telemetry")
        # Absent in bundles written before rounds: one process.
        processes = m.get("process_samples")
        if processes is not None:
            processes = check.int_list(m, "process_samples", where, low=1)
            if processes and sum(processes) != len(samples):
                check.fail(
                    f"{where}.process_samples",
                    f"must add up to the {len(samples)} samples",
                    processes,
                )
        result = Result(
            point=point,
            status=status,
            reason=check.string(m, "reason", where, optional=True),
            samples_s=tuple(samples),
            calls_per_sample=check.integer(m, "calls_per_sample", where, low=1),
            warmup=check.json_object(m, "warmup", where),
            converged=check.boolean(m, "converged", where, optional=True),
            stop_reason=check.string(m, "stop_reason", where, optional=True),
            cache_mode=check.choice(m, "cache_mode", ("warm", "cold", "rotate"), where),
            threads=check.integer(m, "threads", where, low=1, optional=True),
            bytes_per_call=check.number(m, "bytes_per_call", where, low=0.0, optional=True),
            flop_per_call=check.number(m, "flop_per_call", where, low=0.0, optional=True),
            items_per_call=check.number(m, "items_per_call", where, low=0.0, optional=True),
            max_rel_error=check.number(m, "max_rel_error", where, low=0.0, optional=True),
            peak_memory_bytes=check.integer(m, "peak_memory_bytes", where, low=0, optional=True),
            warnings=tuple(check.string_list(m, "warnings", where)),
            telemetry=None if telemetry is None else check.json_object(m, "telemetry", where),
            extra=check.json_object(m, "extra", where),
            code_version=version,
            duration_s=check.number(m, "duration_s", where, low=0.0, optional=True),
            max_abs_error=check.number(m, "max_abs_error", where, low=0.0, optional=True)
            if "max_abs_error" in m
            else None,
            process_samples=tuple(processes or ()),
            instructions_per_call=instructions,
            instruction_counts=tuple(counts),
        )
        check.consistent_stats(m, where, result)
        results.append(result)
        created.append(check.timestamp(m, "created_at", where))
    return results, created


def import_bundles(store: Store, bundles: Sequence[Bundle]) -> dict[str, list[str]]:
    """Write every bundle's points the store lacks, all in one transaction.

    Returns ``{"imported": [new run ids], "merged": [run ids that gained points],
    "skipped": [run ids with nothing new]}`` (:meth:`Store.import_runs`).
    """
    return store.import_runs(bundles)
