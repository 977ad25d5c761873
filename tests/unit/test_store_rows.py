"""Bulk statistics and export statistics agree with the reference implementations."""

from __future__ import annotations

import random

import pytest
from pytest_benchmark.stats import Stats as PytestBenchmarkStats

from benchbench.core.stats import Stats
from benchbench.core.values import Point, Result
from benchbench.interchange.exports import pytest_benchmark_stats
from benchbench.store.rows import summaries


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
