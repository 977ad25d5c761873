"""The nightly gate as a classifier: false alarms on identical code, power on a slowdown,
for each of the three instruments, on a quiet machine or beside a noisy neighbour.

Real ``benchbench`` invocations into a throwaway store, as a nightly job runs them:

- ``time``: ``benchbench run`` (fresh processes in rounds), then ``benchbench compare``;
- ``ab``: ``benchbench ab`` with base and head measured in lockstep in one run;
- ``instructions``: ``benchbench run --metric instructions`` (callgrind), then ``compare``.

**A/A**: identical code. A false alarm is a pair where ``compare`` (or ``ab``) exits 3
or marks any point ``slower`` or ``faster``. ``compare`` judges a comparison's points as
one family (a point is significant when its Benjamini-Hochberg q-value is below alpha);
for the time instruments the report also counts, from the same comparisons, what each
point judged alone (its own p-value below alpha) would have flagged.
**A/B**: the head's every measured call makes 11 calls of the op instead of 10 on the same
tensors (``GATE_EXTRA_CALLS=1``): exactly +10 % work, the known slowdown. Power is the
share of points marked ``slower``.

``--neighbour`` runs one noisy neighbour beside every measurement: a process busy and idle
in seeded random phases of 0.1-1.5 s (a busy phase spins a core), as a shared CI runner
sees; it stops by itself after ``--neighbour-max-s`` and when the script ends.

Usage: ``python benchmarks/gate_bench.py --instrument time,ab,instructions [--runs N]
[--b-runs M] [--neighbour] [--filter REGEX] [--duet] [--calls 20 --min-effect 0.02]``
(``--b-runs``: fewer A/B than A/A ``ab`` runs; ``--calls 20``: the head's one extra call is
+5 %, which ``ab`` calls ``slower`` only under a min effect below it; numbers in
BENCHMARKS.md, with the CPU and the load during the run).

``--mde`` checks the minimum detectable effect ``compare`` prints, as a classifier on
real runs (issue 33): per repetition (``--runs``), two runs of identical code (a0, a1;
``--mde-calls`` calls per measured call, default 20, so that one extra call is +5 %),
``compare a0 a1`` prints each point's MDE; then a run whose points (a random third of
those with an MDE: a change at every point is the shift line's, since ``compare`` judges
each point beyond a judged shift) carry whole extra calls on the same tensors making
``1.5x`` their printed MDE (``round(calls x 1.5 x
MDE)`` extra calls, at least one; the injected slowdown is the extra calls / calls,
printed), and one at ``0.5x`` (``--mde-factors``: other multiples); ``compare a1 b``
counts the points found ``slower`` (each ``b`` run into a copy of the store, so that no
later repetition's history holds it). Issue 33's criterion: >= 80 % at 1.5x, <= 30 % at
0.5x; issue 41's: >= 75 % at 1.0x, and an MDE printed at >= 90 % of the points (the
script prints both). A point whose largest multiple would be more than +100 % is named
and left out. ``--mde-history N``: N runs of identical code first, so that from the first
repetition on the shift line is judged and the points are judged beyond it (three
earlier pairs), as in a store with a history; the table splits the points by whether
their A/A comparison and their slowed one were judged beyond the shift.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

GATE_SUITE = '''
"""gate: allocating elementwise ops; every measured call is CALLS calls on the same tensors."""
import json
import os
import torch
from benchbench import Suite, Variant, pow2

#: 10 calls per measured call (GATE_CALLS); GATE_EXTRA_CALLS=1 makes it 11: exactly +10 %
#: work. GATE_EXTRA_BY_POINT ({"add:65536": 3, ...}) adds extra calls at given points only.
BASE = int(os.environ.get("GATE_CALLS", "10"))
CALLS = BASE + int(os.environ.get("GATE_EXTRA_CALLS", "0"))
EXTRA = json.loads(os.environ.get("GATE_EXTRA_BY_POINT", "{}"))
suite = Suite("gate", description="allocating elementwise ops, 2^16-2^22, 10 calls a call")


def repeated(name, fn):
    by_size = {int(k.split(":")[1]): BASE + v for k, v in EXTRA.items() if k.split(":")[0] == name}

    def calls(x):
        for _ in range(by_size.get(x.numel(), CALLS) - 1):
            fn(x)
        return fn(x)

    return calls


for name, fn in [
    ("add", lambda x: x + 1.0),
    ("mul", lambda x: x * 1.5),
    ("exp", torch.exp),
    ("sqrt", torch.sqrt),
    ("rsqrt", lambda x: 1 / torch.sqrt(x)),
]:
    suite.workload(
        name,
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant("torch", repeated(name, fn))],
        sizes=pow2(16, 22, step=2),
        bytes=lambda p: 2 * p.numel * p.itemsize * CALLS,
    )
'''

#: Flags every run of the script gets (``--threads``).
RUN_FLAGS: list[str] = []
#: Flags of every ab run only (``--duet``).
AB_FLAGS: list[str] = []
INSTRUMENTS = ("time", "ab", "instructions")

NEIGHBOUR = """
import os, random, sys, time
rng, deadline = random.Random(int(sys.argv[1])), time.monotonic() + float(sys.argv[2])
parent = os.getppid()
while time.monotonic() < deadline and os.getppid() == parent:  # stops when orphaned
    phase = rng.uniform(0.1, 1.5)
    if rng.random() < 0.5:
        end = time.monotonic() + phase
        while time.monotonic() < end:
            pass
    else:
        time.sleep(phase)
"""


def start_neighbour(seed: int = 0, max_s: float = 7200.0) -> subprocess.Popen[bytes]:
    """The noisy neighbour (:data:`NEIGHBOUR`), started now; it stops after ``max_s`` and
    when its parent ends (``terminate`` it sooner)."""
    return subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(seed), str(max_s)])


def held_pairs(first: dict[str, dict], second: dict[str, dict]) -> list[tuple[dict, bool]]:
    """Each point ok in both runs' rows (by benchmark id): its row in ``first`` and
    whether that row's interval holds ``second``'s headline (coverage of a rerun)."""
    out = []
    for key, row in first.items():
        other = second.get(key)
        if row["status"] == "ok" and other is not None and other["status"] == "ok":
            out.append((row, row["ci_low_s"] <= other["median_s"] <= row["ci_high_s"]))
    return out


def _bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchbench", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _run(
    suite: str, store: str, label: str, extra: bool, *flags: str, env: dict | None = None
) -> float:
    """One ``benchbench run`` (with the script's run flags); its wall time."""
    started = time.monotonic()
    done = _bench(
        "run",
        suite,
        "--store",
        store,
        "--label",
        label,
        "--json",
        *flags,
        *RUN_FLAGS,
        env={"GATE_EXTRA_CALLS": "1" if extra else "0", **(env or {})},
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"run {label} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - started


def _compare(store: str, base: str, contender: str) -> tuple[int, dict[str, int]]:
    done = _bench("compare", base, contender, "--store", store, "--json")
    if done.returncode not in (0, 3):
        raise SystemExit(f"compare failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.returncode, _marks(json.loads(done.stdout))


def _marks(document: dict) -> dict[str, int]:
    """Time marks, or the instruction marks where the runs were counted, not timed; under
    ``alone``, the time marks each point would get judged by its own p-value."""
    if document.get("instructions", {}).get("counts"):
        return dict(document["instructions"]["counts"])
    marks = {k: v for k, v in document["counts"].items() if v}
    alone = Counter(
        _alone(p["ratio"], p["p_value"], document["alpha"], document["min_effect"])
        for p in document["points"]
        if p["p_value"] is not None and p["ratio"] is not None
    )
    return {**marks, "alone": dict(alone)}


def _alone(ratio: float, p_value: float, alpha: float, min_effect: float) -> str:
    """The verdict's mark of one point judged by itself (before the family's q-values)."""
    if not p_value < alpha:
        return "not significant"
    if ratio >= 1 + min_effect:
        return "slower"
    return "faster" if ratio <= 1 / (1 + min_effect) else "same"


def _ab(suite: str, store: str, head: str, rounds: int, k: int) -> tuple[float, int, dict]:
    """One ``benchbench ab`` (head: an interpreter path); wall time, exit code, marks."""
    started = time.monotonic()
    done = _bench(
        "ab",
        suite,
        "--base",
        sys.executable,
        "--head",
        head,
        "--store",
        store,
        "--json",
        "--rounds",
        str(rounds),
        "--label-base",
        f"ab-base{k}",
        "--label-head",
        f"ab-head{k}",
        *RUN_FLAGS,
        *AB_FLAGS,
    )
    if done.returncode not in (0, 3):
        raise SystemExit(f"ab failed ({done.returncode}): {done.stderr[-2000:]}")
    for line in done.stderr.splitlines():
        if line.startswith("note: lockstep, not duet"):
            print(f"  ab {k}: {line}")  # --duet asked for and not granted
    return time.monotonic() - started, done.returncode, _marks(json.loads(done.stdout))


def _flagged(counts: dict[str, int]) -> int:
    return counts.get("slower", 0) + counts.get("faster", 0)


def _report(name: str, seconds: list[float], aa: list, ab: list) -> None:
    print(f"{name}: {len(seconds)} runs, {sum(seconds) / max(1, len(seconds)):.0f} s each")
    _tally("as one family (the verdict)", [(c, m) for c, m in aa], [(c, m) for c, m in ab])
    if any("alone" in m for _, m in aa + ab):  # exit codes belong to the family verdict
        alone = (
            [(None, m.get("alone", {})) for _, m in aa],
            [(None, m.get("alone", {})) for _, m in ab],
        )
        _tally("each point alone (p < alpha)", *alone)
    for kind, pairs in (("A/A", aa), ("A/B", ab)):
        for code, counts in pairs:
            print(f"    {kind} exit {code}  {counts}")
    sys.stdout.flush()


def _tally(how: str, aa: list, ab: list) -> None:
    alarms = sum(1 for code, counts in aa if code == 3 or _flagged(counts))
    points = sum(_flagged(counts) for _, counts in aa)
    total = [sum(v for k, v in counts.items() if k != "alone") for _, counts in ab]
    slower = sum(counts.get("slower", 0) for _, counts in ab)
    share = 100 * slower / max(1, sum(total))
    print(f"  {how}:")
    print(f"    A/A pairs with any point flagged: {alarms} of {len(aa)} ({points} points)")
    extra = 100 / int(os.environ.get("GATE_CALLS", "10"))
    print(f"    A/B (+{extra:.0f} % work): points slower {slower} of {sum(total)} ({share:.0f} %)")


def copy_store(store: str) -> str:
    """A copy of ``store`` beside it for one trial, replacing the last trial's."""
    copy = Path(store).with_name("trial.db")
    copy.unlink(missing_ok=True)
    with sqlite3.connect(store) as source, sqlite3.connect(copy) as target:
        source.backup(target)  # whole, whatever the journal mode
    return str(copy)


def _mde_check(
    suite: str,
    store: str,
    runs: int,
    calls: int,
    rounds: int,
    factors: Sequence[float],
    history: int = 0,
) -> None:
    """``--mde``: the printed MDE against slowdowns of ``factors`` times it (module
    docstring)."""
    base = {"GATE_CALLS": str(calls)}
    flags = ("--rounds", str(rounds), "--max-rounds", str(rounds))
    found: dict[float, list[tuple[int, str, float, float, str]]] = {f: [] for f in factors}
    judged: dict[tuple[int, float], str] = {}
    tested = printed = 0
    for h in range(history):
        _run(suite, store, f"mde-h{h}", False, *flags, env=base)
    for k in range(runs):
        for label in (f"mde-a0-{k}", f"mde-a1-{k}"):
            _run(suite, store, label, False, *flags, env=base)
        done = _bench("compare", f"mde-a0-{k}", f"mde-a1-{k}", "--store", store, "--json")
        aa = json.loads(done.stdout)
        print(
            f"repetition {k}: A/A {_marks(aa)}; after the shift: {aa['after_shift']}; "
            f"run MDE {aa['detectable']}",
            flush=True,
        )
        mdes = {p["label"]: p["mde"] for p in aa["points"] if p["mde"] is not None}
        tested, printed = tested + len(aa["points"]), printed + len(mdes)
        # Up to +100 % (as many extra calls as calls): beyond, the point's comparison
        # is hopeless anyway and the extra run would take hours; named, not injected.
        most = max(factors)
        if too_large := sorted(label for label, m in mdes.items() if most * m > 1.0):
            print(f"    MDE above {100 / most:.0f} %, not injected: {too_large}")
        mdes = {label: m for label, m in mdes.items() if most * m <= 1.0}
        # A change at a random third of the points: one at every point is the shift
        # line's to find (`compare` judges each point beyond a judged shift).
        chosen = random.Random(k).sample(sorted(mdes), max(1, len(mdes) // 3))
        mdes = {label: mdes[label] for label in chosen}
        for factor in found:
            extra = {
                f"{label.split(':')[0]}:{_numel(label)}": max(1, round(calls * factor * m))
                for label, m in mdes.items()
            }
            # Into a copy of the store: a slowed run must not become the history (the
            # run-to-run factor, the shift line) of a later repetition's comparisons.
            label_b, trial = f"mde-b{factor}-{k}", copy_store(store)
            _run(suite, trial, label_b, False, *flags,
                 env={**base, "GATE_EXTRA_BY_POINT": json.dumps(extra)})  # fmt: skip
            done = _bench("compare", f"mde-a1-{k}", label_b, "--store", trial, "--json")
            slowed = json.loads(done.stdout)
            print(f"    {factor}x: after the shift: {slowed['after_shift']}", flush=True)
            judged[(k, factor)] = f"{aa['after_shift']}/{slowed['after_shift']}"
            ab = {p["label"]: p["mark"] for p in slowed["points"]}
            for label, m in mdes.items():
                injected = extra[f"{label.split(':')[0]}:{_numel(label)}"] / calls
                found[factor].append((k, label, m, injected, ab.get(label, "-")))
    print(f"an MDE printed at {printed} of {tested} points")
    for factor, rows in found.items():
        slower = sum(mark == "slower" for *_, mark in rows)
        print(f"{factor}x the printed MDE: slower at {slower} of {len(rows)} points "
              f"({100 * slower / max(1, len(rows)):.0f} %)")  # fmt: skip
        # By whether the A/A and the slowed comparison were judged beyond the shift.
        for kind in sorted({judged[(k, factor)] for k, *_ in rows}):
            some = [r for r in rows if judged[(r[0], factor)] == kind]
            hit = sum(r[-1] == "slower" for r in some)
            print(f"    beyond the shift (A/A/slowed) {kind}: {hit} of {len(some)}")
        near = [r for r in rows if r[3] >= 0.95 * r[2]]
        hit = sum(r[-1] == "slower" for r in near)
        print(f"    injected at >= 0.95x the MDE (whole calls): {hit} of {len(near)}")
        for k, label, m, injected, mark in rows:
            print(f"    {k} {label:46} MDE {100 * m:5.1f} %  injected +{100 * injected:5.1f} %"
                  f" ({injected / m:.2f}x)  {mark}")  # fmt: skip


def _numel(label: str) -> int:
    match = re.search(r"n=(\d+)", label)
    if match is None:
        raise SystemExit(f"no size in the point label {label!r}")
    return int(match.group(1))


def _head_python(work: Path) -> str:
    """An interpreter for ab's head: this Python with GATE_EXTRA_CALLS=1."""
    path = work / "head-python"
    path.write_text(f'#!/bin/sh\nGATE_EXTRA_CALLS=1 exec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instrument", default="time", help="time, ab, instructions (a list)")
    parser.add_argument("--runs", type=int, default=4, help="A runs (and B runs) per instrument")
    parser.add_argument(
        "--b-runs", type=int, help="B runs per instrument (default: --runs); ab only"
    )
    parser.add_argument("--rounds", type=int, default=3, help="--rounds of every time run")
    parser.add_argument(
        "--max-rounds", type=int, help="--max-rounds of every time run (default: --rounds)"
    )
    parser.add_argument("--ab-rounds", type=int, default=20, help="--rounds of every ab run")
    parser.add_argument("--duet", action="store_true", help="--duet of every ab run")
    parser.add_argument(
        "--calls",
        type=int,
        default=10,
        help="calls of the op a measured call (GATE_CALLS; the A/B head makes one more: "
        "10 gives +10 %%, 20 gives +5 %%)",
    )
    parser.add_argument("--min-effect", help="--min-effect of every ab run (e.g. 0.02)")
    parser.add_argument("--threads", help="--threads of every run: N or all (default 1, the CLI's)")
    parser.add_argument("--cpus", help="--cpus of every run (e.g. 1: every worker on core 1)")
    parser.add_argument(
        "--filter", help="--filter of every run: fewer points (e.g. 'n=(65536|262144)')"
    )
    parser.add_argument("--neighbour", action="store_true", help="a noisy neighbour beside")
    parser.add_argument("--neighbour-seed", type=int, default=0)
    parser.add_argument("--neighbour-max-s", type=float, default=7200.0)
    parser.add_argument("--mde", action="store_true", help="check compare's printed MDE")
    parser.add_argument("--mde-calls", type=int, default=20, help="calls a call under --mde")
    parser.add_argument(
        "--mde-history", type=int, default=0, help="runs of identical code before --mde's"
    )
    parser.add_argument(
        "--mde-factors", default="1.5,0.5", help="slowdowns injected under --mde, x the MDE"
    )
    args = parser.parse_args()
    chosen = [i.strip() for i in args.instrument.split(",") if i.strip()]
    if bad := [i for i in chosen if i not in INSTRUMENTS]:
        raise SystemExit(f"--instrument: unknown {bad}; choose from {INSTRUMENTS}")
    if args.threads is not None:
        RUN_FLAGS.extend(["--threads", str(args.threads)])
    if args.filter is not None:
        RUN_FLAGS.extend(["--filter", args.filter])
    if args.cpus is not None:
        RUN_FLAGS.extend(["--cpus", args.cpus])
    if args.duet:
        AB_FLAGS.append("--duet")
    if args.min_effect is not None:
        AB_FLAGS.extend(["--min-effect", args.min_effect])
    os.environ["GATE_CALLS"] = str(args.calls)  # every run and ab (under --mde: its own)
    work = Path(tempfile.mkdtemp(prefix="gate-bench-"))
    suite = str(work / "gate.py")
    Path(suite).write_text(GATE_SUITE)
    store = str(work / "gate.db")
    neighbour = None
    if args.neighbour:
        neighbour = start_neighbour(args.neighbour_seed, args.neighbour_max_s)
    print(
        f"instruments {chosen}, neighbour {args.neighbour}, flags {RUN_FLAGS}; "
        f"load before: {os.getloadavg()}",
        flush=True,
    )
    try:
        if args.mde:
            factors = [float(f) for f in args.mde_factors.split(",")]
            _mde_check(
                suite, store, args.runs, args.mde_calls, args.rounds, factors, args.mde_history
            )
            chosen = []
        for instrument in chosen:
            if instrument == "ab":
                head = _head_python(work)
                runs = [
                    _ab(suite, store, sys.executable, args.ab_rounds, k) for k in range(args.runs)
                ]
                runs_b = [
                    _ab(suite, store, head, args.ab_rounds, 100 + k)
                    for k in range(args.runs if args.b_runs is None else args.b_runs)
                ]
                _report(
                    "ab",
                    [r[0] for r in runs + runs_b],
                    [(c, m) for _, c, m in runs],
                    [(c, m) for _, c, m in runs_b],
                )
                continue
            flags = (
                ("--rounds", str(args.rounds), "--max-rounds", str(args.max_rounds or args.rounds))
                if instrument == "time"
                else ("--metric", "instructions")
            )
            labels_a, labels_b, seconds = [], [], []
            for k in range(args.runs):  # A and B alternate, so drift hits both alike
                labels_a.append(f"{instrument}-a{k}")
                seconds.append(_run(suite, store, labels_a[-1], False, *flags))
                labels_b.append(f"{instrument}-b{k}")
                seconds.append(_run(suite, store, labels_b[-1], True, *flags))
            aa = [_compare(store, x, y) for x, y in pairwise(labels_a)]
            ab = [_compare(store, a, b) for a, b in zip(labels_a, labels_b, strict=True)]
            _report(instrument, seconds, aa, ab)
    finally:
        if neighbour is not None:
            neighbour.kill()
    print(f"load after: {os.getloadavg()}; store {store}")


if __name__ == "__main__":
    main()
