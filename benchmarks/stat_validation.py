"""Do benchbench's numbers hold what they claim? Coverage, false alarms, power, modes.

Real ``benchbench`` invocations of the gate suite (``benchmarks/gate_bench.py``: allocating
elementwise ops, every measured call ``GATE_CALLS`` calls of the op on the same tensors)
into a throwaway store, as a user runs them:

- **coverage**: ``--pairs`` + 1 consecutive fresh ``run``s of identical code; the share
  of points where run i's interval (as stored and shown) holds run i+1's headline, and
  the median interval half-width beside it (80-95 % is calibrated; above 95 % the
  interval is too wide);
- **A/A run against run**: ``compare`` of each consecutive pair: pairs with any point
  flagged (``slower``/``faster``), exit codes, and the shift line's mark where ``compare``
  judges a shared shift (with three earlier pairs of runs or more);
- **power**: per pair, a run with whole extra calls at a random third of the points
  (``GATE_CALLS`` 20: +1 call is +5 %, +2 is +10 %, +5 is +25 %), into a copy of the
  store (so that no later history holds it), compared with the A run before it: the
  share of those points marked ``slower``;
- **the shift line's power** (``--shift-effects``): for each A run after the first, a run
  with whole extra calls at every point, into a copy of the store (so that no later
  history holds it), compared with that A run: pairs whose shift line is ``slower``;
- **A/A in ab** (``--ab``): ``benchbench ab`` of one interpreter against itself: pairs
  with any point flagged, and whether the pair count equals the rounds;
- **bimodal points**: points whose note says their processes fell in two groups, and how
  much a point's processes differ (the median standard deviation of their log medians).

``--neighbour`` runs gate_bench's noisy neighbour beside everything (a process busy and
idle in seeded random phases). Usage::

    python benchmarks/stat_validation.py [--pairs 10] [--filter REGEX] [--neighbour]
        [--ab] [--ab-rounds 20] [--effects 0.25,0.10,0.05] [--shift-effects 0.10]
        [--seed 0]

The table it prints goes in BENCHMARKS.md with the date, CPU and load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import itertools

import gate_bench

from benchbench.analysis.rerun import history_factor, widened
from benchbench.store import open_store

#: Calls per measured call: one extra call is +5 %.
CALLS = 20


def _run(suite: str, store: str, label: str, extra: dict[str, int] | None = None) -> str:
    """One fresh ``run`` (extra calls at some points); its run id."""
    gate_bench._run(
        suite, store, label, False, env={"GATE_EXTRA_BY_POINT": json.dumps(extra or {})}
    )
    return next(r["id"] for r in open_store(store).runs(counts=False) if r.get("label") == label)


def _rows(store: str, run_id: str) -> dict[str, dict]:
    return {r["benchmark_id"]: r for r in open_store(store).measurements(run_id)}


def _printed(store: str, run_id: str) -> dict[str, dict]:
    """A run's rows with the intervals its table printed: widened by the run-to-run factor
    read from the runs before it (:mod:`benchbench.analysis.rerun`)."""
    opened = open_store(store)
    rows = opened.measurements(run_id)
    rerun = history_factor(opened, opened.resolve_run(run_id), rows)
    return {r["benchmark_id"]: r for r in widened(rows, rerun)}


def _coverage(store: str, runs: list[str]) -> tuple[int, int, list[float]]:
    """Points where run i's interval, as its table printed it, holds run i+1's headline;
    points judged; the printed half-widths."""
    held = judged = 0
    widths: list[float] = []
    for before, after in itertools.pairwise(runs):
        for row, holds in gate_bench.held_pairs(_printed(store, before), _rows(store, after)):
            judged += 1
            held += holds
            widths.append((row["ci_high_s"] - row["ci_low_s"]) / (2 * row["median_s"]))
    return held, judged, widths


def _compare(store: str, base: str, contender: str) -> dict:
    done = gate_bench._bench("compare", base, contender, "--store", store, "--json")
    if done.returncode not in (0, 3):
        raise SystemExit(f"compare failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"exit": done.returncode, **json.loads(done.stdout)}


def _flagged(document: dict) -> int:
    return sum(p["mark"] in ("slower", "faster") for p in document["points"])


def _power(
    suite: str, store: str, base: str, k: int, effect: float, rng: random.Random
) -> tuple[int, int, bool]:
    """A run with +effect (whole calls) at a random third of the points, into a copy of
    ``store`` (so that no later history holds it), compared with ``base``: (points found
    slower among them, points changed, judged beyond the shared shift)."""
    rows = [r for r in _rows(store, base).values() if r["status"] == "ok"]
    picked = rng.sample(rows, max(1, len(rows) // 3))
    extra = {f"{r['workload']}:{r['size']}": round(effect * CALLS) for r in picked}
    copy = gate_bench.copy_store(store)
    head = _run(suite, copy, f"b{k}-{effect:g}", extra)
    document = _compare(copy, base, head)
    marks = {p["benchmark_id"]: p["mark"] for p in document["points"]}
    hit = sum(marks.get(r["benchmark_id"]) == "slower" for r in picked)
    factor = (document.get("run_to_run") or {}).get("factor")
    shift = document.get("shift") or {}
    mde = (document.get("detectable") or {}).get("median")
    print(f"    +{100 * effect:g} % trial {k}: {hit} of {len(picked)} slower; factor {factor}, "
          f"shift {shift.get('ratio')} ({shift.get('left_out')} left out), "
          f"median MDE {mde}", flush=True)  # fmt: skip
    return hit, len(picked), bool(document.get("after_shift"))


def _shift_trial(suite: str, store: str, base: str, effect: float) -> tuple[bool, bool]:
    """A run with +effect (whole calls) at every point, into a copy of ``store``, compared
    with ``base``: (its shift line ``slower``, the line judged at all)."""
    copy = gate_bench.copy_store(store)
    rows = _rows(store, base).values()
    every = {f"{r['workload']}:{r['size']}": round(effect * CALLS) for r in rows}
    head = _run(suite, copy, f"shift-{effect:g}", every)
    mark = (_compare(copy, base, head).get("shift") or {}).get("mark")
    return mark == "slower", mark not in (None, "not judged")


def _bimodal(store: str, runs: list[str]) -> tuple[int, int]:
    notes = [
        any(str(w).startswith("bimodal") for w in (r.get("warnings") or []))
        for run in runs
        for r in _rows(store, run).values()
        if r["status"] == "ok"
    ]
    return sum(notes), len(notes)


def _spread(store: str, runs: list[str]) -> float:
    """The median, over points, of the standard deviation of a point's log process
    medians: how much its processes differ (the interval's main term)."""
    sds = [
        statistics.stdev(math.log(m) for m in r["process_medians_s"])
        for run in runs
        for r in _rows(store, run).values()
        if r["status"] == "ok" and len(r.get("process_medians_s") or []) > 1
    ]
    return statistics.median(sds or [0.0])


def _ab(suite: str, store: str, pairs: int, rounds: int) -> None:
    flagged = whole = 0
    for k in range(pairs):
        _seconds, _code, marks = gate_bench._ab(suite, store, sys.executable, rounds, k)
        flagged += bool(marks.get("slower", 0) + marks.get("faster", 0))
        head = next(
            r for r in open_store(store).runs(counts=False) if r.get("label") == f"ab-head{k}"
        )
        counts = [len(r.get("process_samples") or []) for r in _rows(store, head["id"]).values()]
        whole += all(c == rounds for c in counts)
    print(f"ab A/A: {flagged} of {pairs} pairs flagged a point; {whole} of {pairs} pairs had "
          f"{rounds} pairs at every point")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10, help="consecutive pairs of runs")
    parser.add_argument("--filter", help="--filter of every run (e.g. 'n=(65536|262144)')")
    parser.add_argument("--neighbour", action="store_true", help="a noisy neighbour beside")
    parser.add_argument("--ab", action="store_true", help="also ab A/A, --pairs of them")
    parser.add_argument("--ab-rounds", type=int, default=20)
    parser.add_argument("--effects", default="0.25,0.10,0.05", help="injected slowdowns")
    parser.add_argument("--shift-effects", default="", help="slowdowns at every point")
    parser.add_argument("--seed", type=int, default=0, help="which points get the extra calls")
    args = parser.parse_args()
    if args.pairs < 1:
        raise SystemExit(f"--pairs must be >= 1, got {args.pairs}")
    effects = [float(e) for e in args.effects.split(",") if e.strip()]
    shifts = [float(e) for e in args.shift_effects.split(",") if e.strip()]
    os.environ["GATE_CALLS"] = str(CALLS)  # every run and ab of the script
    if args.filter:
        gate_bench.RUN_FLAGS.extend(["--filter", args.filter])
    work = Path(tempfile.mkdtemp(prefix="stat-validation-"))
    suite, store = str(work / "gate.py"), str(work / "s.db")
    Path(suite).write_text(gate_bench.GATE_SUITE)
    neighbour = None
    if args.neighbour:
        neighbour = gate_bench.start_neighbour()
    print(f"pairs {args.pairs}, neighbour {args.neighbour}, filter {args.filter}; "
          f"load before: {os.getloadavg()}", flush=True)  # fmt: skip
    try:
        rng = random.Random(args.seed)
        runs = [_run(suite, store, "a0")]
        found = {(e, after): [0, 0] for e in effects for after in (False, True)}
        aa_flagged = aa_exit = shift_flagged = shift_judged = 0
        shift_found = {e: [0, 0] for e in shifts}
        for k in range(1, args.pairs + 1):
            runs.append(_run(suite, store, f"a{k}"))
            document = _compare(store, runs[-2], runs[-1])
            aa_flagged += _flagged(document) > 0
            aa_exit += document["exit"] == 3
            mark = (document.get("shift") or {}).get("mark")
            shift_flagged += mark in ("slower", "faster")
            shift_judged += mark not in (None, "not judged")
            for effect in effects:
                hit, changed, after = _power(suite, store, runs[-1], k, effect, rng)
                found[effect, after][0] += hit
                found[effect, after][1] += changed
        for effect in shifts:  # each in a copy of the store, so that no history holds one
            for base in runs[1:]:
                hit, judged_pair = _shift_trial(suite, store, base, effect)
                shift_found[effect][0] += hit
                shift_found[effect][1] += judged_pair
        held, judged, widths = _coverage(store, runs)
        print(f"coverage: run i's interval held run i+1's headline at {held} of {judged} "
              f"points ({100 * held / max(1, judged):.0f} %); median half-width "
              f"±{100 * statistics.median(widths or [0]):.1f} %")  # fmt: skip
        print(f"run against run, identical code: {aa_flagged} of {args.pairs} pairs flagged a "
              f"point, {aa_exit} exited 3, the shift line flagged {shift_flagged} of the "
              f"{shift_judged} it judged")  # fmt: skip
        for (effect, after), (hit, changed) in found.items():
            share = 100 * hit / max(1, changed)
            how = "beyond the shared shift" if after else "the shift left in (too little history)"
            if changed:
                print(f"power at +{100 * effect:g} % (whole calls, a third of the points), {how}: "
                      f"{hit} of {changed} points slower ({share:.0f} %)")  # fmt: skip
        for effect, (hit, judged_pairs) in shift_found.items():
            print(f"the shift line at +{100 * effect:g} % at every point: slower in {hit} of "
                  f"{judged_pairs} pairs it judged")  # fmt: skip
        bimodal, points = _bimodal(store, runs)
        spread = 100 * _spread(store, runs)
        print(f"bimodal: {bimodal} of {points} points (all kept); a point's processes differ "
              f"by {spread:.1f} % (median sd of their log medians)")  # fmt: skip
        if args.ab:
            _ab(suite, store, args.pairs, args.ab_rounds)
        print(f"load after: {os.getloadavg()}")
    finally:
        if neighbour is not None:
            neighbour.terminate()


if __name__ == "__main__":
    main()
