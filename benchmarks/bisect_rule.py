"""``bisect``'s step outcome as a classifier, on the real ``ab`` pairs of a gate_bench store.

Every two points of a pair's 10 points are one step's deciding points (as
``benchmarks/bisect_bench.py`` decides on two), judged as a first look decides them (at
alpha / 3, :func:`benchbench.analysis.bisect.look_alpha`): the A/A pairs
(``ab-base{k}`` / ``ab-head{k}``, identical code) should be ``same`` (a commit before the
culprit) and never ``different``; the +10 % pairs (``ab-base{100+k}`` / ``ab-head{100+k}``,
11 calls for 10 on the same tensors) should be ``different`` and never ``same``. Printed
for the rule as it is (the points together, :func:`~benchbench.analysis.bisect.together_bound`)
and for the rule it replaced (every point's own one-sided bound), with the coverage of
the points' together interval: how often its two-sided 95 % interval holds identical
code's 1, and pair k's holds pair k+1's estimate.

Usage: ``PYTHONPATH=. python benchmarks/bisect_rule.py STORE.db`` (a gate_bench ``ab`` store
with ``--runs``/``--b-runs`` pairs); numbers in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchbench.analysis import compare
from benchbench.analysis.bisect import look_alpha, step_outcome, together_bound
from benchbench.store import open_store

MIN_EFFECT = 0.05


def _per_point_outcome(base: Sequence[Any], head: Sequence[Any], alpha: float) -> str:
    """The replaced rule: ``same`` when every point's one-sided bound at ``alpha`` (the
    upper end of its 1 - 2 alpha interval) is below 1 + the min effect."""
    found = compare.compare_rows(base, head, min_effect=MIN_EFFECT, alpha=alpha, paired=True)
    if any(p.mark == compare.SLOWER for p in found.points):
        return "different"
    bounds = compare.compare_rows(base, head, alpha=2 * alpha, paired=True).points
    if all(p.ratio_ci_high is not None and p.ratio_ci_high < 1 + MIN_EFFECT for p in bounds):
        return "same"
    return "unknown"


Group = tuple[int, tuple[str, str], list, list]


def _groups(store: Any, runs: dict[str, Any], first: int) -> list[Group]:
    """Every two points of every pair k = first, first + 1, ... the store holds: (k, the
    two points' ids, their base rows, their head rows)."""
    groups = []
    k = first
    while f"ab-head{k}" in runs:
        base = sorted(
            store.measurements(runs[f"ab-base{k}"]["id"]), key=lambda r: r["benchmark_id"]
        )
        heads = {r["benchmark_id"]: r for r in store.measurements(runs[f"ab-head{k}"]["id"])}
        rows = [(b, heads[b["benchmark_id"]]) for b in base if b["benchmark_id"] in heads]
        for one, other in itertools.combinations(rows, 2):
            key = (one[0]["benchmark_id"], other[0]["benchmark_id"])
            groups.append((k, key, [one[0], other[0]], [one[1], other[1]]))
        k += 1
    return groups


def judge(groups: list[Group], alpha: float) -> tuple[Counter, Counter]:
    new: Counter = Counter()
    old: Counter = Counter()
    for _, _, base, head in groups:
        found = compare.compare_rows(base, head, min_effect=MIN_EFFECT, alpha=alpha, paired=True)
        new[step_outcome(found.points, MIN_EFFECT, together_bound(base, head, alpha))] += 1
        old[_per_point_outcome(base, head, alpha)] += 1
    return new, old


def _share(counts: Counter, outcome: str) -> str:
    total = sum(counts.values())
    return f"{counts[outcome]} of {total} ({100 * counts[outcome] / max(total, 1):.1f} %)"


def coverage(groups: list[Group]) -> tuple[int, int, int, int]:
    """The together 95 % interval (two-sided: the one-sided bound at 0.025 and its
    mirror; the estimate is the bound at 0.5): holds 1 (held, judged); pair k's holds
    pair k+1's estimate, same two points (held, judged)."""
    found: dict[tuple[int, tuple[str, str]], tuple[float, float, float]] = {}
    for k, key, base, head in groups:
        high = together_bound(base, head, 0.025)
        inverse = together_bound(head, base, 0.025)
        centre = together_bound(base, head, 0.5)
        if high is not None and inverse is not None and centre is not None:
            found[k, key] = (1 / inverse, centre, high)
    held_one = sum(low <= 1 <= high for low, _, high in found.values())
    later = [
        (now, found[k + 1, key][1]) for (k, key), now in found.items() if (k + 1, key) in found
    ]
    held_next = sum(low <= estimate <= high for (low, _, high), estimate in later)
    return held_one, len(found), held_next, len(later)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a gate_bench ab store (its gate.db)")
    args = parser.parse_args()
    store = open_store(args.store)
    runs = {r["label"]: r for r in store.runs(counts=False) if r.get("finished_at")}
    alpha = look_alpha(0.05)
    same_code, slower = _groups(store, runs, 0), _groups(store, runs, 100)
    print(f"{args.store}: two deciding points a step, a first look at alpha {alpha:.4f}")
    for name, groups, right, wrong in (
        ("identical code", same_code, "same", "different"),
        ("+10 % (11 calls for 10)", slower, "different", "same"),
    ):
        if not groups:
            continue
        new, old = judge(groups, alpha)
        for rule, counts in (("together", new), ("each point alone (before)", old)):
            print(
                f"  {name}, {rule}: {right} {_share(counts, right)}; "
                f"{wrong} {_share(counts, wrong)}; unknown {_share(counts, 'unknown')}"
            )
    one, judged, after, judged_after = coverage(same_code)
    print(
        f"  together 95 % interval on identical code: holds 1 at {one} of {judged} "
        f"({100 * one / max(judged, 1):.1f} %); holds the next pair's estimate at {after} of "
        f"{judged_after} ({100 * after / max(judged_after, 1):.1f} %)"
    )


if __name__ == "__main__":
    main()
