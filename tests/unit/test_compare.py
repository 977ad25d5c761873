"""The comparison analysis on synthetic samples whose truth is known."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.analysis import compare, verdict


def _samples(median: float, n: int = 40, spread: float = 0.02, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + rng.uniform(-spread, spread, n)))


def test_a_ten_percent_slowdown_is_slower_with_a_ci_around_the_ratio():
    out = compare.compare_samples(_samples(1e-3), _samples(1.1e-3, seed=1))
    assert out.mark == compare.SLOWER
    assert out.p_value < 1e-6
    assert out.ratio == pytest.approx(1.1, rel=0.02)
    assert out.ci_low < out.ratio < out.ci_high
    assert out.ci_low > 1.05 and out.ci_high < 1.15


def test_a_ten_percent_speedup_is_faster():
    out = compare.compare_samples(_samples(1e-3), _samples(0.9e-3, seed=1))
    assert out.mark == compare.FASTER and out.ratio < 0.95


def test_a_significant_change_below_the_minimum_effect_is_same():
    out = compare.compare_samples(_samples(1e-3, spread=0.001), _samples(1.02e-3, spread=0.001))
    assert out.p_value < 0.05
    assert out.mark == compare.SAME
    wide = compare.compare_samples(
        _samples(1e-3, spread=0.001), _samples(1.02e-3, spread=0.001), min_effect=0.01
    )
    assert wide.mark == compare.SLOWER


def test_identical_distributions_are_not_significant():
    out = compare.compare_samples(_samples(1e-3, seed=3), _samples(1e-3, seed=4))
    assert out.mark == compare.NOT_SIGNIFICANT and out.p_value > 0.05


def test_compare_gives_the_one_verdict_on_unpaired_samples():
    base, contender = _samples(1e-3, spread=0.05), _samples(0.95e-3, spread=0.05, seed=5)
    out = compare.compare_samples(base, contender)
    found = verdict.estimate(base, contender, paired=False)
    assert (out.ratio, out.ci_low, out.ci_high, out.p_value) == (
        found.ratio,
        found.ci_low,
        found.ci_high,
        found.p_value,
    )
    assert out.mark == verdict.mark(found)


def _row(bid: str, median: float | None, status: str = "ok", workload: str = "sqrt", seed=0):
    return {
        "benchmark_id": bid,
        "suite": "s",
        "workload": workload,
        "variant": "v" + bid,
        "device": "cpu",
        "dtype": "float32",
        "size": 4,
        "shape": [4],
        "params": {},
        "status": status,
        "reason": None if status == "ok" else f"{status} reason",
        "samples_s": [2 * s for s in _samples(median, seed=seed)] if median else [],
        "calls_per_sample": 2,
        "median_s": median,
    }


def test_rows_are_matched_by_benchmark_id_and_marked():
    base = [
        _row("a", 1e-3),
        _row("b", 1e-3),
        _row("c", 1e-3),
        _row("d", 1e-3),
        _row("e", 1e-3, workload="add"),
    ]
    contender = [
        _row("a", 1.2e-3, seed=1),  # slower
        _row("b", None, status="error"),  # failing where the base measured it
        _row("c", None, status="skipped"),  # gone
        _row("e", 0.5e-3, workload="add", seed=1),  # faster
        _row("f", 1e-3),  # new
    ]
    out = compare.compare_rows(base, contender)
    marks = {p.benchmark_id: p.mark for p in out.points}
    assert marks == {
        "a": "slower",
        "b": "failing",
        "c": "gone",
        "d": "gone",
        "e": "faster",
        "f": "new",
    }
    assert {p.benchmark_id for p in out.regressions} == {"a", "b"}
    assert out.geomean_by_workload()["s/sqrt"] == pytest.approx(1.2, rel=0.02)
    assert out.geomean == pytest.approx((1.2 * 0.5) ** 0.5, rel=0.02)
    assert out.points[0].label == "sqrt:va[float32, cpu](n=4)"
    doc = out.to_dict()
    assert doc["regressed"] == 2 and doc["counts"]["slower"] == 1


def test_failing_in_both_runs_is_not_a_new_regression():
    out = compare.compare_rows([_row("a", None, "error")], [_row("a", None, "error")])
    assert out.points[0].mark == compare.FAILING and not out.regressions


def test_environment_differences_are_reported_field_by_field():
    out = compare.compare_rows(
        [_row("a", 1e-3)],
        [_row("a", 1e-3, seed=2)],
        base_environment={"machine": "m", "torch": "2.12"},
        contender_environment={"machine": "m", "torch": "2.13"},
    )
    assert out.environment_diff == {"torch": ("2.12", "2.13")}
    assert not out.same_environment


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="min_effect"):
        compare.compare_rows([], [], min_effect=1.5)
    with pytest.raises(ValueError, match="alpha"):
        compare.compare_rows([], [], alpha=0)
