import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from benchbench.core import columns
from benchbench.core.stats import (
    Stats,
    median_ci_ranks,
    modes,
    pair_log_ratios,
    process_interval,
    process_intervals,
    process_medians,
    split_processes,
)


def test_statistics_of_known_samples():
    stats = Stats.from_samples([float(v) for v in range(1, 11)], calls_per_sample=1)
    assert stats.n == 10
    assert stats.median_s == 5.5
    assert stats.mean_s == 5.5
    assert stats.min_s == 1 and stats.max_s == 10
    assert stats.q1_s == pytest.approx(3.25)
    assert stats.q3_s == pytest.approx(7.75)
    assert stats.stdev_s == pytest.approx(np.std(range(1, 11), ddof=1))


def test_calls_per_sample_divides_every_sample():
    stats = Stats.from_samples([10.0, 20.0, 30.0], calls_per_sample=10)
    assert stats.per_call_s == (1.0, 2.0, 3.0)
    assert stats.median_s == 2.0


def test_median_ci_ranks_match_the_binomial_table():
    # Classic table for the 95 % distribution-free CI of the median:
    # n=10 -> [x(2), x(9)], n=20 -> [x(6), x(15)], n=100 -> [x(40), x(61)] (1-based).
    assert median_ci_ranks(10) == (1, 8)
    assert median_ci_ranks(20) == (5, 14)
    assert median_ci_ranks(100) == (39, 60)


@pytest.mark.parametrize("n", [6, 10, 25, 100, 1000])
def test_median_ci_covers_at_least_the_confidence(n):
    lo, hi = median_ci_ranks(n)
    # P(x_(lo+1) <= m <= x_(hi+1)) = P(lo+1 <= B <= hi) for B ~ Bin(n, 1/2)
    coverage = scipy_stats.binom.cdf(hi, n, 0.5) - scipy_stats.binom.cdf(lo, n, 0.5)
    assert coverage >= 0.95


def test_ci_and_relative_width_from_samples():
    samples = [1.0] * 5 + [2.0] * 10 + [3.0] * 5
    stats = Stats.from_samples(samples, 1)
    assert stats.ci_low_s == 2.0 and stats.ci_high_s == 2.0
    assert stats.rel_ci_half_width == 0.0
    wide = Stats.from_samples([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 1)
    assert wide.rel_ci_half_width == pytest.approx((9 - 2) / (2 * 5.5))


def test_empty_samples_are_an_error():
    with pytest.raises(ValueError, match="at least one sample"):
        _ = Stats(()).median_s
    with pytest.raises(ValueError, match="calls_per_sample"):
        Stats.from_samples([1.0], 0)


def test_summary_has_every_field():
    summary = Stats.from_samples([1.0, 2.0, 3.0], 1).summary()
    assert set(summary) == set(Stats.fields)
    assert all(math.isfinite(summary[name]) for name in columns.STATISTICS)
    assert summary["process_medians_s"] == [2.0]


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 10, 11, 50, 333, 1000, 10_000])
def test_median_ci_ranks_equal_scipy_binomial_quantiles(n):
    low = max(1, int(scipy_stats.binom.ppf(0.025, n, 0.5)))
    assert median_ci_ranks(n) == (low - 1, n - low)


# -- several processes: the two-level interval -------------------------------------------


def test_process_counts_must_add_up():
    with pytest.raises(ValueError, match="adding up to the 4 samples"):
        Stats.from_samples([1.0, 2.0, 3.0, 4.0], 1, (1, 2))
    with pytest.raises(ValueError, match="counts >= 1"):
        Stats.from_samples([1.0, 2.0], 1, (2, 0))


def test_process_medians_follow_the_counts():
    stats = Stats.from_samples([2.0, 4.0, 6.0, 10.0, 20.0], 2, (3, 2))
    assert stats.processes == 2
    assert stats.process_medians_s == (2.0, 7.5)
    assert stats.summary()["process_medians_s"] == [2.0, 7.5]
    assert Stats.from_samples([1.0, 2.0, 3.0], 1).process_medians_s == (2.0,)


def test_pair_log_ratios_cancel_what_each_pair_of_samples_shares():
    # The machine's speed halves after the first pair of samples, shared by both samples
    # of each pair; the head is 10 % slower in every pair. The base takes a fourth sample
    # alone, after the head finished and the speed came back: the two sides' medians are
    # 1.5 and 2.2 (a ratio of 1.47); the pairs say 1.1.
    base = [1.0, 2.0, 2.0, 1.0]
    head = [1.1, 2.2, 2.2]
    assert pair_log_ratios(base, head, (4,), (3,)) == pytest.approx([math.log(1.1)])
    assert np.median(head) / np.median(base) == pytest.approx(2.2 / 1.5)
    # One value per pair of processes, process k beside process k.
    two = pair_log_ratios([1.0, 1.0, 3.0, 3.0], [1.2, 1.2, 3.0, 3.0], (2, 2), (2, 2))
    assert two == pytest.approx([math.log(1.2), 0.0])
    with pytest.raises(ValueError, match="as many processes a side, got 2 and 1"):
        pair_log_ratios([1.0, 1.0], [1.0, 1.0], (1, 1), (2,))


def test_processes_that_disagree_widen_the_interval():
    within = [1.0, 1.01, 0.99, 1.02, 0.98] * 4
    agreeing = Stats.from_samples(within * 3, 1, (20, 20, 20))
    spread = Stats.from_samples(
        within + [v * 1.2 for v in within] + [v * 0.9 for v in within], 1, (20, 20, 20)
    )
    # One estimator over processes: processes that agree exactly give an interval of no
    # width around their common median; the interval widens with their spread only.
    assert agreeing.median_s == agreeing.ci_low_s == agreeing.ci_high_s == 1.0
    assert spread.ci_high_s - spread.ci_low_s > 0.2
    assert spread.ci_low_s < spread.median_s < spread.ci_high_s


def test_the_headline_of_several_processes_is_the_centre_of_its_interval():
    rng = np.random.default_rng(7)
    parts = [np.exp(rng.normal(0, 0.05)) * np.exp(rng.normal(0, 0.02, 15)) for _ in range(5)]
    stats = Stats.from_samples(np.concatenate(parts), 1, (15,) * 5)
    logs = np.log(stats.process_medians_s)
    assert stats.median_s == pytest.approx(math.exp(logs.mean()))
    # Symmetric in log space around the headline: the same estimator.
    assert math.log(stats.ci_high_s / stats.median_s) == pytest.approx(
        math.log(stats.median_s / stats.ci_low_s)
    )
    assert process_interval(stats.process_medians_s) == pytest.approx(
        (stats.median_s, stats.ci_low_s, stats.ci_high_s)
    )


def test_every_process_of_a_three_plus_two_bimodal_point_is_in_its_statistics():
    fast, slow = 1.21e-6, 1.83e-6
    medians = [fast, slow, fast * 1.01, slow * 0.99, fast * 0.995]
    samples = [m * (1 + 0.002 * (j - 5)) for m in medians for j in range(11)]
    stats = Stats.from_samples(samples, 1, (11,) * 5)
    assert stats.processes == 5 and stats.n == 55
    assert stats.process_medians_s == pytest.approx(medians)
    # The headline sits between the modes and the interval is as wide as they make it.
    assert stats.ci_low_s < fast * 1.1 and stats.ci_high_s > slow / 1.1
    found = modes(stats.process_medians_s)
    assert found is not None and (sorted(found[0]), sorted(found[1])) == ([0, 2, 4], [1, 3])


def test_two_level_interval_covers_the_true_median_where_one_level_does_not():
    # Each of 3 fresh processes draws its own offset (log-normal, 5 %), then 30 samples
    # with 2 % noise around it: the long-run median is 1.0. The interval that treats all
    # 90 samples as independent covers it rarely; the two-level one about 95 % of the time.
    rng = np.random.default_rng(20261123)
    covered = {"two": 0, "one": 0}
    trials = 400
    for _ in range(trials):
        parts = [np.exp(rng.normal(0, 0.05)) * np.exp(rng.normal(0, 0.02, 30)) for _ in range(3)]
        samples = np.concatenate(parts)
        two = Stats.from_samples(samples, 1, (30, 30, 30))
        one = Stats.from_samples(samples, 1)
        covered["two"] += two.ci_low_s <= 1.0 <= two.ci_high_s
        covered["one"] += one.ci_low_s <= 1.0 <= one.ci_high_s
    assert covered["two"] / trials >= 0.90
    assert covered["one"] / trials <= 0.5


def test_process_medians_vectorised_or_not_are_each_process_s_median():
    rng = np.random.default_rng(3)
    values = rng.lognormal(0.0, 0.3, 40)
    for counts in ([8] * 5, [5, 10, 7, 18], [40], []):
        expected = [float(np.median(part)) for part in split_processes(values, counts)]
        assert process_medians(values, counts) == expected
    with pytest.raises(ValueError, match="adding up to the 40 samples"):
        process_medians(values, [8] * 4)


def test_process_intervals_of_a_table_are_each_row_s_process_interval() -> None:
    rng = np.random.default_rng(3)
    for k in (2, 5, 9):
        table = np.exp(rng.normal(-9.0, 0.1, size=(40, k)))
        centres, lows, highs = process_intervals(table)
        for row, centre, low, high in zip(table, centres, lows, highs, strict=True):
            assert (centre, low, high) == pytest.approx(process_interval(list(row)), rel=1e-12)
    with pytest.raises(ValueError, match=">= 2 medians"):
        process_intervals(np.ones((3, 1)))
