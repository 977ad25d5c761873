"""Do ``ab``'s intervals hold what they claim? Coverage over the runs of one gate_bench store.

Reads the ``ab-base{k}`` / ``ab-head{k}`` pairs of identical code that
``benchmarks/gate_bench.py --instrument ab`` leaves in its store (k = 0 .. pairs-1) and
reports, per point and pair:

- **the paired ratio's interval** (``compare``'s, paired by round, as ``ab`` prints it):
  how often it holds 1, the true ratio of identical code (a 95 % interval should, 95 % of
  the time), and how often pair k's interval holds pair k+1's ratio (an estimate as noisy
  as the first: about 83 % when nothing else differs between the pairs, P(|Z| < 1.96/√2));
- **each side's own interval** (the stored run's ``ci_low_s``-``ci_high_s``, from its
  processes): how often run k's holds run k+1's median on the same side;
- **the rounds' scatter**: the standard deviation of a point's per-round log ratios (one
  median a side and round, as the paired test takes them), the median over points and
  pairs; the paired interval's width follows from it;
- **points together**: the correlation of two points' per-round log ratios in the same
  pair, and the scatter of their per-round mean (what ``bisect``'s ``same`` judges), the
  median over every two points of a pair: about 1/sqrt(2) of one point's when the
  points' rounds scatter independently.

Usage: ``PYTHONPATH=. python benchmarks/ab_coverage.py STORE.db [--pairs N]``; numbers in
BENCHMARKS.md, "`ab` beside the neighbour, and whether its intervals hold a rerun".
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchbench.analysis import compare
from benchbench.analysis.sides import round_log_ratios
from benchbench.store import open_store


def _share(held: int, total: int) -> str:
    return f"{held} of {total} ({100 * held / max(1, total):.0f} %)"


def _half_width(low: float, high: float, centre: float) -> float:
    return (high - low) / 2 / centre


def side_coverage(runs: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[int, int, float]:
    """Run k's interval holds run k+1's median: held, judged, median half-width."""
    held = total = 0
    widths: list[float] = []
    for now, later in itertools.pairwise(runs):
        medians = {r["benchmark_id"]: r["median_s"] for r in later if r["status"] == "ok"}
        for row in now:
            low, high = row.get("ci_low_s"), row.get("ci_high_s")
            if row["status"] != "ok" or low is None or high is None:
                continue
            if row["benchmark_id"] not in medians:
                continue
            total += 1
            held += low <= medians[row["benchmark_id"]] <= high
            widths.append(_half_width(low, high, row["median_s"]))
    return held, total, statistics.median(widths) if widths else math.nan


def ratio_coverage(
    pairs: Sequence[Sequence[compare.PointComparison]],
) -> tuple[int, int, int, int, float]:
    """The paired ratio's interval: holds 1 (held, judged), holds the next pair's ratio
    (held, judged), median half-width (relative)."""
    ones = [p for pair in pairs for p in pair if p.ratio_ci_low is not None]
    held_one = sum(p.ratio_ci_low <= 1 <= p.ratio_ci_high for p in ones)  # type: ignore[operator]
    held_next = judged_next = 0
    for now, later in itertools.pairwise(pairs):
        ratios = {p.benchmark_id: p.ratio for p in later if p.ratio is not None}
        for p in now:
            if p.ratio_ci_low is None or p.benchmark_id not in ratios:
                continue
            judged_next += 1
            held_next += p.ratio_ci_low <= ratios[p.benchmark_id] <= p.ratio_ci_high  # type: ignore[operator]
    widths = [_half_width(p.ratio_ci_low, p.ratio_ci_high, p.ratio) for p in ones]  # type: ignore[arg-type]
    return held_one, len(ones), held_next, judged_next, statistics.median(widths)


def _round_ratios(base: Sequence[Any], head: Sequence[Any]) -> list[dict[int, float]]:
    """Each point's per-round log ratios in one pair, by round."""
    heads = {row["benchmark_id"]: row for row in head if row["status"] == "ok"}
    return [
        round_log_ratios(row, heads[row["benchmark_id"]])
        for row in base
        if row["status"] == "ok" and row["benchmark_id"] in heads
    ]


def round_scatter(pairs: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> float:
    """The median, over points and pairs, of the sd of a point's per-round log ratios."""
    spreads = [
        statistics.stdev(ratios.values())
        for base, head in pairs
        for ratios in _round_ratios(base, head)
        if len(ratios) > 2
    ]
    return statistics.median(spreads) if spreads else math.nan


def points_together(
    pairs: Sequence[tuple[Sequence[Any], Sequence[Any]]],
) -> tuple[float, float]:
    """Over every two points of a pair (their common rounds): the median correlation of
    their per-round log ratios, and the median sd of the two points' per-round mean."""
    correlations, spreads = [], []
    for base, head in pairs:
        for one, other in itertools.combinations(_round_ratios(base, head), 2):
            common = sorted(set(one) & set(other))
            if len(common) < 3:
                continue
            x, y = [one[r] for r in common], [other[r] for r in common]
            correlations.append(statistics.correlation(x, y))
            spreads.append(statistics.stdev((a + b) / 2 for a, b in zip(x, y, strict=True)))
    if not spreads:
        return math.nan, math.nan
    return statistics.median(correlations), statistics.median(spreads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a gate_bench store (its gate.db)")
    parser.add_argument("--pairs", type=int, help="A/A pairs to read (default: all finished)")
    args = parser.parse_args()
    store = open_store(args.store)
    finished = {r["label"]: r for r in store.runs(counts=False) if r.get("finished_at")}
    count = args.pairs or next(k for k in range(1000) if f"ab-head{k}" not in finished)
    sides = [
        [store.measurements(finished[f"ab-{side}{k}"]["id"]) for k in range(count)]
        for side in ("base", "head")
    ]
    pairs = [
        compare.compare_rows(base, head, paired=True).points
        for base, head in zip(*sides, strict=True)
    ]
    one, judged, after, judged_after, width = ratio_coverage(pairs)
    print(f"{count} A/A pairs in {args.store}")
    print(f"  paired ratio: holds 1 at {_share(one, judged)}; holds the next pair's ratio at")
    print(f"    {_share(after, judged_after)}; median half-width ±{100 * width:.1f} %")
    scatter = round_scatter(list(zip(*sides, strict=True)))
    print(f"  rounds' scatter: sd of a point's per-round log ratios, median {100 * scatter:.1f} %")
    correlation, together = points_together(list(zip(*sides, strict=True)))
    print(
        f"  two points together: correlation of their round ratios, median {correlation:.2f};"
        f" sd of their per-round mean, median {100 * together:.1f} %"
    )
    for name, runs in zip(("base", "head"), sides, strict=True):
        held, total, side_width = side_coverage(runs)
        print(
            f"  {name} side: run k's interval holds run k+1's median at {_share(held, total)}; "
            f"median half-width ±{100 * side_width:.1f} %"
        )


if __name__ == "__main__":
    main()
