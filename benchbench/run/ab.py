"""``benchbench ab``: a suite measured in two Python environments at once, interleaved.

A nightly on a shared runner shares its cores with whatever else runs there; two runs
an hour apart see different neighbours, and their comparison sees the neighbours. asv's
``continuous --interleave-rounds`` answers by measuring base and head at the same time:
a neighbour then slows both, and a paired test cancels it. Here:

- one zygote per side, each started by that side's interpreter (``--base`` and
  ``--head``: two virtual environments, e.g. yesterday's torch and today's, or two
  checkouts of the user's library), after checks that name the side at fault: the
  interpreter is missing, is not a Python, lacks torch or benchbench, or loads the suite
  to other point ids (:func:`check_side`, :func:`_check_points`);
- the rounds are ``run``'s (:class:`benchbench.run.rounds.RoundPlan`): every round visits
  every point in a seeded shuffled order, from a fresh zygote per side (every fork of
  one zygote shares its address layout: one zygote for all rounds would carry one layout
  bias between the sides through every round); each round forks one worker on each
  side (which side first: seeded random), which measures the round's points one after
  another, each on both sides in lockstep (:mod:`benchbench.run.lockstep`), base and
  head taking turns block by block (the next round's zygotes import torch meanwhile on
  the idle core: :mod:`benchbench.run.relay`); a visit that fails on either side
  retires both workers (a failed point may leave its process unfit) and the next visit
  forks fresh ones; a point's first round calibrates its calls per sample for the
  rounds after it (:func:`benchbench.run.rounds.carried_calls`), and a round samples
  as :func:`benchbench.run.rounds.lockstep_request` says;
- the sides' results are merged over the rounds both measured
  (:func:`benchbench.run.merge.merge_pair`: a round lost on one side is dropped from
  both, and every process keeps its round number) and stored as two runs of one group,
  each naming the other in
  ``config.ab``; :func:`benchbench.analysis.compare.compare_rows` with ``paired=True``
  judges them on the per-round log ratios of the rounds both kept (each the median of
  the round's pairs of samples taken side by side,
  :func:`benchbench.core.stats.pair_log_ratios`; a paired t, the pair count shown; a
  point that cannot be paired says which test it fell back to).

What a lockstep point does not record: peak memory, a trace, and machine telemetry
(each would run while the other side samples); ``benchbench run`` records them.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import subprocess
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.defaults import AB_ROUNDS
from benchbench.core.errors import UsageError
from benchbench.core.values import Result
from benchbench.machine.allocator import worker_environment
from benchbench.machine.environment import Environment
from benchbench.run.duet import Alternating, Pairing, choose
from benchbench.run.jobs import Job, ProgressFn, WorkerPool, run_row
from benchbench.run.lockstep import measure_pair, pair_failed
from benchbench.run.merge import merge_pair
from benchbench.run.planning import suites_of
from benchbench.run.pool import warm_ups
from benchbench.run.relay import Relay, spare_core
from benchbench.run.rounds import RoundPlan, carried_calls, target_of
from benchbench.run.runner import RunConfig, job_for, plan
from benchbench.run.workers import StopRequest, WorkerFailure, Zygote
from benchbench.store import Store
from benchbench.store.store import now

#: Rounds of ``ab`` by default (its reasons: core.defaults).
DEFAULT_AB_ROUNDS = AB_ROUNDS
#: The pairing of every ``ab`` without ``--duet``.
LOCKSTEP = Pairing(None, "lockstep: base and head take turns, one block of calls each")
#: Seconds a side's interpreter may take to import torch and benchbench in the check.
CHECK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Side:
    """One environment of an A/B run: ``name`` (base or head), its interpreter, its label."""

    name: str
    python: str
    label: str


@dataclass
class AbSummary:
    """What an ``ab`` run did: its two run ids (base, head), status and results per side."""

    run_ids: tuple[str, str]
    group_id: str
    status: str = "running"
    results: tuple[list[Result], list[Result]] = field(default_factory=lambda: ([], []))
    #: How the sides' blocks were paired: lockstep, or duet (:mod:`benchbench.run.duet`).
    pairing: Pairing = LOCKSTEP


def side_environment(allocator: str) -> dict[str, str]:
    """A side's worker environment: the allocator's, and idle OpenMP threads that sleep
    (``OMP_WAIT_POLICY=PASSIVE``: spinning ones of the waiting side gave ±50 %)."""
    env = worker_environment(allocator)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def check_side(side: Side, runner: Any = subprocess.run) -> str:
    """The torch version of ``side``'s interpreter; UsageError naming the side when it is
    missing, is not a Python, or lacks torch or benchbench."""
    flag = f"--{side.name}"
    path = Path(side.python)
    if not path.exists():
        raise UsageError(f"{flag} {side.python}: no such file; give a Python interpreter path")
    script = (
        "import sys\n"
        "try:\n"
        "    import torch, benchbench\n"
        "except ImportError as exc:\n"
        "    print('missing', exc.name)\n"
        "    sys.exit(0)\n"
        "print('ok', torch.__version__, flush=True)\n"
        "import os; os._exit(0)  # torch's teardown costs ~1 s of CPU and says nothing\n"
    )
    try:
        done = runner(
            [side.python, "-c", script],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{flag} {side.python} is not a Python interpreter: {exc}") from None
    words = done.stdout.split()
    if done.returncode != 0 or not words or words[0] not in ("ok", "missing"):
        raise UsageError(
            f"{flag} {side.python} is not a Python interpreter (it exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-200:]!r})"
        )
    if words[0] == "missing":
        module = words[1] if len(words) > 1 else "torch"
        raise UsageError(
            f"{flag} {side.python} cannot import {module}: install it in that environment "
            f"({side.python} -m pip install {module if module != 'benchbench' else 'benchbench'})"
        )
    return words[1]


def check_sides(sides: Sequence[Side], runner: Any = subprocess.run) -> list[str]:
    """:func:`check_side` of every side at once (each imports torch: ~2 s a side), one
    check per interpreter; the torch versions in the order of ``sides``, or the
    UsageError of the first side at fault."""
    first: dict[str, Side] = {}
    for side in sides:
        first.setdefault(side.python, side)
    with ThreadPoolExecutor(max_workers=len(first) or 1) as pool:
        checks = {python: pool.submit(check_side, side, runner) for python, side in first.items()}
        versions = {python: check.result() for python, check in checks.items()}
    return [versions[side.python] for side in sides]


def _check_points(
    sides: Sequence[Side], pools: Sequence[WorkerPool], config: RunConfig, ids: Sequence[str]
) -> None:
    """UsageError naming the side whose suites load to other point ids than the runner's."""
    request = {
        "op": "points",
        "suites": [str(p) for p in config.suites],
        "selection": dataclasses.asdict(config.selection),
    }
    for side, pool in zip(sides, pools, strict=True):
        answer = pool.request(request, ("points",), CHECK_TIMEOUT_S)["ids"]
        pool.retire()
        if isinstance(answer, str):
            raise UsageError(f"--{side.name} {side.python} cannot load the suites: {answer}")
        if list(answer) != list(ids):
            extra = sorted(set(answer) - set(ids))
            lacking = sorted(set(ids) - set(answer))
            raise UsageError(
                f"--{side.name} {side.python} loads the suites to other points: "
                f"{len(lacking)} missing, {len(extra)} not planned (the suites or the "
                "benchbench versions differ); both sides must measure the same point ids"
            )


def run_ab(
    config: RunConfig,
    sides: tuple[Side, Side],
    store: Store,
    progress: ProgressFn | None = None,
    stop: StopRequest | None = None,
    checked: bool = False,
    duet: bool = False,
) -> AbSummary:
    """Measure ``config``'s points on both ``sides`` in lockstep, into two runs of ``store``.

    ``config.rounds`` rounds (fixed: no extra rounds), each visiting every point in a
    seeded shuffled order. ``progress`` gets ``start``, ``point``, ``advance`` and
    ``result`` as from :func:`benchbench.run.jobs.measure_jobs`. ``checked``: the
    caller ran :func:`check_sides` already (the CLI does, before it opens
    the store, so a usage error creates no store). ``duet``: both sides' blocks at the
    same moment, one core each, when two cores are idle (:mod:`benchbench.run.duet`);
    the summary's ``pairing`` says which it was and why.
    """
    notify = progress or (lambda _event, _data: None)
    stop = stop or StopRequest()
    if not checked:
        check_sides(sides)
    # Before the suites load: their torch import here would read as a busy core.
    pairing = choose(cpus=config.cpus or None) if duet else LOCKSTEP
    # The zygotes import torch while the suites load here.
    pools, relay = _pools(config, sides, pairing.cores)
    group_id = str(uuid.uuid4())
    summary = AbSummary((str(uuid.uuid4()), str(uuid.uuid4())), group_id, pairing=pairing)
    opened = False
    try:
        planned = plan(config)
        if not planned:
            raise UsageError(
                "no points to run: the filters (--filter, --tag, --device, --dtype) match nothing"
            )
        jobs = [job_for(config, p, None) for p in planned]
        _check_points(sides, pools, config, [p.benchmark_id for p in planned])
        environments = [_environment(pool, config.threads) for pool in pools]
        for k, side in enumerate(sides):
            store.save_environment(environments[k])
            store.create_run(_ab_row(summary, k, side, config, environments[k]))
        if duet:  # asked for: say whether it was granted
            notify("note", {"message": pairing.note})
        opened = True
        _measure(jobs, pools, config, store, summary, notify, stop, relay)
        summary.status = "interrupted" if stop.requested else "finished"
    except BaseException:
        summary.status = "interrupted"
        raise
    finally:
        if relay is not None:
            relay.close()
        for pool in pools:
            pool.close()
        if opened:
            for run_id in summary.run_ids:
                store.update_run(run_id, status=summary.status, finished_at=now())
    return summary


def _pools(
    config: RunConfig, sides: Sequence[Side], duet: tuple[int, int] | None = None
) -> tuple[list[WorkerPool], Relay | None]:
    """A worker pool per side, its zygote started by the side's interpreter; the pool's
    ``renew`` starts a fresh zygote the same way (a round's), or takes the one the relay
    started ahead on the spare core (:mod:`benchbench.run.relay`; None: no spare core).
    Under ``duet`` (two cores) each side's zygotes are pinned to one of them, the sides
    swapping cores each round."""
    env = side_environment(config.allocator)
    starts: list[Any] = []
    for k, side in enumerate(sides):
        make = functools.partial(Zygote, config.memory_limit_bytes, env=env, python=side.python)
        starts.append(
            Alternating(make, k, duet) if duet else functools.partial(make, cpus=config.cpus)
        )
    relay = Relay(starts) if spare_core(config.cpus, duet is not None) else None
    pools = [
        WorkerPool(start(), relaunch=functools.partial(relay.take, k) if relay else start)
        for k, start in enumerate(starts)
    ]
    return pools, relay


def _measure(
    jobs: Sequence[Job],
    pools: Sequence[WorkerPool],
    config: RunConfig,
    store: Store,
    summary: AbSummary,
    notify: ProgressFn,
    stop: StopRequest,
    relay: Relay | None = None,
) -> None:
    """Every job on both sides in the rounds ``run`` takes too, from a lockstep pair of
    workers a round (:func:`_pair`); a point's sides merged as a pair and written to the
    two runs when its last round is in.
    With a ``relay``, the next round's zygotes start after each round's first visit."""
    schedule = RoundPlan([job.request for job in jobs], config.rounds, lockstep=True)
    rng = random.Random(f"ab:{config.rounds.seed}")
    taken: list[list[list[Result]]] = [[[] for _ in jobs] for _ in pools]  # [side][job]
    calls: dict[int, int] = {}  # a job's calls per sample, as its first round calibrated them
    total = len(jobs) * schedule.count
    notify("start", {"total": total, "run_id": summary.run_ids[1]})
    # A fresh zygote per side and round (the sides renewed in a random order): every fork
    # of a zygote shares its address layout, so one zygote for all rounds would carry one
    # layout bias between the sides through every round, which a test paired by round
    # cannot see.
    for round_index in schedule.each_round(pools, lambda: not stop.requested, rng):
        ahead = relay is not None and round_index + 1 < schedule.count
        for visit in schedule.visits(round_index):
            if stop.requested:
                return
            index, job = visit.index, jobs[visit.index]
            notify("point", {"index": index, "label": job.label, "round": visit.round})
            limit_s = 2 * (job.timeout_s or config.timeout_s)
            request = carried_calls(visit.request, calls.get(index, 0))
            pair = _pair(pools, request, limit_s, rng, stop, job, summary.pairing.cores is not None)
            if pair is None:
                return  # stopped: the point's rounds are lost, as in an interrupted run
            for side, result in enumerate(pair):
                taken[side][index].append(result)
            if relay is not None:  # after the round's first visit its zygotes are ready
                if ahead:
                    relay.prepare(rng.sample(range(len(pools)), len(pools)))
                    ahead = False
                else:
                    relay.advance()
            if index not in calls and all(r.status == "ok" for r in pair):
                calls[index] = max(r.calls_per_sample for r in pair)
            notify("advance", {"total": total})
            if not visit.last:
                continue
            merged = merge_pair(taken[0][index], taken[1][index], target_of(job.request))
            for side, result in enumerate(merged):
                store.write_result(summary.run_ids[side], result)
                summary.results[side].append(result)
            notify("result", {"index": index, "results": merged, "result": merged[1]})
        _retire(pools)  # the round's workers; the next round forks from fresh zygotes


def _pair(
    pools: Sequence[WorkerPool],
    request: dict[str, Any],
    limit_s: float,
    rng: random.Random,
    stop: StopRequest,
    job: Job,
    together: bool = False,
) -> list[Result] | None:
    """One visit of a point: each side's worker of the round (the round's first visit
    forks them, in a random order), measured in lockstep (``together``: in duet); a
    failure is that round's error on both sides, and one on either side retires both
    workers (the next visit forks fresh ones)."""
    order = [0, 1]
    rng.shuffle(order)
    try:
        workers = {side: pools[side].worker(warm_ups(request)) for side in order}
        found = measure_pair([workers[0], workers[1]], request, limit_s, rng, stop, together)
    except WorkerFailure as failure:
        _retire(pools)
        if stop.requested:
            return None
        return [job.failed(pair_failed(failure))[0]] * 2
    results = [r for r in found if r is not None]
    if len(results) < len(found) or any(r.status == "error" for r in results):
        _retire(pools)  # stopped, or a point that failed may leave its worker unfit
    return results if len(results) == len(found) else None


def _retire(pools: Sequence[WorkerPool]) -> None:
    """Both sides' workers told to exit at once, then each waited for."""
    for pool in pools:
        pool.ask_retire()
    for pool in pools:
        pool.retire()


def _environment(pool: WorkerPool, threads: int | None) -> Environment:
    message = pool.request({"op": "environment", "threads": threads}, ("environment",), 120.0)
    pool.retire()
    return Environment(fields=message["fields"], info=message["info"])


def _ab_row(
    summary: AbSummary, k: int, side: Side, config: RunConfig, env: Environment
) -> dict[str, Any]:
    suites = suites_of(config.suites)
    return run_row(
        summary.run_ids[k],
        env,
        kind=config.kind,
        label=side.label,
        suites=suites,
        tags=config.tags,
        group_id=summary.group_id,
        repo=config.repo,
        config={
            "policy": dataclasses.asdict(config.policy),
            "cache": config.cache,
            "outputs": config.outputs,
            "threads": config.threads,
            "timeout_s": config.timeout_s,
            "allocator": config.allocator,
            "cpus": list(config.cpus) or None,
            "rounds": config.rounds.to_dict(),
            "selection": dataclasses.asdict(config.selection),
            "ab": {
                "side": side.name,
                "pairing": summary.pairing.name,
                "duet_cores": list(summary.pairing.cores or ()) or None,
                "python": side.python,
                "paired_run": summary.run_ids[1 - k],
            },
        },
    )
