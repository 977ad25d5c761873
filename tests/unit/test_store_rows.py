"""Rows and bulk statistics: their columns are the column list's, and bulk statistics and
export statistics agree with the reference implementations."""

from __future__ import annotations

import dataclasses
import random

import pytest
from pytest_benchmark.stats import Stats as PytestBenchmarkStats

from benchbench.core import columns
from benchbench.core.stats import Stats
from benchbench.core.values import Point, Result
from benchbench.interchange.exports import pytest_benchmark_stats
from benchbench.machine.environment import Environment
from benchbench.run.record import run_row
from benchbench.store import open_store
from benchbench.store import schema as t
from benchbench.store.rows import benchmark_row_for, measurement_row_for, summaries


def _result(n: int, seed: int, calls: int = 3, status: str = "ok") -> Result:
    rng = random.Random(seed)
    samples = tuple(rng.lognormvariate(-7, 0.3) for _ in range(n))
    return Result(
        point=Point("s", "w", "v", n, (n,), "float32", "cpu"),
        status=status,  # type: ignore[arg-type]
        samples_s=samples,
        calls_per_sample=calls,
    )


def test_bulk_summaries_equal_stats_for_every_sample_count():
    results = [_result(n, seed) for seed, n in enumerate([1, 2, 5, 6, 10, 30, 30, 31, 101])]
    results.append(_result(10, 99, status="error"))
    bulk = summaries(results)
    assert bulk[-1] is None
    for result, summary in zip(results[:-1], bulk[:-1], strict=True):
        expected = Stats.from_samples(result.samples_s, result.calls_per_sample).summary()
        assert summary is not None and summary.keys() == expected.keys()
        for key, value in expected.items():
            assert summary[key] == pytest.approx(value, rel=1e-12), (len(result.samples_s), key)


def test_bulk_summaries_equal_stats_for_points_of_several_processes():
    # A run's points share one split (3 rounds), and a few differ: every group, the
    # two-level interval and the process medians must be Stats' own.
    splits = [(4, 3, 3), (4, 3, 3), (4, 3, 3), (2, 2), (1, 1, 1), (10, 20), (3, 3, 3, 3)]
    results = [
        dataclasses.replace(_result(sum(k), seed, calls=7), process_samples=k)
        for seed, k in enumerate(splits)
    ]
    bulk = summaries(results)
    for result, summary in zip(results, bulk, strict=True):
        expected = Stats.from_samples(
            result.samples_s, result.calls_per_sample, result.process_samples
        ).summary()
        assert summary is not None and summary.keys() == expected.keys()
        assert len(summary["process_medians_s"]) == len(result.process_samples)
        assert summary["process_medians_s"] == pytest.approx(expected["process_medians_s"])
        for key, value in expected.items():
            if key != "process_medians_s":
                assert summary[key] == pytest.approx(value, rel=1e-12), (
                    result.process_samples,
                    key,
                )


def test_bulk_summaries_refuse_a_split_that_does_not_add_up():
    bad = dataclasses.replace(_result(10, 1), process_samples=(4, 4))
    with pytest.raises(ValueError, match="adding up to the 10 samples"):
        summaries([bad])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 30, 31])
def test_pytest_benchmark_stats_match_pytest_benchmarks_own(n):
    rng = random.Random(n)
    data = [rng.lognormvariate(-7, 0.5) for _ in range(n)]
    theirs = PytestBenchmarkStats()
    for value in data:
        theirs.update(value)
    ours = pytest_benchmark_stats(data)
    assert set(ours) == set(PytestBenchmarkStats.fields)
    for field in PytestBenchmarkStats.fields:
        expected = getattr(theirs, field)
        if isinstance(expected, float):
            assert ours[field] == pytest.approx(expected, rel=1e-12), field
        else:
            assert ours[field] == expected, field


def test_rows_have_exactly_the_columns_of_their_tables():
    result = Result(
        point=Point("s", "w", "v", 8, (2, 4), "float32", "cpu", (("dim", 1),)),
        status="ok",
        samples_s=(4.0, 2.0, 6.0),
        calls_per_sample=2,
        warmup={"calls": 3},
        bytes_per_call=64.0,
        flop_per_call=8.0,
        warnings=("slow",),
    )
    b_row = benchmark_row_for(result)
    m_row = measurement_row_for("run", b_row["id"], result)
    assert list(b_row) == list(t.benchmark.columns.keys())
    assert set(m_row) == set(t.measurement.columns.keys()) - {"id"}
    assert (b_row["shape"], b_row["params"]) == ([2, 4], {"dim": 1})
    assert (m_row["median_s"], m_row["n"]) == (2.0, 3)
    assert (m_row["bytes_per_s"], m_row["flop_per_s"], m_row["items_per_s"]) == (32.0, 4.0, None)
    assert (m_row["warnings"], m_row["warmup"]) == (["slow"], {"calls": 3})


def test_the_column_list_defines_the_measurement_table_and_the_statistics():
    stored = [c.name for c in t.measurement.columns if c.name != "id"]
    assert stored == ["run_id", "benchmark_id", *(c.name for c in columns.MEASUREMENT)]
    assert Stats.fields == columns.STATISTICS + columns.PROCESS_STATISTICS
    shown = (*columns.MEDIAN_CI, *columns.QUARTILES, *columns.SPREAD, "n")
    assert sorted(shown) == sorted(columns.STATISTICS)  # every statistic has one place
    assert columns.THROUGHPUTS == (
        ("bytes_per_call", "bytes_per_s"),
        ("flop_per_call", "flop_per_s"),
        ("items_per_call", "items_per_s"),
    )
    assert t.measurement.c.peak_memory_bytes.type.__class__.__name__ == "BigInteger"
    assert t.measurement.c.cache_mode.type.length == 16
    assert not t.measurement.c.samples_s.nullable and t.measurement.c.reason.nullable


def test_a_run_stored_under_the_earlier_rule_is_read_with_todays_headline(tmp_path):
    store = open_store(str(tmp_path / "s.db"))
    rng = random.Random(3)
    medians = [1e-4, 1.02e-4, 0.99e-4, 1.5e-4, 1.01e-4]
    samples = tuple(m * rng.uniform(0.99, 1.01) for m in medians for _ in range(9))
    result = Result(
        point=Point("s", "w", "v", 1, (1,), "float32", "cpu"),
        status="ok",
        samples_s=samples,
        process_samples=(9,) * 5,
    )
    env = Environment(fields={"machine": "m"}, info={})
    store.save_environment(env)
    store.create_run(run_row("r", env, kind="adhoc", label=None, suites=[], config={}))
    store.write_result("r", result)
    # As an earlier rule stored it: the pooled median and a wider union interval.
    with store.transaction() as conn:
        conn.execute(
            t.measurement.update().values(median_s=1.0e-4, ci_low_s=0.5e-4, ci_high_s=3e-4)
        )
    (row,) = store.measurements("r")
    stats = Stats.from_samples(samples, 1, (9,) * 5)
    assert row["median_s"] == pytest.approx(stats.median_s)
    assert (row["ci_low_s"], row["ci_high_s"]) == pytest.approx((stats.ci_low_s, stats.ci_high_s))
    assert row["median_s"] != pytest.approx(1.0e-4, rel=1e-3)
