"""Why benchbench and its peers disagree on some operator_benchmark cases, side by side.

Issue 33 item 5: on an AVX2 EPYC, upstream's operator_benchmark harness and ``benchbench
run opbench:FILE --threads 1`` disagreed by more than 10 % at 5 of 10 cases (``add``
64x64x64 1.3x ours/theirs, ``exp`` 512x512 1.3x, ``abs`` 512x512 0.09x), and
``torch.utils.benchmark.Timer`` read ``add`` 2^20 at 1/1.30 and ``sqrt`` 2^20 at 1/0.88
of ours. Upstream's ``benchmark_core`` is not installed here, so its timed loop is
written out below from its source (``benchmark_pytorch.PyTorchOperatorTestCase
.run_forward``: ``self.output = self.op_bench.forward_impl()`` in a Python loop, the
inputs built once by ``init`` with ``torch.rand`` and never restored, one thread).

Everything is timed in ONE process (one torch thread), each comparison's sides in turn
within every round, short blocks, many rounds, the median per side: a loaded machine
slows both sides of a round alike, so the ratios mean something even under load. Minor
page faults per call are counted beside (``getrusage``): a count, which load cannot move.

1. **Loops** per case: ``upstream`` (``out = forward(*inputs)``, the previous output alive
   during the call), ``keep`` (benchbench's default loop, :func:`make_loop`), ``drop``
   (each output released at once, as ``timeit`` and ``Timer`` treat a statement's value)
   and ``timer`` (``torch.utils.benchmark.Timer(...).blocked_autorange()``'s median).
2. **Allocation**: the ``keep`` loop with glibc's mmap threshold at 128 KiB (glibc's
   starting value, where a plain ``python`` such as upstream's harness begins: every
   output above it is a fresh ``mmap``, faulted in page by page, and unmapped when
   freed) against 32 MiB (what benchbench's workers fix, :mod:`benchbench.machine
   .allocator`), switched with ``mallopt`` between blocks.
3. **Inputs**: ``torch.exp`` of ``torch.rand`` values against ``torch.exp`` of ``+inf``:
   what upstream's ``exp_`` test computes after its first few calls on one tensor
   (``exp(exp(exp(exp(x))))`` overflows), and what benchbench computed before it restored
   an in-place test's input before every call.

``--capability avx2`` runs it all again in a child with ``ATEN_CPU_CAPABILITY=avx2``,
which makes an AVX-512 CPU run torch's AVX2 kernels.

Usage: ``python benchmarks/peer_agreement.py [--rounds 15] [--block-s 0.005]
[--capability best,avx2]``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

#: mallopt's parameter number for the mmap threshold (malloc.h: M_MMAP_THRESHOLD).
M_MMAP_THRESHOLD = -3
M_TRIM_THRESHOLD = -1


def _cases(torch: Any) -> dict[str, tuple[Callable[..., object], Callable[[], tuple]]]:
    """The cases: an operator and a builder of its inputs (``torch.rand``, as upstream's
    ``init``s)."""
    n = 2**20
    return {
        "add_M64_N64_K64": (torch.add, lambda: (torch.rand(64, 64, 64), torch.rand(64, 64, 64))),
        "exp_M512_N512": (torch.exp, lambda: (torch.rand(512, 512),)),
        "abs_M512_N512": (torch.abs, lambda: (torch.rand(512, 512),)),
        "sqrt_M512_N512": (torch.sqrt, lambda: (torch.rand(512, 512),)),
        "neg_M512_N512": (torch.neg, lambda: (torch.rand(512, 512),)),
        "add_2^20": (lambda x: x + 1.0, lambda: (torch.rand(n),)),
        "sqrt_2^20": (torch.sqrt, lambda: (torch.rand(n),)),
    }


def _upstream(fn: Callable[..., object], inputs: tuple) -> Callable[[int], None]:
    def loop(n: int) -> None:
        output = None
        for _ in range(n):
            output = fn(*inputs)
        del output

    return loop


def _timed(loop: Callable[[int], None], calls: int) -> tuple[float, float]:
    """Seconds and minor page faults per call of ``loop(calls)``."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    loop(calls)
    seconds = (time.perf_counter() - started) / calls
    return seconds, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def _sides(
    sides: dict[str, Callable[[], tuple[float, float]]], rounds: int
) -> dict[str, dict[str, Any]]:
    """Each side timed once per round, in turn; median seconds and faults per call."""
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, timed in sides.items():
            seen[name].append(timed())
    return {
        name: {
            "s": statistics.median(s for s, _ in values),
            "faults": statistics.median(f for _, f in values),
            "rounds": [s for s, _ in values],
        }
        for name, values in seen.items()
    }


def paired(sides: dict[str, dict[str, Any]], a: str, b: str) -> float:
    """The median over rounds of ``a / b`` within each round: blocks milliseconds apart,
    so a neighbour's load hits both sides of a round alike."""
    return statistics.median(
        x / y for x, y in zip(sides[a]["rounds"], sides[b]["rounds"], strict=True)
    )


def _child(rounds: int, block_s: float) -> dict[str, Any]:
    import torch
    import torch.utils.benchmark as tub

    from benchbench.measure.loops import make_loop

    torch.set_num_threads(1)
    torch.manual_seed(0)
    libc = ctypes.CDLL("libc.so.6")
    out: dict[str, Any] = {"capability": torch.backends.cpu.get_cpu_capability()}
    for case, (fn, build) in _cases(torch).items():
        inputs = build()
        keep = make_loop(fn, inputs, "keep")
        keep(20)
        calls = max(2, int(block_s / _timed(keep, 5)[0]))
        timer = tub.Timer("fn(*inputs)", globals={"fn": fn, "inputs": inputs})

        def timer_side(timer: Any = timer) -> tuple[float, float]:
            return timer.blocked_autorange(min_run_time=block_s).median, 0.0

        loops = {
            "upstream": _upstream(fn, inputs),
            "keep": keep,
            "drop": make_loop(fn, inputs, "drop"),
        }
        sides: dict[str, Callable[[], tuple[float, float]]] = {
            name: (lambda loop=loop, n=calls: _timed(loop, n)) for name, loop in loops.items()
        }
        sides["timer"] = timer_side
        result = {"loops": _sides(sides, rounds)}

        def with_threshold(
            nbytes: int, loop: Callable = keep, n: int = calls
        ) -> tuple[float, float]:
            libc.mallopt(M_MMAP_THRESHOLD, nbytes)
            libc.mallopt(M_TRIM_THRESHOLD, 2 * nbytes)
            loop(2)  # the first call after a switch pays for the switch
            return _timed(loop, n)

        result["allocation"] = _sides(
            {
                "glibc_128KiB": lambda: with_threshold(128 * 2**10),
                "fixed_32MiB": lambda: with_threshold(32 * 2**20),
            },
            rounds,
        )
        out[case] = result
    finite = torch.rand(512, 512)
    infinite = torch.full((512, 512), float("inf"))
    stepped = finite.clone()
    for _ in range(6):
        stepped.exp_()
    exp_keep = {
        "rand": make_loop(torch.exp, (finite,), "keep"),
        "inf": make_loop(torch.exp, (infinite,), "keep"),
    }
    calls = max(2, int(block_s / _timed(exp_keep["rand"], 5)[0]))
    out["exp_inputs"] = {
        "after_6_exp_": float(torch.isinf(stepped).float().mean()),
        **_sides({k: (lambda v=v: _timed(v, calls)) for k, v in exp_keep.items()}, rounds),
    }
    return out


def _print(result: dict[str, Any]) -> None:
    print(f"\ntorch CPU capability {result['capability']}")
    print(
        f"{'case':16} {'upstream':>9} {'keep':>9} {'drop':>9} {'timer':>9}  keep/up  "
        "keep/timer keep/drop (median of per-round ratios)  faults/call up,keep | "
        "glibc 128KiB vs fixed: time, ratio, faults"
    )
    for case, r in result.items():
        if case in ("capability", "exp_inputs"):
            continue
        loops, alloc = r["loops"], r["allocation"]
        us = " ".join(f"{1e6 * loops[k]['s']:8.1f}u" for k in ("upstream", "keep", "drop", "timer"))
        glibc, fixed = alloc["glibc_128KiB"], alloc["fixed_32MiB"]
        print(
            f"{case:16} {us}  {paired(loops, 'keep', 'upstream'):7.2f}  "
            f"{paired(loops, 'keep', 'timer'):10.2f} {paired(loops, 'keep', 'drop'):9.2f}  "
            f"{loops['upstream']['faults']:6.1f} {loops['keep']['faults']:6.1f} | "
            f"{1e6 * glibc['s']:8.1f}u {1e6 * fixed['s']:8.1f}u "
            f"{paired(alloc, 'fixed_32MiB', 'glibc_128KiB'):5.2f}  {glibc['faults']:6.1f} "
            f"{fixed['faults']:5.1f}"
        )
    e = result["exp_inputs"]
    print(
        f"exp 512x512 (keep loop): rand {1e6 * e['rand']['s']:.1f} us, +inf "
        f"{1e6 * e['inf']['s']:.1f} us, inf/rand {paired(e, 'inf', 'rand'):.2f}; "
        f"share of +inf after 6 calls of exp_ on torch.rand: {e['after_6_exp_']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block-s", type=float, default=0.005)
    parser.add_argument("--capability", default="best,avx2", help="best, avx2 (a list)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.rounds, args.block_s)))
        return
    from benchbench.machine.allocator import worker_environment

    print(f"load average before: {os.getloadavg()}", flush=True)
    for capability in args.capability.split(","):
        # The workers' environment (fixed glibc thresholds), one OpenMP thread.
        env = {**worker_environment("system"), "OMP_NUM_THREADS": "1"}
        if capability.strip() != "best":
            env["ATEN_CPU_CAPABILITY"] = capability.strip()
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(args.rounds),
             "--block-s", str(args.block_s)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        _print(json.loads(done.stdout))
        sys.stdout.flush()
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
