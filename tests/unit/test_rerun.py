"""The run-to-run factor (analysis/rerun.py), judged like an interval: by coverage.

Injected process medians (log-normal, a point's processes 3-12 % apart), five processes a
point, intervals as core.stats makes them. Calibrated runs (no run-level term) must give
a factor near 1; runs with a run-level term must give a factor that, applied to run i's
intervals, makes them hold run i+1's median about as often as calibrated intervals do
(a 95 % interval of five processes holds the next run's headline at about 88 %: both
vary, P(|T4| < 2.78 / sqrt(2))).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import statistics
from typing import Any

import pytest

from benchbench.analysis.compare import compare_rows
from benchbench.analysis.rerun import (
    MIN_POINTS,
    NOT_JUDGED,
    Rerun,
    apart,
    factor_of,
    history_factor,
    pair_shift,
    rerun_factor,
    scope,
    shared_shift,
    widened,
)
from benchbench.core.stats import process_interval

Row = dict[str, Any]
POINTS = 60
PROCESSES = 5


def _row(key: str, medians: list[float]) -> dict[str, Any]:
    centre, low, high = process_interval(medians)
    samples = [m for m in medians for _ in range(3)]
    return {
        "benchmark_id": key,
        "label": key,
        "suite": "s",
        "workload": key,
        "variant": "torch",
        "size": 1024,
        "shape": [1024],
        "dtype": "float32",
        "device": "cpu",
        "params": {},
        "status": "ok",
        "process_medians_s": medians,
        "median_s": centre,
        "ci_low_s": low,
        "ci_high_s": high,
        "samples_s": samples,
        "calls_per_sample": 1,
        "process_samples": [3] * len(medians),
    }


def _runs(
    count: int, rng: random.Random, run_sd: float = 0.0, slower: dict[int, float] | None = None
) -> list[list[dict[str, Any]]]:
    """``count`` runs of POINTS points; ``run_sd``: each point's own run-level term (log
    sd, drawn afresh per run and point); ``slower``: {run index: factor} at a third."""
    spreads = [rng.uniform(0.03, 0.12) for _ in range(POINTS)]
    runs = []
    for r in range(count):
        rows = []
        for p, sd in enumerate(spreads):
            level = math.log(1e-4 * (1 + p)) + rng.gauss(0.0, run_sd)
            if slower and r in slower and p % 3 == 0:
                level += math.log(slower[r])
            medians = [math.exp(level + rng.gauss(0.0, sd)) for _ in range(PROCESSES)]
            rows.append(_row(f"p{p}", medians))
        runs.append(rows)
    return runs


def _coverage(runs: list[list[dict[str, Any]]], rerun: Rerun | None) -> float:
    held = judged = 0
    for before, after in itertools.pairwise(runs):
        shown = {r["benchmark_id"]: r for r in widened(before, rerun)}
        for row in after:
            old = shown[row["benchmark_id"]]
            judged += 1
            held += old["ci_low_s"] <= row["median_s"] <= old["ci_high_s"]
    return held / judged


def test_calibrated_runs_give_a_factor_near_one() -> None:
    factors = []
    for seed in range(20):
        found = rerun_factor(_runs(6, random.Random(seed)))
        assert found is not None and found.pairs == 5 and found.points == 5 * POINTS
        factors.append(found.factor)
    # The median |z| of 300 points scatters ~7 %; the factor is never below 1.
    assert min(factors) == 1.0
    assert sorted(factors)[len(factors) // 2] < 1.05
    assert max(factors) < 1.2


@pytest.mark.parametrize("run_sd", [0.03, 0.06, 0.12])
def test_a_run_level_term_is_found_and_the_widened_intervals_cover_a_rerun(run_sd: float) -> None:
    within, printed, calibrated = [], [], []
    for seed in range(10):
        rng = random.Random(100 + seed)
        runs = _runs(8, rng, run_sd)
        found = rerun_factor(runs[:6])  # read from the history, judged on the runs after it
        assert found is not None and found.factor > 1.0
        within.append(_coverage(runs[5:], None))
        printed.append(_coverage(runs[5:], found))
        calibrated.append(_coverage(_runs(3, rng), None))
    average = sum(printed) / len(printed)
    assert sum(within) / len(within) < average
    # Calibrated intervals of five processes hold the next run's headline at about 88 %.
    target = sum(calibrated) / len(calibrated)
    assert abs(average - target) < 0.07, (average, target)


def test_a_change_at_a_third_of_the_points_widens_a_lone_pair_but_not_a_history() -> None:
    rng = random.Random(7)
    runs = _runs(6, rng, slower={5: 1.25})
    alone = rerun_factor(runs[4:])
    assert alone is not None and alone.factor > 1.3  # a lone pair cannot tell
    store = _Store([({"id": f"r{k}"}, rows) for k, rows in enumerate(runs)])
    judged = history_factor(store, {"id": "r5"}, runs[5])
    assert judged == rerun_factor(runs[:5])  # the changed run is not read
    assert judged is not None and judged.factor < 1.15


def test_too_few_points_give_no_factor_and_the_intervals_stay() -> None:
    runs = [rows[: MIN_POINTS - 1] for rows in _runs(2, random.Random(1))]
    assert rerun_factor(runs) is None
    assert rerun_factor(_runs(1, random.Random(1))) is None  # one run: no pair
    assert widened(runs[0], None) == runs[0]
    assert scope(None) == "within this run only"
    assert scope(Rerun(1.31, 4, 200)) == "incl. run-to-run (x1.31, from 4 pairs of runs)"
    own = Rerun(1.31, 4, 200, own={"a": 1.0, "b": 2.4})
    assert scope(own) == (
        "incl. run-to-run (x1.31, each point x1.00-2.40 by its own, from 4 pairs of runs)"
    )
    assert (own.of("b"), own.of("c")) == (2.4, 1.31)


def test_a_point_s_own_factor_is_read_from_the_history_never_from_the_run_judged() -> None:
    runs = _runs(4, random.Random(5), run_sd=0.05, slower={3: 1.5})
    read = factor_of(runs[:3], runs[3])
    assert read is not None and len(read.own) == POINTS and read.pairs == 2
    assert read.own == factor_of(runs[:3], _runs(1, random.Random(6))[0]).own
    lone = factor_of(runs[2:3], runs[3])  # no earlier pair: the run judged is read
    assert lone is not None and lone.own == {}


def test_widened_scales_the_log_interval_and_keeps_one_process_rows() -> None:
    row = _row("a", [1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 0.95e-3])
    single = {**row, "process_medians_s": [1.0e-3], "benchmark_id": "b"}
    wide, same = widened([row, single], Rerun(2.0, 1, 20))
    assert wide["median_s"] == row["median_s"]
    assert math.log(wide["ci_high_s"] / wide["median_s"]) == pytest.approx(
        2 * math.log(row["ci_high_s"] / row["median_s"])
    )
    assert math.log(wide["median_s"] / wide["ci_low_s"]) == pytest.approx(
        2 * math.log(row["median_s"] / row["ci_low_s"])
    )
    assert same == single


def test_compare_multiplies_the_unpaired_standard_error_by_the_factor() -> None:
    base, head = _runs(2, random.Random(3), slower={1: 1.10})
    plain = compare_rows(base, head)
    wider = compare_rows(base, head, rerun=Rerun(2.0, 1, POINTS))
    assert wider.rerun == Rerun(2.0, 1, POINTS)
    assert wider.to_dict()["run_to_run"] == {
        "factor": 2.0,
        "pairs": 1,
        "points": POINTS,
        "after_shift": False,
        "own": {},
        "calibrated": None,
    }
    for a, b in zip(plain.points, wider.points, strict=True):
        assert b.se_log == pytest.approx(2 * a.se_log)
        assert b.p_value >= a.p_value
        assert b.ratio == a.ratio
    assert sum(p.mark == "slower" for p in wider.points) <= sum(
        p.mark == "slower" for p in plain.points
    )
    # A paired comparison (ab's two sides) takes no factor.
    assert compare_rows(base, head, paired=True, rerun=Rerun(2.0, 1, POINTS)).rerun is None


class _Store:
    """The two reads history_factor makes, over runs given oldest first."""

    def __init__(self, runs: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
        self.runs = runs
        self.asked: list[int] = []

    def earlier_runs(self, run: dict[str, Any], count: int) -> list[dict[str, Any]]:
        self.asked.append(count)
        ids = [r["id"] for r, _ in self.runs]
        return [r for r, _ in reversed(self.runs[: ids.index(run["id"])])][:count]

    def measurements(self, run_id: str) -> list[dict[str, Any]]:
        return next(rows for r, rows in self.runs if r["id"] == run_id)


def test_history_factor_reads_the_runs_before_and_puts_a_compared_base_last() -> None:
    runs = _runs(4, random.Random(5), run_sd=0.1)
    store = _Store([({"id": f"r{k}"}, rows) for k, rows in enumerate(runs)])
    assert history_factor(store, {"id": "r3"}, runs[3]) == rerun_factor(runs[:3])
    # One run before it: no earlier pair, so the run itself is paired with it.
    assert history_factor(store, {"id": "r1"}, runs[1]) == rerun_factor(runs[:2])
    assert history_factor(store, {"id": "r0"}, runs[0]) is None  # nothing before it
    # Compared with r0, r3's history is r1, r2, then r0 (r3 itself not read).
    against = history_factor(store, {"id": "r3"}, runs[3], ({"id": "r0"}, runs[0]))
    assert against == rerun_factor([runs[1], runs[2], runs[0]])
    # Two runs and no history: the compared pair itself.
    lone = history_factor(store, {"id": "r1"}, runs[1], ({"id": "r0"}, runs[0]))
    assert lone == rerun_factor([runs[0], runs[1]])
    assert history_factor(store, {}, runs[3]) is None  # a run not stored


def _shifted(count: int, rng: random.Random, shift_sd: float) -> list[list[dict[str, Any]]]:
    """Runs whose every point moves together by a run-level shift (log sd ``shift_sd``)."""
    runs = _runs(count, rng)
    out = []
    for rows in runs:
        factor = math.exp(rng.gauss(0.0, shift_sd))
        out.append(
            [_row(r["benchmark_id"], [m * factor for m in r["process_medians_s"]]) for r in rows]
        )
    return out


def test_the_shift_line_is_quiet_on_identical_code_and_finds_a_whole_run_slowdown() -> None:
    alarms = found = 0
    trials = 200
    for seed in range(trials):
        rng = random.Random(1000 + seed)
        runs = _shifted(12, rng, shift_sd=0.03)  # ten earlier pairs, as HISTORY reads
        quiet = shared_shift(runs[:11], runs[10], runs[11], 0.05, 0.05)
        assert quiet is not None and quiet.pairs == 10
        alarms += quiet.mark in ("slower", "faster")
        slow = [
            _row(r["benchmark_id"], [m * 1.15 for m in r["process_medians_s"]]) for r in runs[7]
        ]
        judged = shared_shift(runs[:7], runs[6], slow, 0.05, 0.05)
        assert judged is not None
        found += judged.mark == "slower"
        assert judged.ci_low <= judged.ratio <= judged.ci_high
    # Identical code: 6 of 200 (3 %) at these seeds, about alpha.
    assert alarms <= 0.05 * trials + 3 * math.sqrt(0.05 * 0.95 * trials), alarms
    # +15 % at every point against the machine's 3 % a run (4.2 % between two runs): found
    # in 154 of 200 (77 %); the shift of the two runs compared is part of what it must beat.
    assert found >= 0.7 * trials, found


def test_a_shift_with_too_little_history_is_not_judged() -> None:
    runs = _shifted(3, random.Random(2), shift_sd=0.03)
    shift = shared_shift(runs[:2], runs[1], runs[2], 0.05, 0.05)
    assert shift is not None and shift.mark == NOT_JUDGED and shift.pairs == 1
    assert "not judged" in shift.line and "3 needed" in shift.line
    assert (
        shared_shift([], runs[0][: MIN_POINTS - 1], runs[1][: MIN_POINTS - 1], 0.05, 0.05) is None
    )


def _judged(
    runs: list[list[dict[str, Any]]], head: list[dict[str, Any]], after: bool
) -> tuple[Any, Any]:
    """compare's judgement of ``head`` against ``runs[-1]`` with ``runs`` as the history:
    beyond the shared shift (``after``) or with the shift left in every point."""
    shift = shared_shift(runs, runs[-1], head, 0.05, 0.05)
    assert shift is not None and shift.judged
    rerun = factor_of(runs, head, after_shift=after)
    assert rerun is not None and rerun.after_shift is after
    return compare_rows(runs[-1], head, rerun=rerun, shift=shift if after else None), shift


def test_points_judged_beyond_the_shared_shift_keep_alpha_and_find_more() -> None:
    """Runs whose every point moves together by the machine's 6 % a run, beside each
    point's own 3 % (log sd): taken out, the shift no longer hides a change at a third of
    the points, and identical code is flagged no more often."""
    trials, alarms, found, raw_found, changed = 20, 0, 0, 0, 0
    for seed in range(trials):
        rng = random.Random(3000 + seed)
        runs = [
            [_row(r["benchmark_id"], r["process_medians_s"]) for r in rows]
            for rows in _shifted(7, rng, shift_sd=0.06)
        ]
        runs = [_rows_with_run_term(rows, rng, 0.03) for rows in runs]
        same, _ = _judged(runs[:6], runs[6], after=True)
        alarms += any(p.mark in ("slower", "faster") for p in same.points)
        slow = [
            _row(
                r["benchmark_id"],
                [m * (1.25 if k % 3 == 0 else 1.0) for m in r["process_medians_s"]],
            )
            for k, r in enumerate(runs[6])
        ]
        beyond, shift = _judged(runs[:6], slow, after=True)
        raw, _ = _judged(runs[:6], slow, after=False)
        assert beyond.after_shift and not raw.after_shift
        for k, (p, q) in enumerate(zip(beyond.points, raw.points, strict=True)):
            assert p.raw_ratio == pytest.approx(q.ratio)
            assert p.ratio == pytest.approx(q.ratio / shift.ratio)
            if k % 3 == 0:
                changed += 1
                found += p.mark == "slower"
                raw_found += q.mark == "slower"
    # A comparison flags any of its 60 points in at most about alpha of trials (q-values).
    assert alarms <= 0.05 * trials + 3 * math.sqrt(0.05 * 0.95 * trials), alarms
    assert found > raw_found, (found, raw_found)
    # 40 trials found 323 of 800 changed points beyond the shift, 165 with it left in.
    assert found >= 1.5 * raw_found, (found, raw_found, changed)


def _rows_with_run_term(
    rows: list[dict[str, Any]], rng: random.Random, sd: float
) -> list[dict[str, Any]]:
    """``rows`` with each point's own run-level term (log sd ``sd``) on its processes."""
    out = []
    for r in rows:
        level = math.exp(rng.gauss(0.0, sd))
        out.append(_row(r["benchmark_id"], [m * level for m in r["process_medians_s"]]))
    return out


def test_a_whole_run_slowdown_is_the_shift_line_s_not_every_point_s() -> None:
    rng = random.Random(11)
    runs = _shifted(7, rng, shift_sd=0.03)
    slow = [_row(r["benchmark_id"], [m * 1.2 for m in r["process_medians_s"]]) for r in runs[6]]
    judged, shift = _judged(runs[:6], slow, after=True)
    assert shift.mark == "slower" and judged.shift_regressed
    assert not any(p.mark in ("slower", "faster") for p in judged.points)
    # The geometric mean is of the points' own ratios (beyond the shift it would be ~1).
    assert judged.geomean == pytest.approx(shift.ratio, rel=0.03) and shift.ratio > 1.1
    document = judged.to_dict()
    assert document["after_shift"] and document["run_to_run"]["after_shift"]
    assert document["points"][0]["raw_ratio"] == pytest.approx(
        document["points"][0]["ratio"] * shift.ratio
    )


def test_the_shift_leaves_out_the_points_that_changed_on_their_own() -> None:
    """+25 % at a third of the points: the plain median moves towards them by about 0.67
    of the points' scatter, the shift that leaves them out stays at what every point
    moved by; on identical code it leaves out a point in few pairs."""
    trials, plain_bias, bias, quiet_left_out = 40, [], [], 0
    for seed in range(trials):
        rng = random.Random(5000 + seed)
        before, after = _shifted(2, rng, shift_sd=0.0)
        quiet = pair_shift(before, after)
        assert quiet is not None and quiet.points + quiet.left_out == POINTS
        quiet_left_out += quiet.left_out > 0
        slow = [
            _row(
                r["benchmark_id"],
                [m * (1.25 if k % 3 == 0 else 1.0) for m in r["process_medians_s"]],
            )
            for k, r in enumerate(after)
        ]
        moved = pair_shift(before, slow)
        assert moved is not None
        logs = sorted(
            math.log(s["median_s"] / b["median_s"]) for b, s in zip(before, slow, strict=True)
        )
        plain_bias.append(statistics.median(logs) - quiet.log)
        bias.append(moved.log - quiet.log)
        # Most of the changed third is left out, and no more than it. The mean bias is
        # 0.005 in log (0.029 for the plain median), 1 of 40 quiet pairs leaves one out.
        assert 0.5 * POINTS / 3 <= moved.left_out <= POINTS / 3 + 3, moved
    assert quiet_left_out <= 0.05 * trials + 3 * math.sqrt(0.05 * 0.95 * trials), quiet_left_out
    assert statistics.mean(bias) < 0.3 * statistics.mean(plain_bias), (bias, plain_bias)


def test_a_change_of_the_printed_mde_at_a_third_of_the_points_is_found_at_its_power() -> None:
    """As a user would, beyond a judged shift: two runs of identical code print each
    point's MDE (for a change at a third of the points); the next run slows a random third
    by exactly that, and compare against the run before it finds them at about the MDE's
    80 % (the run level moves by 3 % a run, each point by its own 3 % too)."""
    from benchbench.analysis.detectable import BEYOND_SHIFT

    found = changed = 0
    for seed in range(12):
        rng = random.Random(7000 + seed)
        runs = [_rows_with_run_term(rows, rng, 0.03) for rows in _shifted(9, rng, shift_sd=0.03)]
        same, _ = _judged(runs[:7], runs[7], after=True)
        assert same.share == BEYOND_SHIFT and "a third of the points" in (
            same.detectable.sentence() or ""
        )
        mde = {p.benchmark_id: p.mde for p in same.points}
        third = set(rng.sample(sorted(mde), POINTS // 3))
        slow = [
            _row(
                r["benchmark_id"],
                [
                    m * (1 + mde[r["benchmark_id"]] if r["benchmark_id"] in third else 1.0)
                    for m in r["process_medians_s"]
                ],
            )
            for r in runs[8]
        ]
        judged, _ = _judged(runs[:8], slow, after=True)
        for p in judged.points:
            if p.benchmark_id in third:
                changed += 1
                found += p.mark == "slower"
    # 207 of 240 (86 %) at these seeds; 181 (75 %) with the plain median as the shift,
    # and fewer with the MDE for a change at every point.
    assert found >= 0.8 * changed, (found, changed)


def _felt(count: int, rng: random.Random, felt: int, step: float = 0.10) -> list[list[Row]]:
    """``count`` runs whose machine is in a slow phase in about half of them, which
    ``felt`` points (their processes 3 % apart) feel by ``step`` and the others do not;
    every point moves together by 3 % a run and by its own 1 %."""
    spreads = [0.03 if p < felt else rng.uniform(0.03, 0.12) for p in range(POINTS)]
    runs = []
    for _ in range(count):
        slow_phase, shift = rng.random() < 0.5, rng.gauss(0.0, 0.03)
        rows = []
        for p, sd in enumerate(spreads):
            level = math.log(1e-4 * (1 + p)) + shift + rng.gauss(0.0, 0.01)
            level += math.log1p(step) if p < felt and slow_phase else 0.0
            medians = [math.exp(level + rng.gauss(0.0, sd)) for _ in range(PROCESSES)]
            rows.append(_row(f"p{p}", medians))
        runs.append(rows)
    return runs


def _apart(history: list[list[Row]], head: list[Row], own: bool) -> Any:
    """compare's judgement of ``head`` against ``history[-1]`` (:func:`apart`); ``own``
    False: every point at the one factor, the shift read at it."""
    rerun, shift = apart(history, head, 0.05, 0.05)
    if not own and rerun is not None:
        rerun = dataclasses.replace(rerun, own={})
        shift = shared_shift(history, history[-1], head, 0.05, 0.05, rerun.factor)
    return compare_rows(history[-1], head, rerun=rerun, shift=shift)


@pytest.mark.parametrize(("felt", "trials"), [(8, 30), (0, 20)])
def test_a_point_s_own_factor_keeps_kernels_the_machine_moves_alone_quiet(
    felt: int, trials: int
) -> None:
    """A machine whose change of speed some kernels feel and others do not: with one
    factor those points are flagged on identical code whenever the phase changed between
    the two runs; each point's own factor from its earlier pairs keeps them quiet, and a
    +25 % change at a third of the other points is found about as often (``felt`` 0: a
    machine that moves every point alike loses little power to the points' own factors)."""
    alarms, found, changed = {True: 0, False: 0}, {True: 0, False: 0}, 0
    for seed in range(trials):
        rng = random.Random(9000 + seed)
        runs = _felt(10, rng, felt)
        third = set(rng.sample(range(felt, POINTS), POINTS // 3))
        slow = [
            _row(
                r["benchmark_id"],
                [m * (1.25 if k in third else 1.0) for m in r["process_medians_s"]],
            )
            for k, r in enumerate(runs[9])
        ]
        changed += len(third)
        for own in (True, False):
            same = _apart(runs[:9], runs[9], own)
            alarms[own] += any(p.mark in ("slower", "faster") for p in same.points)
            judged = _apart(runs[:9], slow, own)
            found[own] += sum(p.mark == "slower" for k, p in enumerate(judged.points) if k in third)
    # At these seeds: 0 of 30 trials flagged with the points' own factors, 9 of 30 with
    # one factor; found 418 and 393 of 600. Alike: 0 and 0 of 20, found 281 and 281 of 400.
    assert alarms[True] <= 0.05 * trials + 3 * math.sqrt(0.05 * 0.95 * trials), alarms
    if felt:
        assert alarms[False] > 3 * max(1, alarms[True]), alarms
    assert found[True] >= 0.85 * found[False], (found, changed)
