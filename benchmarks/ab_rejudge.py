"""Stored ``ab`` runs of ``gate_bench.py`` judged again, each round's log ratio taken five
ways, on the same samples: which per-round value finds a known slowdown more often
without flagging identical code more often?

For every store given (``gate_bench.py --instrument ab`` leaves one per invocation, its
runs labelled ``ab-baseN`` / ``ab-headN``; N >= 100 is A/B, +10 % or +5 % work, below
100 A/A), every point of every pair is judged by the paired t on its per-round values,
the family's q-values by Benjamini-Hochberg, as ``compare`` does, with one per-round
value in turn:

- ``pairs``: the median of ``log(head_i / base_i)`` over the round's pairs of samples
  (``compare``'s: :func:`benchbench.core.stats.pair_log_ratios`);
- ``medians``: ``log(median(head) / median(base))``, the ratio of the two sides' medians;
- ``pair-mean``: the mean of ``log(head_i / base_i)``;
- ``minimums``: ``log(min(head) / min(base))``;
- ``log-means``: ``mean(log head) - mean(log base)``.

Prints, per store and in all: A/B points ``slower`` (ratio >= 1 + ``--min-effect`` and
q < alpha), A/A pairs with any point flagged either way, and A/A points with p < alpha
alone. Usage: ``python benchmarks/ab_rejudge.py STORE.db ... [--min-effect 0.02]``
(numbers in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from scipy.special import stdtr

from benchbench.analysis.sides import common_rounds, in_rounds
from benchbench.analysis.verdict import ALPHA, adjusted_p
from benchbench.core.stats import pair_log_ratios, split_processes
from benchbench.store.migrations import open_store

Rule = Callable[[np.ndarray, np.ndarray], float]


def _pairs(b: np.ndarray, h: np.ndarray) -> float:
    return pair_log_ratios(b, h, (b.size,), (h.size,))[0]


def _pair_mean(b: np.ndarray, h: np.ndarray) -> float:
    k = min(b.size, h.size)
    return float(np.mean(np.log(h[:k] / b[:k])))


RULES: dict[str, Rule] = {
    "pairs": _pairs,
    "medians": lambda b, h: math.log(float(np.median(h) / np.median(b))),
    "pair-mean": _pair_mean,
    "minimums": lambda b, h: math.log(float(h.min() / b.min())),
    "log-means": lambda b, h: float(np.log(h).mean() - np.log(b).mean()),
}


def _paired_t(values: list[float]) -> tuple[float, float]:
    logs = np.asarray(values)
    se = float(logs.std(ddof=1)) / math.sqrt(logs.size)
    mean = float(logs.mean())
    p = 1.0 if se == 0 else float(min(1.0, 2.0 * stdtr(logs.size - 1, -abs(mean) / se)))
    return mean, p


def _rounds(base: dict, head: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    common = common_rounds(base, head)
    if common is None:
        raise SystemExit("rows without round numbers: an ab run stored before rounds were named")
    b, b_k = in_rounds(base, common)
    h, h_k = in_rounds(head, common)
    return [
        (np.asarray(x), np.asarray(y))
        for x, y in zip(split_processes(b, b_k), split_processes(h, h_k), strict=True)
    ]


def judge(path: str, min_effect: float) -> dict[str, list[int]]:
    """Per rule: [A/B slower, A/B points, A/A pairs flagged, A/A pairs, A/A p < alpha, A/A
    points] over one store's pairs."""
    store = open_store(f"sqlite:///{path}", create=False)
    runs = {r["label"]: r for r in store.runs()}
    tally = {rule: [0] * 6 for rule in RULES}
    for label in sorted(runs):
        if not label.startswith("ab-head") or f"ab-base{label[7:]}" not in runs:
            continue
        a_b = int(label[7:]) >= 100
        rows = [
            {
                r["benchmark_id"]: r
                for r in store.measurements(runs[name]["id"])
                if r["status"] == "ok"
            }
            for name in (f"ab-base{label[7:]}", label)
        ]
        points = [_rounds(rows[0][b], rows[1][b]) for b in rows[0] if b in rows[1]]
        for name, rule in RULES.items():
            found = [_paired_t([rule(b, h) for b, h in rounds]) for rounds in points]
            q = adjusted_p([p for _, p in found])
            bound = math.log1p(min_effect)
            t = tally[name]
            if a_b:
                t[0] += sum(m >= bound and qq < ALPHA for (m, _), qq in zip(found, q, strict=True))
                t[1] += len(found)
            else:
                flagged = any(
                    abs(m) >= bound and qq < ALPHA for (m, _), qq in zip(found, q, strict=True)
                )
                t[2] += int(flagged)
                t[3] += 1
                t[4] += sum(p < ALPHA for _, p in found)
                t[5] += len(found)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--min-effect", type=float, default=0.05)
    args = parser.parse_args()
    total = {rule: [0] * 6 for rule in RULES}
    for path in args.stores:
        tally = judge(path, args.min_effect)
        print(path)
        for rule, t in tally.items():
            total[rule] = [a + b for a, b in zip(total[rule], t, strict=True)]
            print(
                f"  {rule:10s} A/B slower {t[0]}/{t[1]}  A/A pairs flagged {t[2]}/{t[3]}  "
                f"A/A p<alpha alone {t[4]}/{t[5]}"
            )
    print("in all")
    for rule, t in total.items():
        alone = f"{t[4] / t[5]:.1%}" if t[5] else "-"
        print(
            f"  {rule:10s} A/B slower {t[0]}/{t[1]}  A/A pairs flagged {t[2]}/{t[3]}  "
            f"A/A p<alpha alone {t[4]}/{t[5]} ({alone})"
        )


if __name__ == "__main__":
    main()
