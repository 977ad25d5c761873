"""Spending the run's budget where the uncertainty is: the spread of a point, the
samples a process should take, which point gets the next process, and when to stop."""

from __future__ import annotations

import math
import random

import pytest

from benchbench.core.values import Point, Result
from benchbench.run.allocate import (
    HEADROOM,
    MAX_SAMPLES,
    MIN_SAMPLES,
    Spread,
    next_process,
    spread_of,
    why_stopped,
)
from benchbench.run.merge import merge

POINT = Point("s", "w", "v", 8, (8,), "float32", "cpu")


def _process(median: float, n: int = 30, noise: float = 0.01, seed: int = 0) -> Result:
    rng = random.Random(seed)
    samples = tuple(median * math.exp(rng.gauss(0, noise)) for _ in range(n))
    return Result(point=POINT, status="ok", samples_s=samples, calls_per_sample=1)


def _merged(medians: list[float], noise: float = 0.01) -> Result:
    return merge([_process(m, noise=noise, seed=k) for k, m in enumerate(medians)], 0.03)


def test_processes_that_disagree_have_a_between_variance_and_agreeing_ones_none():
    apart = spread_of(_merged([1e-3, 1.2e-3, 0.9e-3]), walls_s=[0.5, 0.5, 0.5])
    assert apart is not None and apart.processes == 3
    assert apart.between_var > 0.005  # log medians 10-20 % apart
    assert apart.within_var == pytest.approx(1e-4, rel=0.5)  # 1 % noise in log
    # Each process's wall is 0.5 s, of which its 30 samples took ~30 ms.
    assert apart.process_cost_s == pytest.approx(0.5 - 30e-3 * 1.03, rel=0.1)
    together = spread_of(_merged([1e-3, 1e-3, 1e-3]))
    assert together is not None and together.between_var < apart.between_var / 100


def test_a_point_that_was_not_measured_has_no_spread():
    assert spread_of(Result(point=POINT, status="error", reason="x")) is None


def _spread(half_width: float, *, processes: int = 3, between: float = 1e-3) -> Spread:
    return Spread(processes, half_width, 1e-4, between, 0.3, 1e-3)


def test_samples_per_process_follow_the_cost_and_the_variances():
    # Costly processes and samples that vary more than processes: more samples each.
    many = Spread(3, 0.1, within_var=1e-2, between_var=1e-5, process_cost_s=1.0, sample_s=1e-3)
    assert many.samples_per_process() == MAX_SAMPLES
    # Cheap processes that disagree far more than samples do: as few samples as allowed.
    few = Spread(3, 0.1, within_var=1e-6, between_var=1e-2, process_cost_s=0.01, sample_s=1e-3)
    assert few.samples_per_process() == MIN_SAMPLES
    # In between: sqrt(c_p s_w^2 / (c_s s_b^2)) = sqrt(1.0 * 1e-2 / (1e-3 * 1e-3)) = 100.
    mid = Spread(3, 0.1, within_var=1e-2, between_var=1e-3, process_cost_s=1.0, sample_s=1e-3)
    assert mid.samples_per_process() == 100
    assert mid.next_cap_s() == pytest.approx(0.1)


def test_the_point_furthest_from_target_gets_the_next_process():
    spreads = {0: _spread(0.05), 1: _spread(0.20), 2: _spread(0.02)}
    index, cap = next_process(spreads, 0.03, left_s=10.0, max_processes=10)
    assert index == 1 and cap > 0
    # Within target, or at the most processes: nothing more for them.
    assert next_process({2: _spread(0.02)}, 0.03, 10.0, 10) is None
    assert next_process({1: _spread(0.2, processes=10)}, 0.03, 10.0, 10) is None


def test_no_process_starts_that_the_budget_left_cannot_pay_for():
    spreads = {0: _spread(0.2)}
    cap = spreads[0].next_cap_s()
    need = cap * HEADROOM  # a process may take a sample or so past its cap
    assert next_process(spreads, 0.03, left_s=need * 0.99, max_processes=10) is None
    assert next_process(spreads, 0.03, left_s=need, max_processes=10) == (0, cap)


def test_a_point_too_costly_for_the_budget_left_gives_way_to_a_cheaper_one():
    costly = Spread(3, 0.5, 1e-2, 1e-5, 1.0, 1e-2)  # wants MAX_SAMPLES of 10 ms
    cheap = Spread(3, 0.1, 1e-6, 1e-2, 0.01, 1e-4)  # wants MIN_SAMPLES of 0.1 ms
    assert next_process({0: costly, 1: cheap}, 0.03, left_s=0.05, max_processes=10) == (
        1,
        pytest.approx(MIN_SAMPLES * 1e-4),
    )


def test_why_a_point_got_no_more_processes():
    assert why_stopped(_spread(0.02), 0.03, 10) == "target met"
    assert why_stopped(_spread(0.2, processes=10), 0.03, 10) == "at most 10 processes"
    assert why_stopped(_spread(0.2), 0.03, 10) == "budget spent"


def test_the_merged_warning_says_the_two_level_interval_in_words():
    wide = merge(
        [_process(m, seed=k) for k, m in enumerate([1e-3, 1.3e-3, 0.8e-3])],
        0.03,
        why="budget spent",
    )
    assert wide.converged is False
    (warning,) = [w for w in wide.warnings if w.startswith("not converged")]
    assert warning.startswith("not converged: ±")
    assert warning.endswith("after 3 processes (target ±3 %); budget spent")
    tight = merge([_process(1e-3, seed=k) for k in range(3)], 0.03)
    assert tight.converged is True
    assert not [w for w in tight.warnings if w.startswith("not converged")]


def test_a_later_process_warms_up_as_briefly_as_a_first_round_one():
    from benchbench.run.rounds import process_request

    request = {
        "op": "measure",
        "check": True,
        "profile_dir": "/p",
        "policy": {"max_time_s": 0.5, "min_time_s": 0.05, "warmup_min_s": 0.1},
    }
    later = process_request(request, 0.02, rounds=3)
    assert later["check"] is False and later["profile_dir"] is None
    assert later["policy"]["max_time_s"] == 0.02
    assert later["policy"]["warmup_min_s"] == pytest.approx(0.1 / 3)
    assert later["policy"]["min_time_s"] == pytest.approx(0.05 / 3)
