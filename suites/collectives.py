"""collectives: all-reduce, all-gather, broadcast bandwidth versus message size (SEEDS D).

How a point runs: the benchbench worker is rank 0. The workload's ``setup`` opens a
``TCPStore`` on 127.0.0.1 (free port), starts ``ranks - 1`` helper processes (this
file run as a script), waits until each has joined, then joins the process group
itself (gloo on the CPU, nccl on CUDA with one GPU per rank). Each helper repeats the
same collective on the same-sized buffer forever: every collective blocks until all
ranks take part, so each call rank 0 times is paired with one helper call, whatever
number of calls warm-up and calibration choose. ``teardown`` kills the helpers and
destroys the group. A helper also dies with its parent (``PR_SET_PDEATHSIG`` on
Linux) and gives up after the group's 30 s timeout, so none outlives the point.

A rank that dies takes down that point only: rank 0's next collective fails, and the
error names the rank and its exit code (``rank 1 died (exit code 3) during
all-reduce: ...``); the run goes on.

Bandwidth as nccl-tests defines it (``doc/PERFORMANCE.md``): the message size S is the
buffer of all-reduce and broadcast and the *gathered* output of all-gather; algbw =
S / t; busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for all-gather, 1 for
broadcast. The work model declares ``bytes`` = S * factor, so the stored
``bytes_per_s`` *is* the bus bandwidth, and ``items`` = S, so ``items_per_s`` is the
algorithm bandwidth in bytes/s.

All-reduce uses ``MAX``: repeated in-place calls leave the buffer unchanged (``SUM``
would double it every call and overflow float32 after ~128 calls); the ring moves
the same bytes for every reduction op. Rank r holds the point's seeded data times
(r + 1), so the expected output is known and checked like any other point.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from benchbench import Skip, Suite, Variant, pow2
from benchbench.analysis.claims import read_claims
from benchbench.core.values import Point
from benchbench.suite.inputs import SetupContext

suite = Suite(
    "collectives", description="torch.distributed bandwidth, several ranks on one machine"
)

GROUP_TIMEOUT_S = 30.0  # a collective waiting longer fails (a hung or dead peer)
JOIN_TIMEOUT_S = 120.0  # helpers import torch first: ~3-10 s on a loaded machine
DEATH_WAIT_S = 5.0  # a helper whose peer saw its sockets close is reaped within this
BUS_FACTOR = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def rank_data(point: Point, rank: int, world: int, op: str) -> torch.Tensor:
    """Rank ``rank``'s input: the point's seeded data times (rank + 1)."""
    ctx = SetupContext(point)
    numel = point.numel // world if op == "all-gather" else point.numel
    device = torch.device(point.device)
    if device.type == "cuda":
        device = torch.device("cuda", rank)
    x = ctx.uniform(0.5, 1.5, shape=(numel,), dtype=torch.float64) * (rank + 1)
    return x.to(ctx.dtype).to(device)


def output_buffer(x: torch.Tensor, op: str, world: int) -> torch.Tensor:
    return torch.empty(
        x.numel() * world if op == "all-gather" else 0, dtype=x.dtype, device=x.device
    )


def run_op(op: str, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """One collective; returns what rank 0 checks (the buffer or the gathered output)."""
    if op == "all-reduce":
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        return x
    if op == "all-gather":
        _all_gather(out, x)
        return out
    dist.broadcast(x, src=0)
    return x


class Group:
    """Rank 0's side of one point's process group: the helpers and their logs."""

    def __init__(self, point: Point, op: str, world: int, backend: str, exit_after: int) -> None:
        self.point, self.op, self.world, self.backend = point, op, world, backend
        # Closed in close(), which teardown always calls.
        self.logs = [tempfile.TemporaryFile() for _ in range(world - 1)]  # noqa: SIM115
        self.store = dist.TCPStore(
            "127.0.0.1",
            0,
            world,
            is_master=True,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S),
        )
        env = _helper_env()
        self.helpers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _HELPER_LAUNCH,
                    __file__,
                    "--rank",
                    str(rank),
                    "--world",
                    str(world),
                    "--port",
                    str(self.store.port),
                    "--backend",
                    backend,
                    "--op",
                    op,
                    "--point",
                    json.dumps(point.to_dict()),
                    "--exit-after",
                    str(exit_after),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
            )
            for rank, log in zip(range(1, world), self.logs, strict=True)
        ]
        self._wait_for_helpers()
        dist.init_process_group(
            backend,
            store=self.store,
            rank=0,
            world_size=world,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
        )

    def _wait_for_helpers(self) -> None:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        keys = [f"up{rank}" for rank in range(1, self.world)]
        while not self.store.check(keys):
            if self.dead() or time.monotonic() > deadline:
                message = self.dead() or f"helpers did not join within {JOIN_TIMEOUT_S:g} s"
                self.close()
                raise RuntimeError(f"{self.op}: {message}")
            time.sleep(0.05)

    def dead(self, wait_s: float = 0.0) -> str | None:
        """'rank R died (exit code C): <last log line>' for the first dead helper.

        ``wait_s`` gives a dying helper that long to be reaped: its sockets close before
        its process ends, so rank 0's transport error can come first.
        """
        deadline = time.monotonic() + wait_s
        while True:
            for rank, (proc, log) in enumerate(zip(self.helpers, self.logs, strict=True), start=1):
                code = proc.poll()
                if code is not None:
                    log.seek(0)
                    lines = log.read().decode(errors="replace").strip().splitlines()
                    last = f": {lines[-1][:200]}" if lines else ""
                    return f"rank {rank} died (exit code {code}){last}"
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def expected(self) -> torch.Tensor:
        """What rank 0 should hold after the collective, in float64 on the CPU."""
        data = [
            rank_data(self.point, r, self.world, self.op).double().cpu() for r in range(self.world)
        ]
        if self.op == "all-reduce":
            return torch.stack(data).amax(dim=0)
        if self.op == "all-gather":
            return torch.cat(data)
        return data[0]

    def close(self) -> None:
        for proc in self.helpers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for log in self.logs:
            log.close()
        if dist.is_initialized():
            dist.destroy_process_group()


# Run this file as __main__ without putting suites/ first on sys.path (its module
# names, e.g. ``special``, would shadow other packages').
_HELPER_LAUNCH = (
    "import runpy, sys; sys.argv.pop(0); runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _helper_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__import__("benchbench").__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def collective_setup(op: str, exit_after: int = 0):
    """Setup of a collective point: start the group; inputs are (x, out, group)."""

    def setup(ctx):
        world = ctx["ranks"]
        if not dist.is_available():
            raise Skip("torch.distributed is not available in this PyTorch build")
        backend = "nccl" if ctx.device.type == "cuda" else "gloo"
        if backend == "nccl" and torch.cuda.device_count() < world:
            raise Skip(
                f"nccl with {world} ranks needs {world} GPUs; {torch.cuda.device_count()} found"
            )
        if backend == "gloo" and not dist.is_gloo_available():
            raise Skip("gloo is not available in this PyTorch build")
        if sys.platform.startswith("linux"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        group = Group(ctx.point, op, world, backend, exit_after)
        x = rank_data(ctx.point, 0, world, op)
        return x, output_buffer(x, op, world), group

    return setup


def collective_call(op: str):
    def call(x, out, group):
        try:
            return run_op(op, x, out)
        except RuntimeError as exc:
            dead = group.dead(wait_s=DEATH_WAIT_S)
            if dead is None:
                raise
            raise RuntimeError(f"{dead} during {op}: {str(exc).splitlines()[0][:200]}") from None

    call.__name__ = op.replace("-", "_")
    return call


def declare(target: Suite, op: str, sizes, tags, exit_after: int = 0, name: str | None = None):
    """Declare one collective workload on ``target`` (tests reuse it with ``exit_after``)."""
    return target.workload(
        name or op,
        setup=collective_setup(op, exit_after),
        teardown=lambda x, out, group: group.close(),
        variants=[Variant(f"torch.distributed {op}", collective_call(op))],
        sizes=sizes,
        devices=("cpu", "cuda"),
        params={"ranks": [2]},
        reference=lambda x, out, group: group.expected(),
        bytes=lambda p: p.numel * p.itemsize * BUS_FACTOR[op](p["ranks"]),
        items=lambda p: p.numel * p.itemsize,
        tags=tags,
        description=f"{op} of S bytes; bytes/s = bus bandwidth, items/s = algorithm bandwidth",
    )


for _op in BUS_FACTOR:
    declare(suite, _op, pow2(8, 24, step=4), ("quick", "nightly", "full"))
    declare(suite, _op, pow2(8, 24, step=2), ("nightly", "full"), name=f"{_op} sweep")

# The claims these points answer: suites/claims/collectives.py (no torch there, so that
# `benchbench claims` reads them without loading this file).
suite.claims += read_claims(__file__)


def _helper_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="a helper rank of a collectives point")
    for flag in ("--rank", "--world", "--port", "--exit-after"):
        parser.add_argument(flag, type=int, required=True)
    for flag in ("--backend", "--op", "--point"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args(argv)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    store = dist.TCPStore(
        "127.0.0.1",
        args.port,
        args.world,
        is_master=False,
        timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S),
    )
    store.set(f"up{args.rank}", "1")
    dist.init_process_group(
        args.backend,
        store=store,
        rank=args.rank,
        world_size=args.world,
        timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
    )
    point = Point.from_dict(json.loads(args.point))
    if args.backend == "nccl":
        torch.cuda.set_device(args.rank)
    x = rank_data(point, args.rank, args.world, args.op)
    out = output_buffer(x, args.op, args.world)
    calls = 0
    while True:
        run_op(args.op, x, out)
        calls += 1
        if args.exit_after and calls >= args.exit_after:
            print(
                f"rank {args.rank}: exiting after {calls} calls as asked",
                file=sys.stderr,
                flush=True,
            )
            os._exit(3)


if __name__ == "__main__":
    sys.exit(_helper_main(sys.argv[1:]))
