"""A wild process (a median far outside the others') judged like a classifier on injected
process medians, left out of its point once others agree, and measured again by the runner;
a process on a crowded core measured again later in its round."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchbench.core.stats import Stats, wild_processes
from benchbench.core.values import Point, Result
from benchbench.machine.telemetry import Telemetry
from benchbench.run.jobs import Job, RunRecord, measure_jobs, run_row
from benchbench.run.rounds import Rounds, SetAside, merge, wild_pending
from benchbench.store import open_store

TRIALS = 2000


def _rate(sigma: float, processes: int, wild_factor: float | None, seed: int) -> float:
    """How often the rule fires on ``processes`` lognormal medians of spread ``sigma``
    (``wild_factor``: process 0 scaled by it, and the rate is of finding process 0)."""
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(TRIALS):
        medians = np.exp(rng.normal(0.0, sigma, processes)) * 1e-4
        if wild_factor is None:
            found += bool(wild_processes(list(medians)))
        else:
            medians[0] *= wild_factor
            found += 0 in wild_processes(list(medians))
    return found / TRIALS


@pytest.mark.parametrize("processes", [3, 4, 6])
def test_clean_processes_one_thread_apart_never_raise_a_false_alarm(processes):
    # One thread: small and mid ops agree across processes within 1-5 % on the 2-core EPYC.
    assert _rate(0.02, processes, None, seed=processes) == 0.0
    assert _rate(0.05, processes, None, seed=10 + processes) <= 0.005


@pytest.mark.parametrize("processes", [3, 4])
def test_false_alarms_stay_rare_at_a_ten_percent_spread(processes):
    assert _rate(0.10, processes, None, seed=20 + processes) <= 0.06


@pytest.mark.parametrize("factor", [1000.0, 1 / 1000.0])
def test_a_process_orders_of_magnitude_off_is_always_found(factor):
    for sigma in (0.02, 0.05, 0.10, 0.20):
        assert _rate(sigma, 3, factor, seed=int(sigma * 100)) == 1.0


def test_a_process_twenty_times_off_is_found_but_among_the_noisiest():
    for sigma in (0.02, 0.05, 0.10):
        assert _rate(sigma, 3, 20.0, seed=int(sigma * 100)) == 1.0
    assert _rate(0.20, 3, 20.0, seed=20) >= 0.95


def test_a_process_twice_as_slow_is_found_where_processes_agree():
    assert _rate(0.05, 3, 2.0, seed=1) >= 0.90
    assert _rate(0.05, 4, 2.0, seed=2) >= 0.98
    assert _rate(0.02, 3, 1.5, seed=3) >= 0.95


def test_nothing_is_wild_among_two_or_among_processes_split_evenly():
    assert wild_processes([1e-3, 1.0]) == ()
    assert wild_processes([1.0, 1.0, 2.0, 2.0]) == ()  # two modes: a spread, not an event
    assert wild_processes([1.0, 1.0, 2.0]) == (2,)


def _point() -> Point:
    return Point("s", "sum", "v", 2**18, (2**18,), "float32", "cpu")


def _process(median_s: float, n: int = 12, **kw: Any) -> Result:
    samples = tuple(median_s * (1 + 0.01 * ((k % 5) - 2)) for k in range(n))
    return Result(_point(), "ok", samples_s=samples, converged=True, stop_reason="precise", **kw)


def test_a_wild_process_among_three_is_kept_and_named_as_the_cause():
    merged = merge([_process(24e-6), _process(19.8e-3), _process(25e-6)], 0.03)
    assert merged.process_samples == (12, 12, 12)
    assert any(
        w.startswith("wild process: process 2 of 3 had a median of 19.") for w in merged.warnings
    )
    assert wild_pending([_process(24e-6), _process(19.8e-3), _process(25e-6)])


def test_a_wild_process_is_left_out_once_three_others_agree_and_its_samples_are_kept():
    rounds = [_process(24e-6), _process(19.8e-3), _process(25e-6), _process(24.5e-6)]
    assert not wild_pending(rounds)
    merged = merge(rounds, 0.03)
    assert merged.process_samples == (12, 12, 12)
    stats = Stats.from_samples(merged.samples_s, 1, merged.process_samples)
    assert stats.rel_ci_half_width < 0.1  # not orders of magnitude: the wild one is out
    assert merged.warnings[-1].startswith("retaken: process 2 of 4 measured again")
    (aside,) = merged.extra["set_aside"]
    assert aside["process"] == 2 and aside["median_s"] == pytest.approx(19.8e-3, rel=0.02)
    assert len(aside["samples_s"]) == 12


def test_processes_the_runner_replaced_are_named_and_kept_aside():
    crowded = _process(40e-6)
    merged = merge(
        [_process(24e-6), _process(25e-6), _process(24.5e-6)],
        0.03,
        set_aside=[SetAside(2, crowded, "1 torch thread but none of 2 cores was idle")],
    )
    assert merged.process_samples == (12, 12, 12)
    assert "retaken: process 2 of 4 measured again: 1 torch thread" in merged.warnings[-1]
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

    def worker(self):
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
        "benchbench.run.jobs.observed_request",
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
        w.startswith("retaken: process 2 of 4 measured again: 1 torch thread") for w in one.warnings
    )
    # Later in the round: after point 2's process of that round.
    second_round = pool.sizes[2:5]
    assert second_round[-1] == 1 and second_round.count(1) == 2


def test_a_point_with_a_wild_process_takes_one_more_and_its_interval_stays_narrow(tmp_path: Path):
    pool = Pool({1: [24e-6, 5e-3, 25e-6, 24.5e-6]}, crowded={})  # 200x
    results = _run(tmp_path, pool, [_job(1)])
    assert pool.seen == {1: 4}
    one = results[1]
    stats = Stats.from_samples(one.samples_s, 1, one.process_samples)
    assert stats.rel_ci_half_width < 0.5
    assert one.extra["set_aside"][0]["process"] == 2


def test_without_budget_left_a_wild_process_stays_and_says_so(tmp_path: Path):
    # Each process spends its whole share (0.1 s of samples): nothing left for a retake.
    pool = Pool({1: [0.01, 20.0, 0.0101]}, crowded={})
    results = _run(tmp_path, pool, [_job(1)])
    assert pool.seen == {1: 3}
    assert any(w.startswith("wild process: process 2 of 3") for w in results[1].warnings)


def test_a_single_process_replaced_by_its_retake_still_says_so():
    merged = merge([_process(24e-6)], 0.03, set_aside=[SetAside(1, _process(90e-6), "busy")])
    assert merged.samples_s == _process(24e-6).samples_s
    assert merged.warnings[-1] == "retaken: process 1 of 2 measured again: busy"
