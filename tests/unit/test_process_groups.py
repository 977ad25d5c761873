"""Every process stays in its point: two modes (or an outlier) are named by a rule judged
like a classifier on injected process medians, never left out; a process on a crowded
core (telemetry) is measured again later in its round, every such process of a point."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchbench.core.stats import Stats, modes
from benchbench.core.values import Point, Result
from benchbench.machine.telemetry import Telemetry
from benchbench.run.jobs import Job, RunRecord, measure_jobs, run_row
from benchbench.run.merge import SetAside, groups_note, merge
from benchbench.run.rounds import Rounds
from benchbench.store import open_store

TRIALS = 2000


def _rate(sigma: float, processes: int, slow: int, factor: float, seed: int) -> float:
    """How often the rule names a split on ``processes`` lognormal medians of spread
    ``sigma``; with ``slow`` > 0 the first ``slow`` scaled by ``factor``, and the rate is
    of naming exactly them as one group."""
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(TRIALS):
        medians = np.exp(rng.normal(0.0, sigma, processes)) * 1e-4
        medians[:slow] *= factor
        split = modes(list(medians))
        if slow == 0:
            found += split is not None
        else:
            found += split is not None and set(range(slow)) in ({*split[0]}, {*split[1]})
    return found / TRIALS


@pytest.mark.parametrize("processes", [3, 5])
def test_clean_processes_that_agree_within_five_percent_are_rarely_called_two_modes(processes):
    assert _rate(0.02, processes, 0, 1.0, seed=processes) == 0.0
    assert _rate(0.05, processes, 0, 1.0, seed=10 + processes) <= 0.01


def test_a_three_plus_two_split_one_and_a_half_apart_is_named_where_processes_agree():
    assert _rate(0.02, 5, 2, 1.5, seed=1) >= 0.99
    assert _rate(0.05, 5, 2, 1.5, seed=2) >= 0.95


def test_a_process_orders_of_magnitude_off_is_named_an_outlier_at_any_spread():
    for sigma in (0.02, 0.05, 0.10, 0.20):
        assert _rate(sigma, 5, 1, 1000.0, seed=int(sigma * 100)) == 1.0


def test_nothing_is_two_modes_among_two_processes_or_a_steady_spread():
    assert modes([1e-3, 1.0]) is None
    assert modes([1.0, 1.1, 1.2, 1.3, 1.4]) is None
    assert modes([1.0, 1.0, 2.0]) == ((0, 1), (2,))


def _point() -> Point:
    return Point("s", "sum", "v", 2**18, (2**18,), "float32", "cpu")


def _process(median_s: float, n: int = 12, **kw: Any) -> Result:
    samples = tuple(median_s * (1 + 0.01 * ((k % 5) - 2)) for k in range(n))
    return Result(_point(), "ok", samples_s=samples, converged=True, stop_reason="precise", **kw)


def test_a_three_plus_two_bimodal_point_keeps_all_five_and_its_note_says_so():
    rounds = [_process(m, n=15) for m in (1.21e-6, 1.83e-6, 1.21e-6, 1.83e-6, 1.21e-6)]
    merged = merge(rounds, 0.03)
    assert merged.process_samples == (15,) * 5
    assert len(merged.samples_s) == 75
    stats = Stats.from_samples(merged.samples_s, 1, merged.process_samples)
    assert stats.process_medians_s == pytest.approx([1.21e-6, 1.83e-6] * 2 + [1.21e-6])
    assert "bimodal: 3 processes at 1.21 µs, 2 at 1.83 µs (all kept)" in merged.warnings
    assert not any(w.startswith("retaken") for w in merged.warnings)
    assert "set_aside" not in merged.extra


def test_two_fast_and_three_slow_report_the_slow_majority_first_and_keep_the_fast():
    note = groups_note([1.21e-6, 1.83e-6, 1.83e-6, 1.21e-6, 1.83e-6])
    assert note == "bimodal: 3 processes at 1.83 µs, 2 at 1.21 µs (all kept)"


def test_a_process_far_outside_the_others_stays_in_and_is_named_an_outlier():
    rounds = [_process(m, n=15) for m in (24e-6, 19.8e-3, 25e-6, 24.5e-6)]
    merged = merge(rounds, 0.03)
    assert merged.process_samples == (15, 15, 15, 15)
    stats = Stats.from_samples(merged.samples_s, 1, merged.process_samples)
    assert max(stats.process_medians_s) == pytest.approx(19.8e-3, rel=0.02)
    assert stats.rel_ci_half_width > 1  # honest: one process 800x off widens the interval
    assert any(
        w.startswith("outlier: 3 processes at 24.5 µs, 1 at 19.8 ms (all kept)")
        for w in merged.warnings
    )


def test_processes_the_runner_replaced_are_named_and_kept_aside():
    crowded = _process(40e-6)
    merged = merge(
        [_process(24e-6), _process(25e-6), _process(24.5e-6)],
        0.03,
        set_aside=[SetAside(2, crowded, "1 torch thread but none of 2 cores was idle")],
    )
    assert merged.process_samples == (12, 12, 12)
    assert merged.warnings[-1] == (
        "retaken: process 2 of 4 ran on a crowded core (1 torch thread but none of 2 cores "
        "was idle); a fresh process took its place"
    )
    assert merged.extra["set_aside"][0]["median_s"] == pytest.approx(40e-6, rel=0.02)


# -- the runner -------------------------------------------------------------------------

POLICY = {"max_time_s": 0.3, "min_time_s": 0.0, "target_rel_ci": 0.03}


def _job(size: int) -> Job:
    request = {"op": "measure", "size": size, "policy": POLICY}
    return Job(request, (Point("s", "w", "v", size, (size,), "float32", "cpu"),), f"n={size}")


def _telemetry(busy: bool) -> dict[str, Any]:
    """Two cores over a 1 s window, the worker using half of one; others keeping both
    busy (no idle core) or leaving them idle."""
    return Telemetry(
        duration_s=1.0,
        n_samples=10,
        cpus=(0, 1),
        cpu_idle_share={0: 0.0, 1: 0.0} if busy else {0: 0.5, 1: 1.0},
        measured_cpu_s=0.5,
        cpu_window_s=1.0,
    ).to_dict()


class Pool:
    """Answers each point's processes from a script: ``medians[size]`` in order (then
    the last again), each process ``crowded`` when its number is in ``crowded[size]``."""

    def __init__(self, medians: dict[int, list[float]], crowded: dict[int, set[int]]) -> None:
        self.medians, self.crowded = medians, crowded
        self.seen: dict[int, int] = {}
        self.sizes: list[int] = []

    def worker(self, warm=()):
        class W:
            pid = None

        return W()

    def renew(self) -> bool:
        return True

    def share(self, _k: int) -> None:
        pass

    def request(self, payload, events, timeout_s, stop=None):
        if payload["op"] == "environment":
            return {"event": "environment", "fields": {"machine": "t"}, "info": {}}
        size = payload["size"]
        k = self.seen[size] = self.seen.get(size, 0) + 1
        self.sizes.append(size)
        script = self.medians[size]
        median = script[min(k, len(script)) - 1]
        samples = tuple(median * (1 + 0.001 * j) for j in range(10))
        busy = k in self.crowded.get(size, set())
        result = Result(
            Point("s", "w", "v", size, (size,), "float32", "cpu"),
            "ok",
            samples_s=samples,
            converged=True,
            threads=1,
            telemetry=_telemetry(busy),
        )
        return {"event": "result", "result": result.to_dict()}


@pytest.fixture(autouse=True)
def _scripted_telemetry(monkeypatch):
    """The pool's telemetry stands: no sampler of the real machine around each request."""
    monkeypatch.setattr(
        "benchbench.run.visits.observed_request",
        lambda pool, payload, events, timeout_s, stop=None: pool.request(
            payload, events, timeout_s, stop
        ),
    )


def _run(tmp_path: Path, pool: Pool, jobs: list[Job]):
    store = open_store(str(tmp_path / "s.db"))
    record = RunRecord(
        "r", store, lambda env: run_row("r", env, kind="adhoc", label=None, suites=[], config={})
    )
    ticks = itertools.count()
    summary = measure_jobs(
        jobs, pool, record, timeout_s=5, rounds=Rounds.fixed(3), clock=lambda: float(next(ticks))
    )
    return {r.point.size: r for r in summary.results}


def test_a_crowded_process_is_measured_again_later_in_its_round(tmp_path: Path):
    pool = Pool({1: [1e-3, 2e-3, 1e-3, 1e-3], 2: [1e-3]}, crowded={1: {2}})
    results = _run(tmp_path, pool, [_job(1), _job(2)])
    assert pool.seen == {1: 4, 2: 3}
    # Process 2 (crowded, 2 ms) went aside; the retake took its place.
    one = results[1]
    assert one.process_samples == (10, 10, 10)
    assert max(Stats.from_samples(one.samples_s, 1, one.process_samples).process_medians_s) < 1.1e-3
    assert any(
        w.startswith("retaken: process 2 of 4 ran on a crowded core (1 torch thread")
        for w in one.warnings
    )
    # Later in the round: after point 2's process of that round.
    second_round = pool.sizes[2:5]
    assert second_round[-1] == 1 and second_round.count(1) == 2


def test_every_crowded_process_of_a_point_is_retaken_whatever_the_budget(tmp_path: Path):
    # Requests 1 and 3 of point 1 are crowded (rounds 1 and 2; the retake of round 1 is
    # request 2), each spending the whole budget of its share: both are measured again.
    pool = Pool({1: [5.0, 0.01, 5.0, 0.01, 0.01]}, crowded={1: {1, 3}})
    results = _run(tmp_path, pool, [_job(1)])
    assert pool.seen == {1: 5}
    one = results[1]
    assert one.process_samples == (10, 10, 10)
    # Both named on one line.
    retaken = [w for w in one.warnings if w.startswith("retaken")]
    assert [w.split(" ran")[0] for w in retaken] == ["retaken: process 1-2 of 5"]
    assert [a["process"] for a in one.extra["set_aside"]] == [1, 2]


def test_a_point_with_a_process_far_off_takes_no_more_processes_and_keeps_it(tmp_path: Path):
    pool = Pool({1: [24e-6, 5e-3, 25e-6, 24.5e-6]}, crowded={})  # 200x
    results = _run(tmp_path, pool, [_job(1)])
    assert pool.seen == {1: 3}
    one = results[1]
    stats = Stats.from_samples(one.samples_s, 1, one.process_samples)
    assert max(stats.process_medians_s) == pytest.approx(5e-3, rel=0.01)
    assert "set_aside" not in one.extra
    assert any(w.startswith("outlier: 2 processes at ") for w in one.warnings)


def test_a_single_process_replaced_by_its_retake_still_says_so():
    merged = merge([_process(24e-6)], 0.03, set_aside=[SetAside(1, _process(90e-6), "busy")])
    assert merged.samples_s == _process(24e-6).samples_s
    assert merged.warnings[-1] == (
        "retaken: process 1 of 2 ran on a crowded core (busy); a fresh process took its place"
    )
