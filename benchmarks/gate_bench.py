"""The nightly gate as a classifier: false alarms on identical code, power on a slowdown.

Runs real ``benchbench run`` invocations into a throwaway store, then ``benchbench
compare`` between them, exactly as a nightly job does:

- **A/A**: consecutive runs of identical code. A false alarm is a pair where
  ``compare`` exits 3 or marks any point ``slower`` or ``faster``.
- **A/B**: each A run against a B run of the same suite in which every call does 10 %
  more work (the same point ids: only the environment variable
  ``GATE_EXTRA_WORK=0.1`` differs). Power is the share of points marked ``slower``.
- **Process spread**: for points of >= 50 µs, max/min of the medians of the A runs.

Suites: ``gate`` (allocating elementwise ops, 2^16-2^22 elements, written below) and
``quick`` (A/A and spread only: its operators have no extra-work switch).

Usage: ``python benchmarks/gate_bench.py [--runs N] [--quick-runs M] [--rounds R]``
(numbers in BENCHMARKS.md, with the load during the run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

GATE_SUITE = '''
"""gate: allocating elementwise ops whose every call can do a fraction more work."""
import os
import torch
from benchbench import Suite, Variant, pow2

EXTRA = float(os.environ.get("GATE_EXTRA_WORK", "0"))
suite = Suite("gate", description="allocating elementwise ops, 2^16-2^22")


def more(fn):
    """fn, plus the same op on EXTRA of the input: EXTRA more work per call."""
    if EXTRA <= 0:
        return fn

    def both(x):
        out = fn(x)
        fn(x[: max(1, int(x.numel() * EXTRA))])
        return out

    return both


for name, fn in [
    ("add", lambda x: x + 1.0),
    ("mul", lambda x: x * 1.5),
    ("exp", torch.exp),
    ("rsqrt", lambda x: 1 / torch.sqrt(x)),
]:
    suite.workload(
        name,
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant("torch", more(fn))],
        sizes=pow2(16, 22, step=2),
        bytes=lambda p: 2 * p.numel * p.itemsize,
    )
'''


#: Flags every run of the script gets (``--threads``).
RUN_FLAGS: list[str] = []


def _bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchbench", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _run(suite: str, store: str, label: str, rounds: int, extra: float = 0.0) -> float:
    """One ``benchbench run`` (with the script's run flags); its wall time."""
    started = time.monotonic()
    done = _bench(
        "run",
        suite,
        "--store",
        store,
        "--label",
        label,
        "--rounds",
        str(rounds),
        "--json",
        *RUN_FLAGS,
        env={"GATE_EXTRA_WORK": str(extra)},
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"run {label} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - started


def _compare(store: str, base: str, contender: str) -> tuple[int, dict[str, int]]:
    done = _bench("compare", base, contender, "--store", store, "--json")
    if done.returncode not in (0, 3):
        raise SystemExit(f"compare failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.returncode, json.loads(done.stdout)["counts"]


def _medians(store: str, label: str) -> dict[str, float]:
    done = _bench("show", label, "--store", store, "--json")
    rows = json.loads(done.stdout)["results"]
    return {
        f"{r['workload']}:{r['variant']}:{r['size']}": r["median_s"]
        for r in rows
        if r.get("status") == "ok" and r.get("median_s")
    }


def _spread(store: str, labels: list[str]) -> tuple[int, int, float]:
    """Points >= 50 µs, how many have max/min of their medians <= 1.03, the worst ratio."""
    runs = [_medians(store, label) for label in labels]
    keys = [k for k in runs[0] if all(k in r for r in runs) and runs[0][k] >= 50e-6]
    ratios = [max(r[k] for r in runs) / min(r[k] for r in runs) for k in keys]
    return len(keys), sum(q <= 1.03 for q in ratios), max(ratios, default=float("nan"))


def _flagged(counts: dict[str, int]) -> int:
    return counts.get("slower", 0) + counts.get("faster", 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="A runs (and B runs) of gate")
    parser.add_argument("--quick-runs", type=int, default=4, help="A runs of quick (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="--rounds of every run")
    parser.add_argument("--threads", type=int, help="--threads of every run (default: torch's)")
    args = parser.parse_args()
    if args.threads is not None:
        RUN_FLAGS.extend(["--threads", str(args.threads)])
    work = Path(tempfile.mkdtemp(prefix="gate-bench-"))
    suite = work / "gate.py"
    suite.write_text(GATE_SUITE)
    store = str(work / "gate.db")
    print(f"rounds {args.rounds}, flags {RUN_FLAGS}; load before: {os.getloadavg()}", flush=True)

    a_labels, b_labels, seconds = [], [], []
    for k in range(args.runs):  # A and B alternate, so drift hits both alike
        a_labels.append(f"a{k}")
        seconds.append(_run(str(suite), store, f"a{k}", args.rounds))
        b_labels.append(f"b{k}")
        _run(str(suite), store, f"b{k}", args.rounds, extra=0.1)
    aa = [_compare(store, x, y) for x, y in pairwise(a_labels)]
    ab = [_compare(store, a, b) for a, b in zip(a_labels, b_labels, strict=True)]
    alarms = sum(1 for code, counts in aa if code == 3 or _flagged(counts))
    print(f"gate: {args.runs} A runs, {sum(seconds) / len(seconds):.1f} s each")
    print(f"  A/A pairs with any point flagged: {alarms} of {len(aa)}")
    for code, counts in aa:
        print(f"    exit {code}  {counts}")
    total = [sum(counts.values()) for _, counts in ab]
    slower = [counts.get("slower", 0) for _, counts in ab]
    share = 100 * sum(slower) / max(1, sum(total))
    print(
        f"  A/B (+10 % work): exit 3 in {sum(code == 3 for code, _ in ab)} of {len(ab)}; "
        f"points slower {sum(slower)} of {sum(total)} ({share:.0f} %)"
    )
    for code, counts in ab:
        print(f"    exit {code}  {counts}")
    n, within, worst = _spread(store, a_labels[:3])
    print(f"  spread of 3 A runs, points >= 50 us: {within} of {n} within 1.03; worst {worst:.3f}")

    if args.quick_runs:
        q_labels, q_seconds = [], []
        for k in range(args.quick_runs):
            q_labels.append(f"q{k}")
            q_seconds.append(_run("quick", store, f"q{k}", args.rounds))
        qq = [_compare(store, x, y) for x, y in pairwise(q_labels)]
        q_alarms = sum(1 for code, counts in qq if code == 3 or _flagged(counts))
        print(f"quick: {args.quick_runs} runs, {', '.join(f'{s:.0f}' for s in q_seconds)} s")
        print(f"  A/A pairs with any point flagged: {q_alarms} of {len(qq)}")
        for code, counts in qq:
            print(f"    exit {code}  {counts}")
        if len(q_labels) >= 3:
            n, within, worst = _spread(store, q_labels[:3])
            print(
                f"  spread of 3 runs, points >= 50 us: {within} of {n} within 1.03; "
                f"worst {worst:.3f}"
            )
    print(f"load after: {os.getloadavg()}; store {store}")


if __name__ == "__main__":
    main()
