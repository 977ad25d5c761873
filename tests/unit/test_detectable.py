"""The minimum detectable effect (MDE), validated like a classifier on injected timings.

A simulated gate suite of 20 points, 5 processes a run (``run``'s default rounds), 10
samples a process; per point a between-process log spread drawn from 2-12 %, one process
in ten 17-39 % slow throughout (as measured with two threads on the 2-core EPYC),
samples within a process 1 % apart. As a user would: two runs of identical code are
compared and print an MDE per point; a third run carries a slowdown of ``f`` times that
point's printed MDE; ``compare`` (the family verdict, alpha 0.05, min effect 5 %) of the
second run against the third says at how many points it was found. 60 trials of 20
points, no clock; four seeds (33, 1, 2, 3):

======================  ==============================  ===============================
injected slowdown       points marked ``slower``        before the truth's uncertainty
======================  ==============================  ===============================
1.5x the printed MDE    97.3-97.9 %                     95.6-96.3 %
1.0x the printed MDE    85.2-87.4 %                     71.3-74.1 %
0.5x the printed MDE    16.2-17.8 %                     9.3-11.2 %
none (A/A)              0-5 % of comparisons flag a     the same
                        point
======================  ==============================  ===============================

The median printed MDE is 29 % (24-26 % before). The right column is the figure that took
the A/A pair's standard error for the truth: at exactly the printed size it was found at
71-74 % of points, under the nominal 80 % (and 67 % on real runs, BENCHMARKS.md), because
a standard error read from five processes a side is itself uncertain. The figure now
averages the verdict's power over that uncertainty too
(:func:`benchbench.analysis.detectable._verdict_factor`), and a change of the printed size
is found at 85-87 %: at or above its power, never below.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchbench.analysis import compare, detectable

POINTS, PROCESSES, SAMPLES, TRIALS = 20, 5, 10, 60


def _run(rng: np.random.Generator, spreads: np.ndarray, slowdown: np.ndarray) -> list[dict]:
    rows = []
    for k, (spread, slow) in enumerate(zip(spreads, slowdown, strict=True)):
        medians = 1e-4 * slow * np.exp(rng.normal(0.0, spread, PROCESSES))
        wild = rng.random(PROCESSES) < 0.1
        medians = medians * np.where(wild, 1 + rng.uniform(0.17, 0.39, PROCESSES), 1.0)
        samples = np.concatenate([m * np.exp(rng.normal(0.0, 0.01, SAMPLES)) for m in medians])
        rows.append(
            {
                "benchmark_id": f"p{k}",
                "suite": "gate",
                "workload": f"w{k % 5}",
                "variant": "torch",
                "device": "cpu",
                "dtype": "float32",
                "size": 2**16 * (1 + k // 5),
                "shape": [2**16 * (1 + k // 5)],
                "params": {},
                "status": "ok",
                "reason": None,
                "samples_s": samples.tolist(),
                "calls_per_sample": 1,
                "process_samples": [SAMPLES] * PROCESSES,
                "median_s": float(np.median(samples)),
            }
        )
    return rows


def _shares(factor: float, seed: int = 33) -> tuple[float, float, float]:
    """(share of points found slower, share of A/A comparisons flagging any point, the
    median printed MDE) over the trials, with a slowdown of ``factor`` x each point's MDE."""
    rng = np.random.default_rng(seed)
    found = tested = alarms = 0
    mdes: list[float] = []
    for _ in range(TRIALS):
        spreads = rng.uniform(0.02, 0.12, POINTS)
        same = np.ones(POINTS)
        first, second = _run(rng, spreads, same), _run(rng, spreads, same)
        aa = compare.compare_rows(first, second)
        alarms += any(p.mark in (compare.SLOWER, compare.FASTER) for p in aa.points)
        printed = np.array([p.mde for p in aa.points], dtype=float)
        mdes.extend(printed.tolist())
        ab = compare.compare_rows(second, _run(rng, spreads, 1 + factor * printed))
        found += sum(p.mark == compare.SLOWER for p in ab.points)
        tested += len(ab.points)
    return found / tested, alarms / TRIALS, float(np.median(mdes))


def test_a_slowdown_half_again_the_printed_mde_is_found_at_most_points():
    found, alarms, median = _shares(1.5)
    assert found >= 0.80, (found, median)
    assert alarms <= 0.10


def test_a_slowdown_of_the_printed_mde_is_found_at_its_power():
    """Issue 41: a change of the printed size is found at >= 75 % of the points (80 %
    nominal); and an MDE is printed at every point that has a test."""
    found, _alarms, median = _shares(1.0)
    assert found >= 0.75, (found, median)


def test_a_slowdown_half_the_printed_mde_is_rarely_found():
    found, _alarms, _median = _shares(0.5)
    assert found <= 0.30, found


def test_the_factor_is_the_noncentral_t_power_and_the_normal_in_the_limit():
    from scipy.special import stdtrit
    from scipy.stats import nct

    k = detectable.detectable_factor(4.0, 0.04, 0.8)
    assert nct.sf(stdtrit(4.0, 1 - 0.02), 4.0, k) == pytest.approx(0.8, abs=1e-6)
    # z(0.975) + z(0.8) = 1.960 + 0.842: the textbook sample-size constant.
    assert detectable.detectable_factor(math.inf, 0.05, 0.8) == pytest.approx(2.8016, abs=1e-3)
    # Fewer degrees of freedom, a larger factor: three processes a side cost a lot.
    assert detectable.detectable_factor(2.0) > detectable.detectable_factor(4.0) > 2.8016


def test_the_effect_grows_with_the_standard_error_and_is_exact_at_the_edges():
    assert detectable.detectable_effect(0.0, 4.0) == 0.0
    assert detectable.detectable_effect(math.inf, 4.0) == math.inf
    assert math.isnan(detectable.detectable_effect(math.nan, 4.0))
    small, large = detectable.detectable_effect(0.01, 4.0), detectable.detectable_effect(0.05, 4.0)
    assert 0 < small < large
    k = detectable.detectable_factor(4.0)
    assert large == pytest.approx(math.expm1(k * 0.05))
    with pytest.raises(ValueError, match="degrees of freedom"):
        detectable.detectable_factor(0.0)
    with pytest.raises(ValueError, match="power"):
        detectable.detectable_effect(0.01, 4.0, power=1.0)


def test_a_point_alone_needs_more_than_a_change_at_every_point():
    every, alone = detectable.family_effects(0.03, 4.0, 0.05, 0.8, 20)
    assert alone > every > 0
    assert detectable.family_effects(None, None, 0.05, 0.8, 20) == (
        pytest.approx(math.nan, nan_ok=True),
        pytest.approx(math.nan, nan_ok=True),
    )


def test_a_comparison_that_could_not_see_the_minimum_effect_says_so():
    blind = detectable.detectable([0.18, 0.25, None, 0.4], min_effect=0.05)
    assert blind.blind and blind.smallest == 0.18
    line = blind.sentence() or ""
    assert "could not have seen a change below 18 %" in line
    assert "use `ab` or `--metric instructions`" in line
    # ab is already paired: its remedy is more rounds.
    paired = blind.sentence(paired=True) or ""
    assert "more `--rounds` or `--metric instructions`" in paired and "use `ab`" not in paired
    seeing = detectable.detectable([0.03, 0.25], min_effect=0.05)
    assert not seeing.blind and seeing.below_min_effect == 1
    assert "could not" not in (seeing.sentence() or "")
    assert detectable.detectable([None]).sentence() is None
    assert detectable.format_effect(0.03, 0.05) == "< 5 %"
    assert detectable.format_effect(0.183) == "18 %"
    assert detectable.format_effect(0.072) == "7.2 %"
    # Two processes a side can leave an MDE of thousands of times: bounded, never 7 digits.
    assert detectable.format_effect(9.5) == "950 %"
    assert detectable.format_effect(17.93) == detectable.format_effect(27975.93) == "> 1000 %"
    assert detectable.format_effect(detectable.below(27975.93)) == "1000 %"


def test_compare_carries_the_mde_per_point_and_for_the_run_in_json():
    rng = np.random.default_rng(1)
    spreads = np.full(POINTS, 0.05)
    first, second = _run(rng, spreads, np.ones(POINTS)), _run(rng, spreads, np.ones(POINTS))
    out = compare.compare_rows(first, second).to_dict()
    assert all(p["mde"] is not None and p["mde_alone"] > p["mde"] > 0 for p in out["points"])
    run = out["detectable"]
    assert run["power"] == 0.8 and run["alpha_point"] == pytest.approx(0.04)
    assert run["smallest"] == min(p["mde"] for p in out["points"])


def test_the_step_a_series_could_show_shrinks_with_runs_and_grows_with_noise():
    assert math.isnan(detectable.step_effect(0.02, 5))  # fewer than 6 runs: no test
    assert math.isnan(detectable.step_effect(None, 30))
    short, long = detectable.step_effect(0.02, 6), detectable.step_effect(0.02, 40)
    assert short > long > 0
    assert detectable.step_effect(0.05, 40) > long
    # The detector's t-test at p < 0.001 with 3 runs after the step and 37 before.
    k = detectable.detectable_factor(38.0, 0.001, 0.8)
    assert long == pytest.approx(math.expm1(k * 0.02 * math.sqrt(1 / 3 + 1 / 37)))
    # Beyond a window (50 runs) the runs before the step stop helping.
    assert detectable.step_effect(0.02, 500) == detectable.step_effect(0.02, 50)


def test_the_verdict_hands_over_the_standard_error_and_df_its_test_used():
    from benchbench.analysis import verdict

    rng = np.random.default_rng(7)
    base = (1e-3 * np.exp(rng.normal(0, 0.03, 40))).tolist()
    head = (1e-3 * np.exp(rng.normal(0, 0.03, 40))).tolist()
    welch = verdict.estimate(base, head, base_processes=[10] * 4, contender_processes=[10] * 4)
    paired = verdict.estimate(
        base, head, paired=True, base_processes=[10] * 4, contender_processes=[10] * 4
    )
    alone = verdict.estimate(base, head)  # one process a side: the bootstrap
    assert welch.level == "process" and 1.0 <= welch.df <= 6.0 and welch.se_log > 0
    assert paired.df == 3.0 and paired.se_log > 0  # one-sample t on 4 per-round ratios
    assert alone.level == "sample" and alone.df == math.inf and alone.se_log > 0
    # The bootstrap's se is its interval read as a normal one.
    assert math.log(alone.ci_high / alone.ci_low) == pytest.approx(2 * 1.959964 * alone.se_log)


def test_power_outside_0_1_is_a_usage_error_naming_the_flag():
    import argparse

    from benchbench.cli.compare import check_verdict
    from benchbench.core.errors import UsageError

    args = argparse.Namespace(min_effect=0.05, alpha=0.05, instructions_min_effect=0.02, power=1.2)
    with pytest.raises(UsageError, match="--power must be in"):
        check_verdict(args)


@pytest.mark.parametrize(("se", "df"), [(0.005, 19.0), (0.02, 4.0), (0.05, 8.0), (0.02, math.inf)])
def test_the_printed_mde_is_found_at_its_power_by_the_verdict_as_it_decides(se, df):
    """Injected estimates: at the printed MDE the verdict's two conditions together
    (|t| past its critical value on ``df`` and the ratio at least 1 + m) hold at 80 %,
    the true standard error drawn as the shown ``se`` leaves it (``se * sqrt(df /
    chi2)``); with the shown ``se`` taken for the truth, at least 80 %."""
    from scipy.special import stdtrit

    alpha, power, m = 0.04, 0.8, 0.05
    effect = detectable.verdict_effect(se, df, alpha, power, m)
    assert effect >= m
    rng = np.random.default_rng(41)
    n = 200_000
    finite = math.isfinite(df)
    critical = float(stdtrit(df if finite else 1e9, 1 - alpha / 2))

    def share(truth: np.ndarray) -> float:
        logs = math.log1p(effect) + truth * rng.standard_normal(n)
        seen = truth * (np.sqrt(rng.chisquare(df, n) / df) if finite else 1.0)
        return float(((logs / seen > critical) & (logs >= math.log1p(m))).mean())

    truth = se * (np.sqrt(df / rng.chisquare(df, n)) if finite else np.ones(n))
    assert share(truth) == pytest.approx(power, abs=0.01)
    assert share(np.full(n, se)) >= power - 0.005


def test_a_change_of_the_minimum_effect_is_never_printed_as_detectable():
    # A precise point finds a true 5 % change about half the time: the MDE is above 5 %.
    assert detectable.verdict_effect(0.001, 19.0, 0.04, 0.8, 0.05) > 0.05
    assert detectable.verdict_effect(0.0, 19.0, 0.04, 0.8, 0.05) == 0.05
    assert detectable.format_effect(detectable.verdict_effect(0.001, 19.0), 0.05) != "< 5 %"
