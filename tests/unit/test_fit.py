"""The t0 + work/rate fit, on synthetic curves with known parameters."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.analysis.fit import fit_curve
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
