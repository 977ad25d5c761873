"""benchbench.analysis.changepoint: accuracy on seeded synthetic histories, then edge cases.

The accuracy tests are the issue's acceptance criteria (100-point series, 2 % noise,
normal and heavy-tailed); ``benchmarks/changepoint_validation.py`` prints the same
measurements over 1000 series per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from benchbench.analysis.changepoint import Creep, SeriesAnalysis, analyze, regressions
from benchbench.core.errors import BenchbenchError, UsageError

N_SERIES = 200
N_POINTS = 100

Noise = Callable[[np.random.Generator, int], np.ndarray]
NOISES: dict[str, Noise] = {
    "normal": lambda rng, n: rng.normal(0.0, 0.02, n),
    # 2 % times Student t with 3 degrees of freedom: 1.5 % of points beyond 10 %.
    "student-t3": lambda rng, n: 0.02 * rng.standard_t(3, n),
    "laplace": lambda rng, n: rng.laplace(0.0, 0.02 / math.sqrt(2.0), n),
}


def noisy(levels: np.ndarray, noise: Noise, rng: np.random.Generator) -> np.ndarray:
    """Multiplicative noise keeps times positive whatever the tail."""
    return levels * np.exp(noise(rng, levels.size))


def ramp(first: int, n: int = N_POINTS, per_point: float = 0.01, points: int = 20) -> np.ndarray:
    """Flat at 1.0, then +``per_point`` per point from ``first`` for ``points`` points."""
    return 1.0 + per_point * np.clip(np.arange(n) - first + 1, 0, points)


@pytest.mark.parametrize("noise_name", list(NOISES))
def test_a_10_percent_step_is_found_within_3_points_in_90_percent_of_series(
    noise_name: str,
) -> None:
    rng = np.random.default_rng([1, list(NOISES).index(noise_name)])
    found = 0
    for _ in range(N_SERIES):
        k = int(rng.integers(10, 91))
        values = noisy(np.where(np.arange(N_POINTS) >= k, 1.10, 1.0), NOISES[noise_name], rng)
        found += any(abs(cp.index - k) <= 3 for cp in regressions(analyze(values)))
    assert found / N_SERIES >= 0.90


@pytest.mark.parametrize("noise_name", list(NOISES))
def test_flat_series_raise_an_alert_in_at_most_5_percent_of_cases(noise_name: str) -> None:
    rng = np.random.default_rng([2, list(NOISES).index(noise_name)])
    alerts = sum(
        bool(regressions(analyze(noisy(np.ones(N_POINTS), NOISES[noise_name], rng))))
        for _ in range(N_SERIES)
    )
    assert alerts / N_SERIES <= 0.05


@pytest.mark.parametrize("noise_name", ["normal", "student-t3"])
@pytest.mark.parametrize("where", ["middle", "tail"])
def test_a_creep_of_1_percent_per_point_over_20_points_is_reported(
    noise_name: str, where: str
) -> None:
    rng = np.random.default_rng([3, list(NOISES).index(noise_name), where == "tail"])
    as_regression = as_creep = 0
    for _ in range(N_SERIES):
        first = int(rng.integers(10, 71)) if where == "middle" else N_POINTS - 20
        a = analyze(noisy(ramp(first), NOISES[noise_name], rng))
        # first - 1 is the last point at the old level, first + 19 the first at the new.
        as_regression += any(first - 3 <= cp.index <= first + 22 for cp in regressions(a))
        as_creep += any(
            c.rel_change > 0 and abs(c.start - (first - 1)) <= 5 and abs(c.end - (first + 19)) <= 5
            for c in a.creeps
        )
    assert as_regression / N_SERIES >= 0.99
    assert as_creep / N_SERIES >= (0.90 if noise_name == "normal" else 0.80)


def test_a_step_is_not_reported_as_a_creep() -> None:
    rng = np.random.default_rng(4)
    creeps = 0
    for _ in range(N_SERIES):
        k = int(rng.integers(10, 91))
        values = noisy(np.where(np.arange(N_POINTS) >= k, 1.10, 1.0), NOISES["normal"], rng)
        creeps += bool(analyze(values).creeps)
    assert creeps / N_SERIES <= 0.03


def test_creep_fields_describe_the_ramp() -> None:
    values = noisy(ramp(40), NOISES["normal"], np.random.default_rng(5))
    (creep,) = analyze(values).creeps
    assert isinstance(creep, Creep)
    assert 36 <= creep.start <= 42 and 56 <= creep.end <= 62
    assert creep.rel_change == pytest.approx(0.20, abs=0.03)
    assert creep.slope_rel_per_point == pytest.approx(0.01, abs=0.002)
    assert creep.change_points and all(creep.start < k <= creep.end for k in creep.change_points)


def test_a_noise_free_step_is_exact() -> None:
    a = analyze([2.0] * 20 + [3.0] * 20)
    (cp,) = a.change_points
    assert (cp.index, cp.before, cp.after, cp.p_value) == (20, 2.0, 3.0, 0.0)
    assert cp.rel_change == pytest.approx(0.5)
    assert a.noise_rel == 0.0 and not a.unstable and a.creeps == ()


def test_a_step_down_is_an_improvement_not_a_regression() -> None:
    values = noisy(
        np.where(np.arange(N_POINTS) >= 50, 0.8, 1.0), NOISES["normal"], np.random.default_rng(6)
    )
    a = analyze(values)
    assert [cp.index for cp in a.change_points] == [50]
    assert a.change_points[0].rel_change == pytest.approx(-0.2, abs=0.02)
    assert regressions(a) == []
    # For a rate (GB/s) lower is worse: the same drop is a regression.
    assert regressions(a, higher_is_worse=False) == list(a.change_points)


def test_changes_below_min_effect_are_not_reported() -> None:
    values = noisy(
        np.where(np.arange(N_POINTS) >= 50, 1.03, 1.0), NOISES["normal"], np.random.default_rng(7)
    )
    values = 1.0 + (values - 1.0) / 20.0 + np.where(np.arange(N_POINTS) >= 50, 0.03, 0.0)
    assert analyze(values).change_points == ()
    assert [cp.index for cp in analyze(values, min_effect=0.02).change_points] == [50]


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_short_series_have_no_change_points(n: int) -> None:
    a = analyze([1.0, 1.01, 0.99, 1.0, 1.02][:n])
    assert a == SeriesAnalysis((), (), False, a.noise_rel, n)
    assert (a.noise_rel is None) == (n < 3)


def test_a_constant_series_is_stable_and_has_nothing() -> None:
    # 0.1 is not exact in binary: means of the segments differ by an ulp.
    assert analyze([0.1] * 50) == SeriesAnalysis((), (), False, 0.0, 50)


def test_nan_values_are_skipped_and_indexes_refer_to_the_input() -> None:
    values = [1.0] * 30 + [math.nan] * 3 + [2.0] * 30
    a = analyze(values)
    assert a.n_values == 60
    assert [cp.index for cp in a.change_points] == [33]
    assert analyze([math.nan] * 10) == SeriesAnalysis((), (), False, None, 0)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, 0.0, -1.5])
def test_infinite_and_non_positive_values_are_rejected_with_their_index(bad: float) -> None:
    with pytest.raises(BenchbenchError, match=rf"index 7 is {bad!r}.*positive"):
        analyze([1.0] * 7 + [bad] + [1.0] * 5)


def test_a_noisy_series_is_unstable_and_raises_no_alert() -> None:
    rng = np.random.default_rng(8)
    levels = np.where(np.arange(N_POINTS) >= 50, 1.5, 1.0)
    values = levels * np.exp(rng.normal(0.0, 0.3, N_POINTS))
    a = analyze(values)
    assert a.unstable and a.noise_rel is not None and a.noise_rel > 0.10
    assert a.change_points == () and regressions(a) == []
    # The same series is judged when the threshold says it may be.
    assert not analyze(values, max_noise_rel=0.5).unstable


def test_noise_rel_estimates_the_per_point_noise_despite_steps() -> None:
    rng = np.random.default_rng(9)
    levels = np.where(np.arange(2000) >= 1000, 1.5, 1.0)
    a = analyze(levels * np.exp(rng.normal(0.0, 0.02, 2000)))
    # Relative to the median level (~1.0-1.5), so between 2 % and 3 %.
    assert a.noise_rel is not None and 0.018 <= a.noise_rel <= 0.032


def test_results_do_not_depend_on_the_unit() -> None:
    rng = np.random.default_rng(10)
    values = noisy(np.where(np.arange(N_POINTS) >= 60, 1.1, 1.0), NOISES["student-t3"], rng)
    seconds, microseconds = analyze(values), analyze(values * 1e6)
    assert [c.index for c in seconds.change_points] == [c.index for c in microseconds.change_points]
    assert [c.rel_change for c in seconds.change_points] == pytest.approx(
        [c.rel_change for c in microseconds.change_points]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_effect": -0.1}, "min_effect"),
        ({"p_threshold": 0.0}, "p_threshold"),
        ({"max_noise_rel": 0.0}, "max_noise_rel"),
        ({"min_size": 1}, "min_size"),
        ({"window": 5}, "window"),
        ({"creep_min_points": 1}, "creep_min_points"),
    ],
)
def test_bad_parameters_are_usage_errors(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        analyze([1.0] * 10, **kwargs)  # type: ignore[arg-type]
