"""The lockstep of ``benchbench ab``: one side samples at a time, sides alternate in a
random order, results come back per side; each side is checked before measuring."""

from __future__ import annotations

import random
import signal
import sys
from pathlib import Path

import pytest

from benchbench.core.errors import UsageError
from benchbench.core.values import Point, Result
from benchbench.run.ab import Side, check_side, check_sides, side_environment
from benchbench.run.lockstep import measure_pair
from benchbench.run.rounds import order

POINT = Point("s", "w", "v", 8, (8,), "float32", "cpu")


class FakeSide:
    """A lockstep worker: ``blocks`` turns, then its result; logs what it was told."""

    def __init__(self, name: str, blocks: int, log: list[str], fails: int = 0) -> None:
        self.name, self.blocks, self.left, self.log = name, blocks, blocks, log
        self.sent: list[dict] = []
        self.running = False
        self.point = POINT
        self.fails = fails  # the size whose point this side reports as an error

    def send(self, payload: dict) -> None:
        self.sent.append(payload)
        if payload.get("op") == "measure":  # a worker of the round: its next point
            self.left = self.blocks
        if "size" in payload:  # a request of its own point
            self.point = Point("s", "w", "v", payload["size"], (payload["size"],), "float32", "cpu")
        if payload.get("op") == "go":
            assert not any(s.running for s in SIDES if s is not self), "both sides ran at once"
            self.running = True
            self.log.append(self.name)
            self.left -= 1

    def expect(self, events, timeout_s, stop=None) -> dict:
        self.running = False
        if self.left > 0:
            return {"event": "turn"}
        if self.fails and self.point.numel == self.fails:
            failed = Result(point=self.point, status="error", reason="boom")
            return {"event": "result", "result": failed.to_dict()}
        result = Result(point=self.point, status="ok", samples_s=(1e-3,), reason=self.name)
        return {"event": "result", "result": result.to_dict()}


SIDES: list[FakeSide] = []


def test_the_sides_take_turns_and_each_gets_its_own_result():
    log: list[str] = []
    SIDES[:] = [FakeSide("base", 20, log), FakeSide("head", 20, log)]
    results = measure_pair(SIDES, {"op": "measure"}, 1.0, random.Random(1))
    assert [r.reason for r in results if r is not None] == ["base", "head"]
    assert log.count("base") == 20 and log.count("head") == 20
    assert all(s.sent[0]["lockstep"] is True for s in SIDES)
    # Pairs: every two consecutive blocks hold one block of each side...
    pairs = [tuple(sorted(log[k : k + 2])) for k in range(0, 40, 2)]
    assert set(pairs) == {("base", "head")}
    # ...and which side goes first in a pair is random, not always the same.
    firsts = {log[k] for k in range(0, 40, 2)}
    assert firsts == {"base", "head"}


def test_a_side_that_needs_more_blocks_finishes_alone():
    log: list[str] = []
    SIDES[:] = [FakeSide("base", 3, log), FakeSide("head", 7, log)]
    results = measure_pair(SIDES, {"op": "measure"}, 1.0, random.Random(2))
    assert all(r is not None and r.status == "ok" for r in results)
    assert log.count("head") == 7 and log[-4:] == ["head"] * 4


def test_a_missing_interpreter_names_the_side(tmp_path):
    with pytest.raises(UsageError, match=r"--base .*nope: no such file"):
        check_side(Side("base", str(tmp_path / "nope"), "base"))


def test_a_program_that_is_not_python_names_the_side():
    with pytest.raises(UsageError, match="--head /bin/echo is not a Python interpreter"):
        check_side(Side("head", "/bin/echo", "head"))


def test_an_interpreter_without_torch_says_what_to_install():
    def without_torch(cmd, **_kw):
        import subprocess

        return subprocess.CompletedProcess(cmd, 0, stdout="missing torch\n", stderr="")

    with pytest.raises(UsageError, match=r"--base .* cannot import torch: install it"):
        check_side(Side("base", sys.executable, "base"), runner=without_torch)


def test_the_interpreter_running_the_tests_passes_the_check():
    import torch

    assert check_side(Side("base", sys.executable, "base")) == torch.__version__


def test_both_sides_are_checked_at_once_once_per_interpreter_the_first_fault_named(tmp_path):
    import subprocess
    import threading

    base, head = str(tmp_path / "base-python"), str(tmp_path / "head-python")
    for link in (base, head):
        Path(link).symlink_to(sys.executable)
    seen: list[str] = []
    both_in = threading.Barrier(2, timeout=5)

    def answer(cmd: list[str], torch_missing: bool) -> subprocess.CompletedProcess[str]:
        seen.append(cmd[0])
        out = "missing torch\n" if torch_missing else "ok 2.13.0\n"
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    same = [Side("base", base, "base"), Side("head", base, "head")]
    assert check_sides(same, runner=lambda cmd, **_kw: answer(cmd, False)) == ["2.13.0"] * 2
    assert seen == [base]  # identical sides: one check
    seen.clear()

    def beside(cmd, **_kw):
        both_in.wait()  # breaks (and fails the check) unless the other side's check runs too
        return answer(cmd, cmd[0] == head)

    apart = [Side("base", base, "base"), Side("head", head, "head")]
    with pytest.raises(UsageError, match=r"--head .*head-python cannot import torch"):
        check_sides(apart, runner=beside)
    assert sorted(seen) == sorted([base, head])


def test_the_waiting_side_sleeps_instead_of_spinning():
    assert side_environment("system")["OMP_WAIT_POLICY"] == "PASSIVE"


class RenewingPool:
    """A side's pool, as :class:`~benchbench.run.pool.WorkerPool` keeps its worker: forks
    a :class:`FakeSide` when it has none, until it is retired; logs forks, exits asked
    for and renewals."""

    def __init__(self, side: int, log: list[str], fails: int = 0) -> None:
        self.side, self.log, self.fails = side, log, fails
        self.current: FakeSide | None = None
        self.served: list[int] = []  # points measured by each worker of this side

    def worker(self, warm=()) -> FakeSide:
        if self.current is None:
            self.log.append(f"fork {self.side}")
            self.current = FakeSide("base" if self.side == 0 else "head", 2, [], self.fails)
            SIDES.append(self.current)
            self.served.append(0)
        self.served[-1] += 1
        return self.current

    def renew(self) -> bool:
        self.retire()
        self.log.append(f"renew {self.side}")
        return True

    def ask_retire(self) -> None:
        if self.current is not None:
            self.log.append(f"exit {self.side}")

    def retire(self) -> None:
        self.current = None


def test_every_round_forks_one_worker_a_side_from_fresh_zygotes(tmp_path):
    """One zygote per side for all rounds would give every fork of a side one address
    layout: before each round after the first, each side's pool renews its zygote once.
    A round's worker on each side measures all the round's points, and both are told
    to exit at the round's end before either is waited for."""
    log: list[str] = []
    pools: list[RenewingPool] = []
    store = _three_rounds_on_renewing_pools(tmp_path, (1, 2), log, pools=pools)
    # Per round: one fork a side, both asked to exit at its end, then, between rounds,
    # each side renewed once.
    steps = [entry.split()[0] for entry in log]
    each = ["fork"] * 2 + ["exit"] * 2
    assert steps == each + ["renew"] * 2 + each + ["renew"] * 2 + each
    renewals = [entry for entry in log if entry.startswith("renew")]
    assert sorted(renewals[:2]) == sorted(renewals[2:]) == ["renew 0", "renew 1"]
    assert [pool.served for pool in pools] == [[2, 2, 2], [2, 2, 2]]
    rows = store.measurements("run-a")
    assert len(rows) == 2 and all(len(row["process_samples"]) == 3 for row in rows)


def test_a_point_that_fails_retires_both_workers_of_its_round(tmp_path):
    """A failed point may leave its process unfit (a poisoned device, a broken heap):
    its visit retires both sides' workers, and the round's next visit forks fresh ones."""
    log: list[str] = []
    pools: list[RenewingPool] = []
    store = _three_rounds_on_renewing_pools(tmp_path, (1, 2, 3), log, pools=pools, fails=3)
    # Each round forks a pair, and a second one after the failed point unless it came last.
    pairs = [1 if order(3, r, seed=4)[-1] == 2 else 2 for r in range(3)]
    assert [len(pool.served) for pool in pools] == [sum(pairs)] * 2
    assert sum(pairs) > 3  # the seed puts the failing point before the end at least once
    rows = {row["benchmark_id"]: row for row in store.measurements("run-a")}
    assert sorted(row["status"] for row in rows.values()) == ["error", "ok", "ok"]


class LoggingRelay:
    """A relay that logs when it is told to start the next zygotes and to go on."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def prepare(self, order) -> None:
        self.log.append(f"prepare {sorted(order)}")

    def advance(self) -> None:
        self.log.append("advance")


def test_the_next_rounds_zygotes_start_after_each_rounds_first_visit_but_the_last(tmp_path):
    """The relay is told to start the next round's zygotes once this round's have forked
    (its first visit), and to go on after every later visit; the last round starts none."""
    log: list[str] = []
    _three_rounds_on_renewing_pools(tmp_path, (1, 2, 3), log, LoggingRelay(log))
    steps = [entry for entry in log if not entry.startswith(("fork", "renew", "exit"))]
    each = ["prepare [0, 1]", "advance", "advance"]
    assert steps == each + each + ["advance"] * 3
    # Started after the round's first pair of forks, never before it.
    assert log[2] == "prepare [0, 1]" and log[:2] in (["fork 0", "fork 1"], ["fork 1", "fork 0"])


def test_a_stopped_ab_renews_nothing_more(tmp_path):
    """A stop before a round leaves the sides' zygotes as they are: no fresh one is
    started for a round that will not run."""
    from benchbench.run import ab
    from benchbench.run.jobs import Job
    from benchbench.run.rounds import Rounds
    from benchbench.run.runner import RunConfig

    store, summary = _ab_runs(tmp_path)
    log: list[str] = []
    stop = ab.StopRequest()

    def progress(event: str, _data: dict) -> None:
        if event == "advance":
            stop.request(signal.SIGINT)  # after the first visit

    job = Job({"op": "measure", "policy": {"max_time_s": 0.1}}, (POINT,), "p")
    config = RunConfig(suites=(), rounds=Rounds.fixed(3))
    pools = [RenewingPool(0, log), RenewingPool(1, log)]
    SIDES.clear()
    ab._measure([job], pools, config, store, summary, progress, stop)  # type: ignore[arg-type]
    assert sorted(log) == ["exit 0", "exit 1", "fork 0", "fork 1"]  # and no renewal
    assert store.measurements("run-a") == []  # its rounds are not all in: --resume's


def _three_rounds_on_renewing_pools(tmp_path, sizes, log, relay=None, pools=None, fails=0):
    """``ab``'s three rounds of a point per size in ``sizes``, on :class:`RenewingPool`
    sides logging into ``log`` (and ``relay``; ``pools`` gets the two pools, which fail
    the point of size ``fails``); the store holding the runs."""
    from benchbench.run import ab
    from benchbench.run.jobs import Job
    from benchbench.run.rounds import Rounds
    from benchbench.run.runner import RunConfig

    store, summary = _ab_runs(tmp_path)
    made = [RenewingPool(0, log, fails), RenewingPool(1, log, fails)]
    if pools is not None:
        pools.extend(made)
    SIDES.clear()
    jobs = [
        Job({"op": "measure", "size": n, "policy": {"max_time_s": 0.1}}, (POINT,), f"n={n}")
        for n in sizes
    ]
    config = RunConfig(suites=(), rounds=Rounds.fixed(3, seed=4))
    ab._measure(jobs, made, config, store, summary, lambda *_: None, ab.StopRequest(), relay)  # type: ignore[arg-type]
    return store


def _ab_runs(tmp_path):
    """A store holding an ``ab`` run pair (``run-a``, ``run-b``) and its summary."""
    from benchbench.machine.environment import Environment
    from benchbench.run import ab
    from benchbench.run.jobs import run_row
    from benchbench.store import open_store

    store = open_store(str(tmp_path / "ab.db"))
    env = Environment(fields={"machine": "t"}, info={})
    store.save_environment(env)
    summary = ab.AbSummary(("run-a", "run-b"), "group")
    for run_id in summary.run_ids:
        store.create_run(run_row(run_id, env, kind="adhoc", label=run_id, suites=[], config={}))
    return store, summary


class DuetSide:
    """A worker of ``ab --duet``: ``blocks`` turns, then its result; logs when it is told
    to go and when its block is read back."""

    def __init__(self, name: str, blocks: int, log: list[tuple[str, str]]) -> None:
        self.name, self.left, self.log = name, blocks, log

    def send(self, payload: dict) -> None:
        if payload.get("op") == "go":
            self.log.append(("go", self.name))
            self.left -= 1

    def expect(self, events, timeout_s, stop=None) -> dict:
        self.log.append(("done", self.name))
        if self.left > 0:
            return {"event": "turn"}
        result = Result(point=POINT, status="ok", samples_s=(1e-3,), reason=self.name)
        return {"event": "result", "result": result.to_dict()}


def test_in_duet_both_sides_are_told_to_go_before_either_block_is_read():
    log: list[tuple[str, str]] = []
    sides = [DuetSide("base", 4, log), DuetSide("head", 6, log)]
    results = measure_pair(sides, {"op": "measure"}, 1.0, random.Random(3), together=True)
    assert [r.reason for r in results if r is not None] == ["base", "head"]
    steps = log[2:]  # after each side's first turn
    # Four pairs: go, go, then both blocks read; then head's last two blocks alone.
    for k in range(4):
        pair = steps[4 * k : 4 * k + 4]
        assert [step for step, _ in pair] == ["go", "go", "done", "done"]
        assert sorted(name for _, name in pair[:2]) == ["base", "head"]
    assert steps[16:] == [("go", "head"), ("done", "head")] * 2
    # Which side is told first varies from pair to pair.
    assert {steps[4 * k][1] for k in range(4)} == {"base", "head"}


def test_warm_up_never_waits_for_the_turn_and_every_timed_block_does():
    """Both sides of ``ab`` warm up at once (nothing is timed yet), then take turns: the
    gate comes before every calibrated and sampled block, before its own ``pre``, and
    never before a warm-up chunk."""
    from benchbench.measure.policy import Policy, Subject, measure
    from benchbench.measure.timers import CpuTimer

    log: list[object] = []
    subject = Subject(
        "op",
        loop=lambda calls: log.append(calls),
        pre=lambda: log.append("pre"),
        gate=lambda: log.append("gate"),
    )
    policy = Policy(max_time_s=0.01, min_samples=3, warmup_min_calls=4, warmup_min_s=0.0)
    (measured,) = measure([subject], CpuTimer(), policy)
    first = log.index("gate")
    warm = log[:first]
    calls = [entry for entry in warm if isinstance(entry, int)]
    assert sum(calls) == measured.warmup["calls"] + 1  # the first call, then the chunks
    assert warm.count("pre") == len(calls)  # each warm-up chunk after its own pre
    timed = log[first:]
    # Calibration's blocks and the samples: each one the gate, its pre, its calls.
    blocks = [timed[k : k + 3] for k in range(0, len(timed), 3)]
    assert all(b[:2] == ["gate", "pre"] and isinstance(b[2], int) for b in blocks)
    assert len(blocks) >= len(measured.samples_s) >= 3
