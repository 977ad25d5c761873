"""Run bundles: export, import (idempotent, all or nothing), and every kind of bad file."""

from __future__ import annotations

import copy
import gzip
import json
import re
import shutil

import pytest

from benchbench.core.errors import BundleError
from benchbench.interchange.bundle import (
    export_bundle,
    import_bundles,
    parse_bundle,
    read_bundle,
    write_bundle,
)
from benchbench.store import open_store
from tests.integration.cli import benchbench
from tests.storedata import STORE_V1, add_run, point, result


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source.db"
    shutil.copy(STORE_V1, path)
    return open_store(str(path))


@pytest.fixture
def document(source):
    return export_bundle(source, "base")


def test_round_trip_keeps_every_row_and_a_second_import_changes_nothing(tmp_path, source):
    gz = tmp_path / "base.json.gz"
    write_bundle(export_bundle(source, "base"), gz)
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    plain = tmp_path / "contender.json"
    write_bundle(export_bundle(source, "contender"), plain)
    target = open_store(str(tmp_path / "target.db"))
    report = import_bundles(target, [read_bundle(gz), read_bundle(plain)])
    assert len(report["imported"]) == 2 and report["skipped"] == []
    for label in ("base", "contender"):
        run_id = source.resolve_run(label)["id"]
        strip = ("id",)
        ours = [{k: v for k, v in r.items() if k not in strip} for r in source.measurements(run_id)]
        theirs = [
            {k: v for k, v in r.items() if k not in strip} for r in target.measurements(run_id)
        ]
        assert theirs == ours
        assert target.resolve_run(run_id) == source.resolve_run(run_id)
    counts = target.counts()
    again = import_bundles(target, [read_bundle(gz)])
    assert again == {"imported": [], "merged": [], "skipped": [source.resolve_run("base")["id"]]}
    assert target.counts() == counts


@pytest.mark.postgres
def test_points_of_several_processes_keep_their_processes_and_interval(tmp_path):
    source = open_store(str(tmp_path / "source.db"))
    three = result(point(), n=30, process_samples=(10, 10, 10), max_abs_error=1e-6)
    run_id = add_run(source, [three], label="rounds")
    stored = source.measurements(run_id)[0]
    assert stored["process_samples"] == [10, 10, 10] and len(stored["process_medians_s"]) == 3
    target = open_store(str(tmp_path / "target.db"))
    import_bundles(target, [parse_bundle(export_bundle(source, run_id), "rounds.json")])
    theirs = target.measurements(run_id)[0]
    for key in ("process_samples", "process_medians_s", "ci_low_s", "ci_high_s", "max_abs_error"):
        assert theirs[key] == stored[key], key


def test_bundles_move_runs_from_sqlite_into_postgresql(tmp_path, source, pg_database):
    path = tmp_path / "b.json"
    write_bundle(export_bundle(source, "contender"), path)
    target = open_store(pg_database)
    import_bundles(target, [read_bundle(path)])
    run_id = source.resolve_run("contender")["id"]
    assert [r["median_s"] for r in target.measurements(run_id)] == [
        r["median_s"] for r in source.measurements(run_id)
    ]
    assert target.resolve_run(run_id)["started_at"] == source.resolve_run(run_id)["started_at"]


def _break(doc, path, value):
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("schema_version",), 2, "schema_version is newer than this benchbench reads"),
        (("schema_version",), "1", "schema_version must be an integer"),
        (("format",), "pyperf", "format must be 'benchmark-bundle'"),
        (("run", "id"), "not-a-uuid", "run.id must be a UUID"),
        (("run", "started_at"), "yesterday", "run.started_at must be an ISO 8601"),
        (("run", "kind"), "weekly", "run.kind must be one of adhoc, nightly, ci"),
        (("run", "environment_id"), "0" * 16, "run.environment_id does not match"),
        (("environment", "fields", "torch"), "9.9", "environment.id is not the hash"),
        (("benchmarks", 0, "size"), -1, "benchmarks[0].size must be >= 0"),
        (("benchmarks", 0, "workload"), "renamed", "benchmarks[0].id is not the hash"),
        (("measurements", 0, "samples_s", 3), -1.0, "measurements[0].samples_s[3] must be"),
        (("measurements", 0, "samples_s", 0), "fast", "measurements[0].samples_s[0] must be"),
        (("measurements", 0, "calls_per_sample"), 0, "calls_per_sample must be >= 1"),
        (("measurements", 0, "median_s"), 1.0, "median_s disagrees with its samples"),
        (("measurements", 0, "n"), 3, "measurements[0].n disagrees"),
        (("measurements", 0, "status"), "great", "status must be one of ok, skipped, error"),
        (("measurements", 0, "benchmark_id"), "f" * 16, "refers to a benchmark missing"),
        (("measurements", 0, "warnings"), KeyError, "measurements[0].warnings is missing"),
        (("measurements", 0, "process_samples"), [1, 2], "process_samples must add up to the"),
        (("measurements", 0, "process_samples"), [0], "must be an array of integers >= 1"),
        (("measurements",), {}, "measurements must be a JSON array"),
    ],
)
def test_bad_fields_are_rejected_naming_file_and_field(document, path, value, message):
    broken = _break(document, path, value)
    with pytest.raises(BundleError) as info:
        parse_bundle(broken, "shard7.json")
    text = str(info.value)
    assert text.startswith("bundle shard7.json: ")
    assert message.replace("benchmark-bundle", "benchbench-bundle") in text


def test_a_measurement_of_a_benchmark_missing_from_the_bundle_is_rejected(document):
    broken = copy.deepcopy(document)
    del broken["benchmarks"][0]
    with pytest.raises(BundleError, match=r"refers to a benchmark missing from the bundle"):
        parse_bundle(broken, "x.json")


def test_bad_files_are_rejected_whole_and_the_store_is_unchanged(tmp_path, source, document):
    target_path = tmp_path / "target.db"
    good = tmp_path / "good.json"
    write_bundle(document, good)
    text = good.read_text()
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    not_json = tmp_path / "notes.json"
    not_json.write_text("hello\n")
    bad_gz = tmp_path / "cut.json.gz"
    bad_gz.write_bytes(gzip.compress(text.encode())[:200])
    nan = tmp_path / "nan.json"
    nan.write_text(re.sub(r'"max_rel_error": [-+.e0-9]+', '"max_rel_error": NaN', text, count=1))
    inconsistent = tmp_path / "inconsistent.json"
    inconsistent.write_text(json.dumps(_break(document, ("benchmarks",), [])))
    target = open_store(str(target_path))
    before = target.counts()
    for bad, expected in (
        (truncated, "not valid JSON"),
        (not_json, "not valid JSON"),
        (bad_gz, "truncated or corrupt"),
        (inconsistent, "refers to a benchmark missing"),
    ):
        with pytest.raises(BundleError) as info:
            read_bundle(bad)
        assert str(bad) in str(info.value) and expected in str(info.value)
    with pytest.raises(BundleError, match="NaN is not a JSON number"):
        read_bundle(nan)
    # Through the CLI: one bad file among good ones rejects the import; nothing written.
    done = benchbench("import", str(good), str(inconsistent), "--store", str(target_path),
                      cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert f"bundle {inconsistent}:" in done.stderr and "rejected whole" in done.stderr
    assert open_store(str(target_path)).counts() == before
    done = benchbench("import", str(good), str(good), "--store", str(target_path), "--json",
                      cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["imported"]) == 1 and len(report["skipped"]) == 1
    assert open_store(str(target_path)).counts()["measurement"] == 5
