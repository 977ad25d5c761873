"""The t0 + work/rate fit and crossovers, on synthetic curves with known parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchbench.analysis.fit import (
    Fit,
    crossover,
    crossover_measured,
    fit_curve,
    measured_crossovers,
)
from benchbench.core.errors import BenchbenchError

SIZES = np.geomspace(2**10, 2**28, 19)  # bytes: 1 KiB .. 256 MiB, like a real sweep


def synthetic(t0_s: float, rate: float, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (t0_s + SIZES / rate) * np.exp(rng.normal(0.0, noise, SIZES.size))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_recovers_t0_and_rate_within_10_percent_under_5_percent_noise(seed: int) -> None:
    t0, rate = 4e-6, 12e9
    fit = fit_curve(SIZES, synthetic(t0, rate, 0.05, seed), work_unit="bytes")
    assert fit.t0_s == pytest.approx(t0, rel=0.10)
    assert fit.rate_per_s == pytest.approx(rate, rel=0.10)
    assert fit.n_points == SIZES.size
    assert fit.work_unit == "bytes"
    assert 0.99 < fit.r2 <= 1.0
    assert 0.02 < fit.rel_rms < 0.08  # the 5 % noise, seen through the residuals


def test_exact_data_gives_exact_fit_and_predict() -> None:
    fit = fit_curve(SIZES, 1e-5 + SIZES / 1e9)
    assert fit.t0_s == pytest.approx(1e-5, rel=1e-4)
    assert fit.rate_per_s == pytest.approx(1e9, rel=1e-4)
    assert fit.r2 == pytest.approx(1.0, abs=1e-8)
    assert float(fit.predict(1e9)) == pytest.approx(1.0 + 1e-5, rel=1e-4)
    np.testing.assert_allclose(fit.predict([0, 2e9]), [1e-5, 2.0 + 1e-5], rtol=1e-4)


def test_outliers_do_not_bend_the_fit() -> None:
    times = 2e-6 + SIZES / 5e9
    times[[3, 11, 16]] *= 2.5  # three preempted points
    fit = fit_curve(SIZES, times)
    assert fit.t0_s == pytest.approx(2e-6, rel=0.05)
    assert fit.rate_per_s == pytest.approx(5e9, rel=0.05)


def test_relative_fit_keeps_small_sizes_in_view() -> None:
    # An absolute fit would be decided by the 256 MiB point; t0 would be lost in its noise.
    times = 3e-6 + SIZES / 20e9
    times[-1] *= 1.03
    assert fit_curve(SIZES, times).t0_s == pytest.approx(3e-6, rel=0.02)


def test_weights_silence_points() -> None:
    times = 2e-6 + SIZES / 5e9
    times[5] *= 10.0
    weights = np.ones_like(times)
    weights[5] = 0.0
    fit = fit_curve(SIZES, times, weights)
    assert fit.rate_per_s == pytest.approx(5e9, rel=1e-3)
    assert fit.t0_s == pytest.approx(2e-6, rel=1e-3)


def test_zero_overhead_stays_non_negative() -> None:
    fit = fit_curve(SIZES, SIZES / 8e9)
    assert 0.0 <= fit.t0_s < 1e-9
    assert fit.rate_per_s == pytest.approx(8e9, rel=1e-3)


def test_flat_curve_has_unbounded_rate() -> None:
    fit = fit_curve(SIZES[:6], np.full(6, 5e-6))
    assert fit.t0_s == pytest.approx(5e-6, rel=1e-3)
    assert fit.rate_per_s > 1e15  # time does not grow with work: no finite rate is resolved


@pytest.mark.parametrize(
    ("work", "times", "match"),
    [
        ([1.0, 2.0], [1.0, 2.0], "at least 3 points"),
        ([8.0, 8.0, 8.0], [1.0, 1.1, 0.9], "same work"),
        ([1.0, 2.0, 3.0], [1.0, 0.0, 3.0], "time_s must be finite and > 0"),
        ([1.0, 2.0, 3.0], [1.0, -2.0, 3.0], "time_s must be finite and > 0"),
        ([1.0, 2.0, 3.0], [1.0, float("nan"), 3.0], "time_s must be finite"),
        ([0.0, 2.0, 3.0], [1.0, 2.0, 3.0], "work must be finite and > 0"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], "same length"),
    ],
)
def test_degenerate_inputs_raise_clear_errors(
    work: list[float], times: list[float], match: str
) -> None:
    with pytest.raises(BenchbenchError, match=match):
        fit_curve(work, times)


def test_bad_weights_raise() -> None:
    with pytest.raises(BenchbenchError, match="weights"):
        fit_curve([1, 2, 3], [1, 2, 3], [1, -1, 1])
    with pytest.raises(BenchbenchError, match="one entry per point"):
        fit_curve([1, 2, 3], [1, 2, 3], [1, 1])


# Two known curves: a GPU-like one (20 µs launch, 500 GB/s) and a CPU-like one
# (1 µs, 10 GB/s). Equal at w: 20e-6 + w/5e11 = 1e-6 + w/1e10 -> w = 19e-6 / (1e-10 - 2e-12).
GPU = Fit(t0_s=20e-6, rate_per_s=5e11, r2=1.0, n_points=10, work_unit="bytes")
CPU = Fit(t0_s=1e-6, rate_per_s=1e10, r2=1.0, n_points=10, work_unit="bytes")
EXPECTED = 19e-6 / (1 / 1e10 - 1 / 5e11)


def test_model_crossover_at_the_right_place() -> None:
    w = crossover(GPU, CPU, (1.0, 1e12))
    assert w == pytest.approx(EXPECTED, rel=1e-9)
    assert float(GPU.predict(w)) == pytest.approx(float(CPU.predict(w)), rel=1e-9)
    assert crossover(CPU, GPU, (1.0, 1e12)) == pytest.approx(EXPECTED, rel=1e-9)  # symmetric


def test_model_crossover_outside_range_or_parallel_is_none() -> None:
    assert crossover(GPU, CPU, (1.0, EXPECTED / 2)) is None
    assert crossover(GPU, CPU, (EXPECTED * 2, 1e12)) is None
    parallel = Fit(t0_s=5e-6, rate_per_s=1e10, r2=1.0, n_points=3, work_unit="bytes")
    assert crossover(CPU, parallel, (1.0, 1e12)) is None


def test_model_crossover_rejects_mixed_units_and_bad_range() -> None:
    flops = Fit(t0_s=1e-6, rate_per_s=1e9, r2=1.0, n_points=3, work_unit="flop")
    with pytest.raises(BenchbenchError, match="different work units"):
        crossover(CPU, flops, (1.0, 10.0))
    with pytest.raises(BenchbenchError, match="work_range"):
        crossover(CPU, GPU, (10.0, 1.0))


def test_measured_crossover_interpolates_in_log_space() -> None:
    sizes = np.geomspace(2**10, 2**30, 21)
    w = crossover_measured(sizes, GPU.predict(sizes), sizes, CPU.predict(sizes))
    assert w is not None
    # Between adjacent measured sizes (2x apart), log-log interpolation of near-straight
    # curves lands within a few percent of the exact crossing.
    assert w == pytest.approx(EXPECTED, rel=0.05)
    lower = sizes[sizes < EXPECTED].max()
    assert lower < w < 2 * lower


def test_measured_crossover_none_when_order_never_changes() -> None:
    sizes = np.geomspace(2**10, 2**16, 7)  # all below the crossing: CPU faster throughout
    assert crossover_measured(sizes, GPU.predict(sizes), sizes, CPU.predict(sizes)) is None


def test_measured_crossover_uses_common_sizes_and_medians() -> None:
    wa = [1, 1, 1, 2, 4, 8, 16]
    ta = [9, 1, 1, 2, 4, 8, 16]  # median at size 1 is 1
    wb = [1, 2, 3, 4, 8, 16]
    tb = [2, 3, 100, 3, 6, 12]  # size 3 is not on curve a and must be ignored
    # log(ta/tb): 1: -, 2: -, 4: +, 8: +, 16: + -> one crossing between 2 and 4
    found = measured_crossovers(wa, ta, wb, tb)
    assert len(found) == 1
    ra, rb = math.log(2 / 3), math.log(4 / 3)
    assert found[0] == pytest.approx(math.exp(math.log(2) + ra / (ra - rb) * math.log(2)))


def test_measured_crossover_exact_tie_and_multiple_crossings() -> None:
    w = [1, 2, 4, 8, 16]
    assert measured_crossovers(w, [1, 2, 4, 8, 16], w, [2, 2, 2, 2, 2]) == [2.0]
    noisy = measured_crossovers(w, [1.0, 1.1, 0.9, 1.1, 0.9], w, [1.0] * 5)
    assert len(noisy) == 3
    assert crossover_measured(w, [1.0, 1.1, 0.9, 1.1, 0.9], w, [1.0] * 5) == noisy[0]


def test_measured_crossover_rejects_non_positive_times() -> None:
    with pytest.raises(BenchbenchError, match="finite and > 0"):
        crossover_measured([1, 2], [1, 0], [1, 2], [1, 1])
