"""This machine's run-to-run calibration (analysis/calibration.py), judged by what it is
for: a suite with no history of its own, whose intervals must then hold a rerun's median
about as often as calibrated intervals do.

Injected runs as in ``test_rerun.py``: log-normal process medians, a point's processes
3-12 % apart, five processes a point, and a run level drawn afresh per run and point.
"""

from __future__ import annotations

import random
import statistics

import pytest

from benchbench.analysis.calibration import (
    MIN_SCORES,
    Calibration,
    calibration_of,
    device_key,
    run_level,
)
from benchbench.analysis.rerun import calibrated, factor_of, points, rerun_dict
from benchbench.core.errors import StoreError
from benchbench.store import open_store
from benchbench.store.profiles import latest_profiles, save_profile
from tests.unit.test_rerun import _coverage, _runs

WHEN = "2026-12-06T23:58:00+00:00"


def _calibration(runs: list[list[dict]]) -> Calibration:
    found = Calibration.of([points(r) for r in runs], WHEN)
    assert found is not None
    return found


def test_runs_that_scatter_as_their_intervals_say_widen_nothing_much() -> None:
    factors = []
    for seed in range(20):
        rng = random.Random(seed)
        calibration = _calibration(_runs(4, rng))
        factors.append(calibrated(calibration, _runs(1, rng)[0]).factor)
    # The median of 180 ratios scatters: about half the calibrations read a level above
    # 0, each small beside the points' own standard errors (1.3-5.4 % here).
    assert min(factors) == 1.0
    assert statistics.median(factors) < 1.05
    assert max(factors) < 1.2


@pytest.mark.parametrize("run_sd", [0.02, 0.05, 0.10])
def test_the_run_level_is_read_back(run_sd: float) -> None:
    levels = [_calibration(_runs(4, random.Random(10 + seed), run_sd)).level for seed in range(10)]
    assert 0.7 * run_sd < statistics.median(levels) < 1.3 * run_sd, (run_sd, levels)


@pytest.mark.parametrize("run_sd", [0.03, 0.08])
def test_a_suite_with_no_history_covers_a_rerun_with_the_calibration(run_sd: float) -> None:
    within, printed, calibrated = [], [], []
    for seed in range(10):
        rng = random.Random(200 + seed)
        calibration = _calibration(_runs(4, rng, run_sd))  # other runs: the calibration's
        runs = _runs(2, rng, run_sd)  # a suite's first two runs: no pair of its own before
        rerun = factor_of([], runs[0], calibration=calibration)
        assert rerun is not None and rerun.calibrated is not None
        within.append(_coverage(runs, None))
        printed.append(_coverage(runs, rerun))
        calibrated.append(_coverage(_runs(2, rng), None))
    average, target = statistics.mean(printed), statistics.mean(calibrated)
    assert statistics.mean(within) < average - 0.1
    # Calibrated intervals of five processes hold the next run's headline at about 88 %.
    assert abs(average - target) < 0.07, (average, target)


def test_a_pair_of_the_suites_own_runs_comes_before_the_calibration() -> None:
    rng = random.Random(3)
    calibration = _calibration(_runs(4, rng, 0.05))
    history = _runs(3, rng)
    own = factor_of(history[:2], history[2], calibration=calibration)
    assert own is not None and own.calibrated is None and own.pairs == 1
    # One earlier run and the run shown: the calibration, not the pair that holds the run.
    lone = factor_of(history[:1], history[1], calibration=calibration)
    assert lone is not None and lone.calibrated == calibration.words
    assert "(machine calibrated 2026-12-06: ±" in lone.words and "each point x" in lone.words
    assert rerun_dict(lone)["calibrated"] == calibration.words
    assert factor_of(history[:1], history[1]) is not None  # without one: the lone pair
    assert factor_of([], history[0]) is None  # within this run only


def test_too_few_matched_points_make_no_calibration() -> None:
    runs = [rows[: MIN_SCORES // 3] for rows in _runs(4, random.Random(1))]
    assert run_level([points(r) for r in runs]) is None
    assert Calibration.of([points(r) for r in runs], WHEN) is None


def test_the_store_keeps_the_runs_points_beside_the_ceilings_and_derives_the_level(
    tmp_path, monkeypatch
) -> None:
    from benchbench.machine.environment import Environment

    store = open_store(str(tmp_path / "s.db"), create=True)
    env = Environment(fields={"machine": "m", "torch": "2.13.0"})
    store.save_environment(env)
    runs = _runs(4, random.Random(5), 0.05)
    calibration = _calibration(runs)
    save_profile(store, env.id, device_key("cpu"), calibration.to_dict())
    run = {"environment_id": env.id}
    read = calibration_of(store, run, [{"device": "cpu"}])
    assert read is not None and read.level == pytest.approx(calibration.level)
    assert read.pairs == 3 and read.points == calibration.points
    # A run with a point off the CPU takes none; another environment has none.
    assert calibration_of(store, run, [{"device": "cpu"}, {"device": "cuda:0"}]) is None
    assert calibration_of(store, {"environment_id": "other"}, []) is None
    # The ceilings' reader does not see it as a profile of the CPU.
    assert latest_profiles(store, env.id, ["cpu"]) == {}
    # A document of another version is an error naming the fix.
    with pytest.raises(StoreError, match="probe --run-to-run"):
        Calibration.from_dict({**calibration.to_dict(), "calibration_version": 99})


def test_doctor_says_whether_the_latest_runs_environment_is_calibrated(tmp_path) -> None:
    from benchbench.cli.doctor import calibration_check
    from benchbench.machine.environment import Environment

    store = open_store(str(tmp_path / "s.db"), create=True)
    env = Environment(fields={"machine": "m"})
    store.save_environment(env)
    run, rows = {"environment_id": env.id}, [{"device": "cpu"}]
    none = calibration_check(store, run, rows)
    assert none.status == "info" and none.advice == "benchbench probe --run-to-run"
    save_profile(
        store, env.id, device_key("cpu"), _calibration(_runs(4, random.Random(2))).to_dict()
    )
    found = calibration_check(store, run, rows)
    assert found.status == "ok" and "machine calibrated 2026-12-06" in found.value
    assert "3 pairs of runs" in found.value
    assert "off the CPU" in calibration_check(store, run, [{"device": "cuda:0"}]).value
