"""``ab`` pairs stay paired: a round lost on one side is dropped from both, every process
keeps its round, the paired t runs on the rounds both sides kept and says how many, and
a point that cannot be paired names the test it fell back to."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.analysis import compare
from benchbench.core.values import Point, Result
from benchbench.run.merge import merge_pair

POINT = Point("s", "sum", "v", 1024, (1024,), "float32", "cpu")


def _process(median_s: float, n: int = 10) -> Result:
    samples = tuple(median_s * (1 + 0.001 * ((k % 5) - 2)) for k in range(n))
    return Result(POINT, "ok", samples_s=samples, converged=True, stop_reason="precise")


def _failed() -> Result:
    return Result(POINT, "error", reason="worker died")


def test_a_round_lost_on_one_side_is_dropped_from_both_and_rounds_are_kept():
    base = [_process(1e-3), _process(1.1e-3), _process(1.05e-3), _process(0.98e-3)]
    head = [_process(1.2e-3), _failed(), _process(1.2e-3), _process(1.3e-3)]
    sides = merge_pair(base, head, 0.03)
    for side in sides:
        assert side.process_samples == (10, 10, 10)
        assert [p["round"] for p in side.extra["processes"]] == [1, 3, 4]
    for side in sides:
        assert "round 2 of 4 dropped from both sides: head error: worker died" in side.warnings


def _row(result: Result, bid: str = "p") -> dict:
    return {
        "benchmark_id": bid,
        "suite": "s",
        "workload": "sum",
        "variant": "v",
        "device": "cpu",
        "dtype": "float32",
        "size": 1024,
        "shape": [1024],
        "params": {},
        "status": result.status,
        "median_s": None,
        "samples_s": list(result.samples_s),
        "calls_per_sample": result.calls_per_sample,
        "process_samples": list(result.process_samples),
        "extra": dict(result.extra),
        "reason": result.reason,
    }


def test_the_paired_t_runs_on_the_rounds_both_sides_kept_and_counts_them():
    rng = np.random.default_rng(5)
    shared = np.exp(rng.normal(0, 0.2, 6))  # a neighbour per round, alike on both sides
    base = [_process(1e-3 * s * np.exp(rng.normal(0, 0.01))) for s in shared]
    head = [_process(1.1e-3 * s * np.exp(rng.normal(0, 0.01))) for s in shared]
    head[3] = _failed()
    sides = merge_pair(base, head, 0.03)
    point = compare.compare_point(_row(sides[0]), _row(sides[1]), paired=True)
    assert point.test == "paired t" and point.pairs == 5
    assert point.mark == compare.SLOWER  # the shared offsets cancel in the pairs
    unpaired = compare.compare_point(_row(sides[0]), _row(sides[1]), paired=False)
    assert unpaired.test == "Welch t" and unpaired.pairs == 0


def test_pairs_follow_round_numbers_not_positions():
    base = merge_pair([_process(1e-3), _process(2e-3), _process(4e-3)], [_process(1e-3)] * 3, 0.03)[
        0
    ]
    rows = _row(base), _row(base)
    # The contender kept rounds 3, 1, 2 in that order: pairing by round puts equal
    # medians side by side (ratio 1 exactly), pairing by position would not.
    head = dict(rows[1])
    order = [2, 0, 1]
    head["samples_s"] = [s for k in order for s in rows[1]["samples_s"][10 * k : 10 * k + 10]]
    head["extra"] = {
        "processes": [{**rows[1]["extra"]["processes"][k], "round": k + 1} for k in order]
    }
    point = compare.compare_point(rows[0], head, paired=True)
    assert point.pairs == 3 and point.ratio == pytest.approx(1.0)
    assert point.ratio_ci_low == pytest.approx(1.0) and point.ratio_ci_high == pytest.approx(1.0)


def test_sides_that_cannot_be_paired_say_which_test_they_fell_back_to():
    base = {**_row(merge_pair([_process(1e-3)] * 4, [_process(1e-3)] * 4, 0.03)[0])}
    head = {**_row(merge_pair([_process(1e-3)] * 3, [_process(1e-3)] * 3, 0.03)[0])}
    for row in (base, head):
        row["extra"] = {}  # an older ab run: no rounds named
    point = compare.compare_point(base, head, paired=True)
    assert point.test == "Welch t (unpaired: 4 vs 3 processes)" and point.pairs == 0


def test_a_a_lockstep_pairs_stay_quiet_and_a_ten_percent_change_is_found():
    """Validated like a classifier: 5 rounds, a shared per-round offset (sd 15 %) and a
    process offset of its own (sd 3 %) a side; 400 A/A points and 400 A/B at +10 %."""
    rng = np.random.default_rng(20261127)

    def trial(factor: float) -> str:
        shared = np.exp(rng.normal(0, 0.15, 5))
        sides = [
            [_process(1e-3 * f * s * np.exp(rng.normal(0, 0.03))) for s in shared]
            for f in (1.0, factor)
        ]
        merged = merge_pair(sides[0], sides[1], 0.03)
        return compare.compare_point(_row(merged[0]), _row(merged[1]), paired=True).mark

    aa = [trial(1.0) for _ in range(400)]
    ab = [trial(1.10) for _ in range(400)]
    false_alarms = sum(m in (compare.SLOWER, compare.FASTER) for m in aa) / 400
    assert false_alarms <= 0.05 + 2 * (0.05 * 0.95 / 400) ** 0.5
    assert sum(m == compare.SLOWER for m in ab) / 400 >= 0.75


def _look(rng: np.random.Generator, rounds: int, ratio: float) -> tuple[dict, dict]:
    """One ``ab`` run's two rows of a point: a neighbour per round alike on both sides,
    ~3 % noise of each side's own."""
    shared = np.exp(rng.normal(0, 0.2, rounds))
    base = [_process(1e-3 * s * np.exp(rng.normal(0, 0.03))) for s in shared]
    head = [_process(ratio * 1e-3 * s * np.exp(rng.normal(0, 0.03))) for s in shared]
    sides = merge_pair(base, head, 0.03)
    return _row(sides[0]), _row(sides[1])


def test_pooled_looks_pair_round_by_round_and_narrow_the_interval():
    from benchbench.analysis.sides import ROUND_STRIDE, pooled_runs

    rng = np.random.default_rng(11)
    looks = [_look(rng, 8, 1.0) for _ in range(3)]
    one = compare.compare_point(*looks[-1], paired=True)
    base, head = (pooled_runs([[look[side]] for look in looks]) for side in (0, 1))
    rounds = [p["round"] for p in base[0]["extra"]["processes"]]
    assert rounds == [k * ROUND_STRIDE + r for k in range(3) for r in range(1, 9)]
    three = compare.compare_point(base[0], head[0], paired=True)
    assert one.test == three.test == "paired t"
    assert (one.pairs, three.pairs) == (8, 24)
    assert three.ratio_ci_high - three.ratio_ci_low < one.ratio_ci_high - one.ratio_ci_low


def test_a_pooled_round_lost_on_one_side_is_dropped_and_a_failed_look_left_out():
    from benchbench.analysis.sides import pooled

    rng = np.random.default_rng(3)
    first, second = _look(rng, 6, 1.1), _look(rng, 6, 1.1)
    # The second look lost its round 2 on the head side only (as merge_pair would not
    # leave it, but an older store might): the pooled pairs skip it.
    head = dict(second[1])
    head["extra"] = {**head["extra"], "processes": head["extra"]["processes"][1:]}
    head["process_samples"] = head["process_samples"][1:]
    head["samples_s"] = head["samples_s"][10:]
    point = compare.compare_point(
        pooled([first[0], second[0]]), pooled([first[1], head]), paired=True
    )
    assert point.pairs == 11 and point.mark == compare.SLOWER
    failed = _row(_failed())
    assert pooled([failed, second[0]])["samples_s"] == second[0]["samples_s"]
    assert pooled([first[0], failed]) is failed  # the last look decides what is there
    assert pooled([None, second[0]]) is second[0]
