"""The github-action-benchmark and Bencher (BMF) exports, read back as those tools read them.

github-action-benchmark (``src/extract.ts``, ``extractCustomBenchmarkResult``) parses the
file as a JSON array and keeps ``name, value, unit, range, extra`` of each entry; its
``extractRangeInfo`` reads ``range`` with ``(\\+-|±)\\s*(\\d.+)`` and ``Number()``; its
``normalizeUnit`` converts between runs only units in ``s, ms, us, ns``. Bencher validates
BMF against its published JSON schema (https://bencher.dev/bmf.json, draft-07), copied
below as published.
"""

from __future__ import annotations

import json
import math
import re

import jsonschema
import pytest

from benchbench.core.errors import UsageError
from benchbench.core.values import Point
from benchbench.interchange import ci_formats
from benchbench.store import open_store
from tests.storedata import add_run, point, result

#: https://bencher.dev/bmf.json as published (the reference page's "BMF JSON Schema").
BMF_SCHEMA = {
    "$id": "https://bencher.dev/bmf.json",
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}
#: github-action-benchmark's ``normalizeUnit`` time units.
ACTION_TIME_UNITS = ("s", "ms", "us", "ns")
#: github-action-benchmark's ``extractRangeInfo`` pattern, in Python's syntax.
ACTION_RANGE = re.compile(r"(?P<prefix>(\+-|±)\s*)(?P<value>\d.+)")


def _action_reads(text: str) -> list[dict]:
    """What github-action-benchmark keeps of a customSmallerIsBetter file."""
    parsed = json.loads(text)
    assert isinstance(parsed, list)
    return [{k: e.get(k) for k in ("name", "value", "unit", "range", "extra")} for e in parsed]


def _action_range(range_: str) -> float:
    match = ACTION_RANGE.search(range_)
    assert match, f"github-action-benchmark would drop the range {range_!r}"
    return float(match["value"])  # Number(): a plain decimal, no unit, no trailing text


@pytest.fixture
def stored(tmp_path):
    """A real SQLite store with one run: four measured points, one skipped, one failed.

    The measured points differ by orders of magnitude (2 µs to 40 ms) so that a unit that
    followed the magnitude, or a range formatted in an exponent, would show.
    """
    store = open_store(str(tmp_path / "s.db"))
    results = [
        result(point(size=64), 2e-6, n=12, seed=1),
        result(point(size=4096), 3.5e-4, n=30, seed=2),
        result(point("add", "torch.add", size=1 << 20), 4e-2, n=10, seed=3),
        # Three worker processes of 6 samples: its interval is over process medians.
        result(point(size=512), 1e-5, n=18, seed=4, process_samples=(6, 6, 6)),
        result(point(size=8), status="skipped", reason="no such device"),
        result(point("add", "torch.add", size=8), status="error", reason="boom"),
    ]
    run_id = add_run(store, results, label="nightly")
    run = store.resolve_run(run_id)
    return run, store.environment(run["environment_id"]), store.measurements(run_id)


def test_github_action_benchmark_reads_value_unit_and_a_range_covering_the_interval(stored):
    run, env, rows = stored
    text = json.dumps(ci_formats.github_action_benchmark(run, env, rows))
    entries = _action_reads(text)
    by_label = {Point.from_row(r).label: r for r in rows if r["status"] == "ok"}
    assert sorted(e["name"] for e in entries) == sorted(by_label)
    for entry in entries:
        row = by_label[entry["name"]]
        assert entry["unit"] in ACTION_TIME_UNITS and entry["unit"] == "ns"
        assert isinstance(entry["value"], float)
        assert entry["value"] == pytest.approx(row["median_s"] * 1e9, rel=1e-12)
        low, high = row["ci_low_s"] * 1e9, row["ci_high_s"] * 1e9
        assert low < entry["value"] < high  # a real interval, not a zero-width one
        half = _action_range(entry["range"])
        # The symmetric band is the larger half-width: it covers the whole interval,
        # and is no wider than it needs to be (rounded to 0.001 ns).
        assert entry["value"] - half <= low + 1e-3 and entry["value"] + half >= high - 1e-3
        assert math.isclose(half, max(entry["value"] - low, high - entry["value"]), abs_tol=1e-3)
        assert f"95% CI: {low:.3f} to {high:.3f} ns" in entry["extra"]
        processes = 3 if row["size"] == 512 else 1
        assert f"samples: {row['n']} in {processes} processes" in entry["extra"]
        assert f"run: {run['id']}" in entry["extra"] and "machine: box-a" in entry["extra"]


def test_github_action_benchmark_has_only_the_documented_keys_and_types(stored):
    # The action's README documents name, unit, value (required) and range, extra
    # (optional): anything else would be silently dropped, so nothing else is written.
    entries = ci_formats.github_action_benchmark(*stored)
    assert len(entries) == 4
    for entry in entries:
        assert set(entry) == {"name", "unit", "value", "range", "extra"}
        assert isinstance(entry["name"], str) and isinstance(entry["unit"], str)
        assert isinstance(entry["range"], str) and isinstance(entry["extra"], str)


def test_bmf_validates_against_bencher_schema_with_the_interval_as_bounds(stored):
    run, env, rows = stored
    document = json.loads(json.dumps(ci_formats.bencher_metric_format(run, env, rows)))
    jsonschema.Draft7Validator.check_schema(BMF_SCHEMA)
    jsonschema.validate(document, BMF_SCHEMA, cls=jsonschema.Draft7Validator)
    measured = {Point.from_row(r).label: r for r in rows if r["status"] == "ok"}
    assert set(document) == set(measured)  # skipped and failed points have no metric
    for name, measures in document.items():
        row = measured[name]
        assert set(measures) == {"latency"}  # Bencher's built-in measure, in nanoseconds
        metric = measures["latency"]
        assert metric["value"] == pytest.approx(row["median_s"] * 1e9, rel=1e-12)
        assert metric["lower_value"] == pytest.approx(row["ci_low_s"] * 1e9, rel=1e-12)
        assert metric["upper_value"] == pytest.approx(row["ci_high_s"] * 1e9, rel=1e-12)
        assert metric["lower_value"] < metric["value"] < metric["upper_value"]


def test_a_run_with_nothing_measured_gives_empty_documents(tmp_path):
    store = open_store(str(tmp_path / "s.db"))
    run_id = add_run(store, [result(point(), status="skipped", reason="no device")])
    run = store.resolve_run(run_id)
    rows = store.measurements(run_id)
    assert ci_formats.github_action_benchmark(run, None, rows) == []
    assert ci_formats.bencher_metric_format(run, None, rows) == {}


def test_two_points_with_one_name_are_refused_naming_both(stored):
    run, env, rows = stored
    first = next(r for r in rows if r["status"] == "ok")  # rows come in suite order
    twin = {**first, "benchmark_id": "twin-id"}
    with pytest.raises(UsageError, match=r"both named .*twin-id.*bundle or CSV"):
        ci_formats.bencher_metric_format(run, env, [first, twin])


def test_a_run_that_counted_instructions_only_is_refused_with_the_fix(stored):
    # `run --metric instructions` stores ok points without time samples: these formats
    # hold times, so they say so instead of writing an empty file.
    run, env, rows = stored
    counted = [{**r, "samples_s": [], "instructions_per_call": 1000.0} for r in rows
               if r["status"] == "ok"]  # fmt: skip
    with pytest.raises(UsageError, match=r"counted instructions only.*github-action-benchmark"):
        ci_formats.github_action_benchmark(run, env, counted)
    with pytest.raises(UsageError, match=r"a bmf file holds times.*--format csv"):
        ci_formats.bencher_metric_format(run, env, counted)
