"""Would a second look at ``ab``'s undecided points find more, at what price? Judged on
stored ``gate_bench.py --instrument ab`` runs, without measuring anything.

A point is *undecided* after the first look (the pair's 20 rounds) when it is not
significant and its interval does not exclude the minimum effect: a slowdown (or a
speed-up, ``--two-sided``) of that size is still possible. A second look pools the
point's rounds with ``K`` more rounds; the extra rounds come from another pair of runs of
the same set (the next one, in turn), which is what measuring the point again would give.
Alpha is spent across the two looks (Bonferroni, as ``bisect`` spends it across its
looks): the first at ``alpha1``, the second at ``alpha2``, ``alpha1 + alpha2 = alpha``;
Benjamini-Hochberg over all points at the first look and over the extended ones at the
second. One look at ``alpha`` is today's verdict.

Prints, per group of stores and rule: A/B points ``slower``, A/A pairs and points flagged,
and the price: how many points were extended, as extra point-rounds against the
pairs' own (every point x 20 rounds). Usage: ``python benchmarks/ab_two_looks.py
--group NAME=STORE,STORE,... [--group ...] [--min-effect 0.05]`` (numbers in
BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from ab_rejudge import _paired_t, _pairs, _rounds

from benchbench.analysis.verdict import ALPHA, adjusted_p
from benchbench.core.stats import t_quantile
from benchbench.store.migrations import open_store

Rounds = dict[str, list[float]]


@dataclass(frozen=True)
class Rule:
    name: str
    extra_rounds: int
    alpha1: float
    alpha2: float
    two_sided: bool = True
    #: Every point gets the extra rounds before its one look (a count fixed in advance:
    #: no alpha to spend): what a longer run for all points would find.
    every_point: bool = False


RULES = (
    Rule("one look (today)", 0, ALPHA, 0.0),
    Rule("two looks, +10 rounds, 0.025 + 0.025", 10, ALPHA / 2, ALPHA / 2),
    Rule("two looks, +20 rounds, 0.025 + 0.025", 20, ALPHA / 2, ALPHA / 2),
    Rule("two looks, +10 rounds, 0.04 + 0.01", 10, 0.8 * ALPHA, 0.2 * ALPHA),
    Rule("two looks, +10 rounds, 0.025 + 0.025, slowdowns only", 10, ALPHA / 2, ALPHA / 2, False),
    *(
        Rule(f"one look, +{k} rounds for every point", k, ALPHA, 0.0, every_point=True)
        for k in (2, 3, 4, 6, 10)
    ),
)


def pair_sets(path: str) -> tuple[list[Rounds], list[Rounds]]:
    """The A/B pairs' and the A/A pairs' per-round log ratios by point, in label order."""
    store = open_store(f"sqlite:///{path}", create=False)
    runs = {r["label"]: r for r in store.runs()}
    ab: list[Rounds] = []
    aa: list[Rounds] = []
    for label in sorted(runs):
        if not label.startswith("ab-head") or f"ab-base{label[7:]}" not in runs:
            continue
        rows = [
            {r["benchmark_id"]: r for r in store.measurements(runs[n]["id"]) if r["status"] == "ok"}
            for n in (f"ab-base{label[7:]}", label)
        ]
        points = {
            b: [_pairs(x, y) for x, y in _rounds(rows[0][b], rows[1][b])]
            for b in rows[0]
            if b in rows[1]
        }
        (ab if int(label[7:]) >= 100 else aa).append(points)
    return ab, aa


def t_test(values: Sequence[float], alpha: float) -> tuple[float, float, float, float]:
    """Mean log ratio, two-sided p (``ab_rejudge``'s paired t), and the (1 - alpha)
    interval's ends."""
    mean, p = _paired_t(list(values))
    se = float(np.std(values, ddof=1)) / math.sqrt(len(values))
    half = t_quantile(len(values) - 1, 1.0 - alpha) * se
    return mean, p, mean - half, mean + half


def judge(first: Rounds, second: Rounds, rule: Rule, bound: float) -> tuple[dict[str, int], int]:
    """Each point's verdict (+1 slower, -1 faster, 0 neither) and how many were extended."""
    keys = list(first)
    if rule.every_point:
        first = {b: [*first[b], *second[b][: rule.extra_rounds]] for b in keys}
        rule = Rule(rule.name, 0, rule.alpha1, 0.0)
    found = [t_test(first[b], rule.alpha1) for b in keys]
    verdicts: dict[str, int] = {}
    undecided = []
    for b, (mean, _, low, high), q in zip(
        keys, found, adjusted_p([f[1] for f in found]), strict=True
    ):
        verdicts[b] = (1 if mean > 0 else -1) if q < rule.alpha1 and abs(mean) >= bound else 0
        open_ = high >= bound or (rule.two_sided and low <= -bound)
        if not verdicts[b] and rule.extra_rounds and open_:
            undecided.append(b)
    if undecided:
        again = [
            t_test([*first[b], *second[b][: rule.extra_rounds]], rule.alpha2) for b in undecided
        ]
        for b, (mean, *_), q in zip(
            undecided, again, adjusted_p([a[1] for a in again]), strict=True
        ):
            if q < rule.alpha2 and abs(mean) >= bound:
                verdicts[b] = 1 if mean > 0 else -1
    return verdicts, len(undecided)


def tally(paths: Sequence[str], rule: Rule, bound: float) -> dict[str, int]:
    t = dict.fromkeys(
        (
            "slower",
            "ab",
            "ab_ext",
            "aa_pairs_flagged",
            "aa_pairs",
            "aa_flagged",
            "aa",
            "aa_ext",
            "rounds",
        ),
        0,
    )
    for path in paths:
        ab, aa = pair_sets(path)
        for sets, kind in ((ab, "ab"), (aa, "aa")):
            for i, first in enumerate(sets):
                if len(sets) < 2:
                    break
                verdicts, extended = judge(first, sets[(i + 1) % len(sets)], rule, bound)
                t[f"{kind}_ext"] += extended
                t["rounds"] += len(verdicts) * len(next(iter(first.values())))
                t[kind] += len(verdicts)
                if kind == "ab":
                    t["slower"] += sum(v == 1 for v in verdicts.values())
                else:
                    t["aa_pairs_flagged"] += any(verdicts.values())
                    t["aa_pairs"] += 1
                    t["aa_flagged"] += sum(v != 0 for v in verdicts.values())
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", action="append", required=True, help="NAME=STORE,STORE,...")
    parser.add_argument("--min-effect", type=float, default=0.05)
    args = parser.parse_args()
    bound = math.log1p(args.min_effect)
    for group in args.group:
        name, _, stores = group.partition("=")
        print(name)
        for rule in RULES:
            t = tally(stores.split(","), rule, bound)
            extended = t["ab"] + t["aa"] if rule.every_point else t["ab_ext"] + t["aa_ext"]
            extra = extended * rule.extra_rounds
            print(
                f"  {rule.name:52s} A/B slower {t['slower']}/{t['ab']}"
                f" ({t['slower'] / max(1, t['ab']):.1%}), extended {t['ab_ext']};"
                f" A/A pairs flagged {t['aa_pairs_flagged']}/{t['aa_pairs']},"
                f" points {t['aa_flagged']}/{t['aa']}, extended {t['aa_ext']};"
                f" extra point-rounds {extra / max(1, t['rounds']):.0%}"
            )


if __name__ == "__main__":
    main()
