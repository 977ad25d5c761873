"""One round plan for ``run`` and ``ab``: the same rounds, the jobs in the same order in
each round for a seed, the same requests (``ab``'s sampling time doubled for its
lockstep), the same progress events, and a fresh layout before every round after the
first, once per pool."""

from __future__ import annotations

from typing import Any

from benchbench.core.defaults import AB_MIN_SAMPLES
from benchbench.core.values import Point, Result
from benchbench.run import ab
from benchbench.run import relay as relay_module
from benchbench.run.jobs import Job, RunRecord, measure_jobs
from benchbench.run.rounds import RoundPlan, Rounds, carried_calls, lockstep_request, order
from benchbench.run.runner import RunConfig
from benchbench.run.workers import StopRequest

POLICY = {"max_time_s": 0.3, "min_time_s": 0.03, "max_samples": 100, "target_rel_ci": 0.01}


def _point(size: int) -> Point:
    return Point("s", "w", "v", size, (size,), "float32", "cpu")


def _job(size: int) -> Job:
    return Job({"op": "measure", "size": size, "policy": POLICY}, (_point(size),), f"n={size}")


def _answer(payload: dict[str, Any]) -> dict[str, Any]:
    result = Result(_point(payload["size"]), "ok", samples_s=(1e-3, 1.1e-3, 0.9e-3))
    return {"event": "result", "result": result.to_dict()}


class RunPool:
    """``run``'s pool: answers every request at once, counts its renewals."""

    pid = None  # no process: the runner's telemetry reads no worker CPU time

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.renewals = 0

    def worker(self, warm=()) -> RunPool:
        return self

    def renew(self) -> bool:
        self.renewals += 1
        return True

    def request(self, payload, events, timeout_s, stop=None) -> dict[str, Any]:
        self.sent.append(payload)
        return _answer(payload)


class LockstepSide:
    """A lockstep worker that answers its request with its result, no turns."""

    def __init__(self, sent: list[dict[str, Any]]) -> None:
        self.sent = sent

    def send(self, payload: dict[str, Any]) -> None:
        self.sent.append(payload)

    def expect(self, events, timeout_s, stop=None) -> dict[str, Any]:
        return _answer(self.sent[-1])


class SidePool:
    """An ``ab`` side's pool: a fresh :class:`LockstepSide` per visit, renewals counted."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.renewals = 0

    def worker(self, warm=()) -> LockstepSide:
        return LockstepSide(self.sent)

    def renew(self) -> bool:
        self.renewals += 1
        return True

    def ask_retire(self) -> None:
        return None

    def retire(self) -> None:
        return None


class Written:
    """A store that keeps what ``ab`` writes, per run."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Result]] = {}

    def write_result(self, run_id: str, result: Result) -> None:
        self.rows.setdefault(run_id, []).append(result)


def test_run_and_ab_take_the_same_round_plan():
    jobs = [_job(size) for size in range(1, 9)]
    rounds = Rounds.fixed(3, seed=7)
    run_events: list[tuple[str, dict[str, Any]]] = []
    run_pool = RunPool()
    measure_jobs(
        jobs,
        run_pool,  # type: ignore[arg-type]
        RunRecord("run", None),
        timeout_s=5,
        rounds=rounds,
        progress=lambda event, data: run_events.append((event, data)),
    )
    ab_events: list[tuple[str, dict[str, Any]]] = []
    sides, store = [SidePool(), SidePool()], Written()
    summary = ab.AbSummary(("run-a", "run-b"), "group")
    ab._measure(
        jobs,
        sides,  # type: ignore[arg-type]
        RunConfig(suites=(), rounds=rounds),
        store,  # type: ignore[arg-type]
        summary,
        lambda event, data: ab_events.append((event, data)),
        StopRequest(),
    )

    def visited(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, int]]:
        return [(data["round"], data["index"]) for event, data in events if event == "point"]

    # The same visits, round by round, in the seeded shuffled order of each round...
    assert visited(run_events) == visited(ab_events)
    assert [index for r, index in visited(ab_events) if r == 2] == order(len(jobs), 1, 7)
    assert order(len(jobs), 0, 7) != order(len(jobs), 1, 7)
    # ...the same events, in the same order (start, point, advance, result)...
    assert [event for event, _ in run_events] == [event for event, _ in ab_events]
    assert run_events[0][1]["total"] == ab_events[0][1]["total"] == 3 * len(jobs)
    # ...the same requests, ab's with its sampling time doubled for the lockstep, and after
    # a point's first round with the calls per sample that round calibrated...
    assert len(run_pool.sent) == len(sides[0].sent) == len(sides[1].sent) == 3 * len(jobs)
    sent = zip(run_pool.sent, sides[0].sent, sides[1].sent, strict=True)
    for k, (request, base, head) in enumerate(sent):
        expected = lockstep_request(request)
        if k >= len(jobs):
            expected = carried_calls(expected, 1)
        assert base == head == {**expected, "lockstep": True}
    assert run_pool.sent[0]["policy"]["max_time_s"] == POLICY["max_time_s"] / 3
    # ...and a fresh layout before rounds 2 and 3: once per round for each of ab's sides.
    assert run_pool.renewals == 2
    assert [side.renewals for side in sides] == [2, 2]
    assert [len(store.rows[run_id]) for run_id in summary.run_ids] == [len(jobs)] * 2


class Renewals:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def renew(self) -> bool:
        self.log.append(self.name)
        return True


def test_the_plan_renews_before_each_later_round_and_asks_first_whether_to_go_on():
    plan = RoundPlan([{"op": "measure"}] * 3, Rounds.fixed(4, seed=2))
    log: list[str] = []
    taken: list[tuple[int, list[str]]] = []
    for round_index in plan.each_round([Renewals(log, "a")], lambda: len(taken) < 2):
        taken.append((round_index, list(log)))
    assert taken == [(0, []), (1, ["a"])] and log == ["a"]  # no renewal for round 3


def test_the_sides_are_renewed_in_a_seeded_random_order():
    import random

    plan = RoundPlan([{"op": "measure"}], Rounds.fixed(40))
    log: list[str] = []
    pools = [Renewals(log, "base"), Renewals(log, "head")]
    rounds = list(plan.each_round(pools, lambda: True, random.Random(3)))
    assert rounds == list(range(40))
    firsts = log[::2]
    assert sorted(log[:2]) == ["base", "head"] and set(firsts) == {"base", "head"}


def test_a_round_visits_the_jobs_still_wanted_in_its_order():
    plan = RoundPlan([{"op": "measure", "size": n} for n in range(6)], Rounds.fixed(2, seed=5))
    wanted = {0, 2, 3}
    visits = list(plan.visits(1, wanted))
    assert [v.index for v in visits] == [k for k in order(6, 1, 5) if k in wanted]
    assert all(v.round == 2 and v.last for v in visits)
    assert all(v.request["size"] == v.index for v in visits)
    # Without rounds: one round, in the jobs' own order.
    single = RoundPlan([{"op": "measure"}] * 4, None)
    assert [v.index for v in single.visits(0)] == [0, 1, 2, 3]


def test_abs_pools_renew_to_a_fresh_zygote_of_their_sides_interpreter(monkeypatch):
    started: list[Any] = []

    class FakeZygote:
        def __init__(
            self, memory_limit_bytes=0, start_timeout_s=300.0, env=None, cpus=(), python=None
        ):
            self.python, self.env, self.closed = python, env, False
            started.append(self)

        def poll_ready(self) -> bool:
            return True  # no import to wait for

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(ab, "Zygote", FakeZygote)
    sides = (ab.Side("base", "/envs/base/python", "b"), ab.Side("head", "/envs/head/python", "h"))
    monkeypatch.setattr(relay_module.os, "sched_getaffinity", lambda _pid: {0, 1})
    pools, relay = ab._pools(RunConfig(suites=()), sides)
    assert relay is not None  # lockstep, no --cpus, two cores: the next zygotes start ahead
    assert [z.python for z in started] == ["/envs/base/python", "/envs/head/python"]
    assert all(pool.renew() for pool in pools)  # nothing started ahead: started now
    assert [z.python for z in started[2:]] == ["/envs/base/python", "/envs/head/python"]
    assert [z.closed for z in started] == [True, True, False, False]
    relay.prepare([1, 0])  # a fake has no import to wait for: both start at once
    assert [z.python for z in started[4:]] == ["/envs/head/python", "/envs/base/python"]
    assert all(pool.renew() for pool in pools)  # each pool takes its side's, started ahead
    assert len(started) == 6 and [z.closed for z in started[2:]] == [True, True, False, False]
    assert all(z.env["OMP_WAIT_POLICY"] == "PASSIVE" for z in started)
    relay.close()
    assert not any(z.closed for z in started[4:])  # taken: their pools close them


def test_a_lockstep_round_samples_its_share_and_warms_up_within_it():
    request = {"op": "measure", "policy": {**POLICY, "min_samples": 10, "warmup_max_s": 1.0}}
    policy = lockstep_request(request)["policy"]
    # Each side's clock runs while the other samples: twice the round's time...
    assert (policy["max_time_s"], policy["min_time_s"]) == (0.6, 0.06)
    # ...one median per side and round, of at least AB_MIN_SAMPLES samples...
    assert policy["min_samples"] == AB_MIN_SAMPLES < 10
    # ...both sides sampling to the cap, so that their samples cover the same moments...
    assert policy["stop_when_precise"] is False
    # ...and a warm-up of 10 calls or half the round's own share, whichever comes first.
    assert policy["warmup_max_s"] == 0.5 * POLICY["max_time_s"]
    assert policy["warmup_min_s"] == 0.0
    short = lockstep_request({"op": "measure", "policy": {**POLICY, "warmup_max_s": 0.1}})
    assert short["policy"]["warmup_max_s"] == 0.1


def test_calls_carried_from_a_first_round_unless_the_request_fixes_its_own():
    request = {"op": "measure", "policy": dict(POLICY)}
    assert carried_calls(request, 7)["policy"]["fixed_calls"] == 7
    assert "fixed_calls" not in request["policy"]  # the plan's request is left as it was
    assert carried_calls(request, 0) == request  # nothing calibrated yet
    cold = {"op": "measure", "policy": {**POLICY, "fixed_calls": 1}}
    assert carried_calls(cold, 7)["policy"]["fixed_calls"] == 1
    counted = {**request, "metric": "instructions"}
    assert carried_calls(counted, 7) == counted  # a count plans its own calls
