"""Variants compared at each point: ratio of medians, verdict, crossovers, table rows.

``benchbench time 'torch.rsqrt(x)' '1 / torch.sqrt(x)'`` and
:func:`benchbench.compare_variants` measure several variants of one computation at
each point (size x device x dtype) **interleaved** (one sample of each per round, in
a shuffled order), so drift on a shared machine hits them alike. This module holds
the pure logic both share; measuring itself is in :mod:`benchbench.measure.variants`
(it imports torch, which costs ~3 s, so it runs in the worker and never in the CLI's
own process).

The ratio of a variant to the reference at a point is ``median(variant) /
median(reference)`` of the per-call times (below 1: the variant is faster). Its 95 %
confidence interval is a percentile bootstrap; when both sides have one sample per
round (interleaved), rounds are resampled as pairs, so what drifted within a round
cancels in the ratio. The verdict, with ``min_effect`` m (default 5 %):

- ``faster``: the CI lies entirely below 1 and the ratio is below 1 / (1 + m);
- ``slower``: the CI lies entirely above 1 and the ratio is above 1 + m;
- ``same``: otherwise (the CI includes 1, or the difference is smaller than m).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from benchbench.core.stats import CONFIDENCE, Stats
from benchbench.core.values import Result

#: Smallest relative difference reported as faster or slower.
MIN_EFFECT = 0.05
#: Bootstrap resamples of a ratio's CI: 2000 puts the 2.5 % and 97.5 % percentiles
#: within ~0.3 % of their converged values for the sample counts a point yields.
BOOTSTRAP_RESAMPLES = 2000
VERDICTS = ("faster", "slower", "same")


@dataclass(frozen=True)
class RatioEstimate:
    """``median(variant) / median(reference)`` and its confidence interval."""

    ratio: float
    ci_low: float
    ci_high: float
    paired: bool


def ratio_of_medians(
    reference_s: Sequence[float],
    variant_s: Sequence[float],
    *,
    paired: bool | None = None,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> RatioEstimate:
    """Ratio of medians of per-call times with a percentile-bootstrap CI.

    ``paired`` (default: when both have as many samples, as interleaving gives)
    resamples rounds, keeping each round's two samples together; otherwise the two
    sides are resampled independently. Seeded: the same samples give the same CI.
    """
    ref = np.asarray(reference_s, dtype=np.float64)
    var = np.asarray(variant_s, dtype=np.float64)
    if ref.size < 2 or var.size < 2:
        raise ValueError(f"a ratio CI needs >= 2 samples a side, got {ref.size} and {var.size}")
    if paired is None:
        paired = ref.size == var.size
    if paired and ref.size != var.size:
        raise ValueError(f"paired samples need equal counts, got {ref.size} and {var.size}")
    rng = np.random.default_rng(seed)
    ref_idx = rng.integers(0, ref.size, size=(resamples, ref.size))
    var_idx = ref_idx if paired else rng.integers(0, var.size, size=(resamples, var.size))
    ratios = np.median(var[var_idx], axis=1) / np.median(ref[ref_idx], axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(ratios, [alpha / 2.0, 1.0 - alpha / 2.0])
    ratio = float(np.median(var) / np.median(ref))
    return RatioEstimate(ratio, min(float(low), ratio), max(float(high), ratio), paired)


def verdict(estimate: RatioEstimate, min_effect: float = MIN_EFFECT) -> str:
    """``faster``, ``slower`` or ``same`` (see the module docstring for the rule)."""
    if estimate.ci_high < 1.0 and estimate.ratio < 1.0 / (1.0 + min_effect):
        return "faster"
    if estimate.ci_low > 1.0 and estimate.ratio > 1.0 + min_effect:
        return "slower"
    return "same"


@dataclass(frozen=True)
class Crossover:
    """Where a variant's verdict against the reference flips from one size to a larger one."""

    variant: str
    reference: str
    device: str
    dtype: str
    size: float  # interpolated, in elements
    below: str  # verdict at the smaller sizes
    above: str  # verdict at the larger sizes
    between: tuple[int, int]  # the measured sizes with significant verdicts around it

    def describe(self) -> str:
        return (
            f"{self.variant!r} vs {self.reference!r} [{self.dtype}, {self.device}]: "
            f"{self.below} below ~{self.size:,.0f} elements (2^{math.log2(self.size):.1f}), "
            f"{self.above} above"
        )


def crossover_sizes(
    sizes: Sequence[int], ratios: Sequence[float], verdicts: Sequence[str]
) -> list[tuple[float, str, str, tuple[int, int]]]:
    """Sizes where the ratio crosses 1 with significance on both sides.

    Between two sizes with opposite significant verdicts (faster then slower, or the
    reverse; ``same`` sizes between them are passed over), the crossing is where
    log(ratio) changes sign, interpolated linearly in log(size) between the two
    adjacent sizes around it. Returns (size, verdict below, verdict above, (size of
    the last significant verdict below, of the first above)).
    """
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    xs = [math.log(sizes[i]) for i in order]
    ys = [math.log(ratios[i]) for i in order]
    vs = [verdicts[i] for i in order]
    significant = [k for k, v in enumerate(vs) if v in ("faster", "slower")]
    out: list[tuple[float, str, str, tuple[int, int]]] = []
    for a, b in itertools.pairwise(significant):
        if vs[a] == vs[b]:
            continue
        for k in range(a, b):
            if ys[k] == 0.0 or (ys[k] < 0.0) != (ys[k + 1] < 0.0):
                t = ys[k] / (ys[k] - ys[k + 1]) if ys[k] != ys[k + 1] else 0.0
                size = math.exp(xs[k] + t * (xs[k + 1] - xs[k]))
                out.append((size, vs[a], vs[b], (sizes[order[a]], sizes[order[b]])))
                break
    return out


# -- result rows ----------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One variant at one point, with its ratio to the reference (the table's row)."""

    device: str
    dtype: str
    size: int
    variant: str
    reference: str
    status: str
    reason: str | None = None
    median_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    n: int | None = None
    items_per_s: float | None = None
    ratio: float | None = None
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    verdict: str | None = None  # faster / slower / same; "reference" on the reference
    max_rel_error: float | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Row:
        """From a dict or a DataFrame record (NaN read as missing)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if isinstance(value, float) and math.isnan(value):
                value = None
            values[f.name] = value
        values["warnings"] = tuple(values["warnings"] or ())
        values["size"] = int(values["size"])
        if values["n"] is not None:
            values["n"] = int(values["n"])
        return cls(**values)


def _per_call(result: Result) -> list[float]:
    return [s / result.calls_per_sample for s in result.samples_s]


def rows_from_results(
    results: Iterable[Result], reference: str, min_effect: float = MIN_EFFECT
) -> list[Row]:
    """Rows in the order of ``results``; ratios against the ``reference`` variant's result
    at the same (device, dtype, size)."""
    results = list(results)
    refs = {
        (r.point.device, r.point.dtype, r.point.size): r
        for r in results
        if r.point.variant == reference and r.status == "ok" and len(r.samples_s) >= 2
    }
    rows: list[Row] = []
    for result in results:
        p = result.point
        base: dict[str, Any] = {
            "device": p.device,
            "dtype": p.dtype,
            "size": p.size,
            "variant": p.variant,
            "reference": reference,
            "status": result.status,
            "reason": result.reason,
            "max_rel_error": result.max_rel_error,
            "warnings": tuple(result.warnings),
        }
        if result.status != "ok" or not result.samples_s:
            rows.append(Row(**base))
            continue
        stats = Stats.from_samples(result.samples_s, result.calls_per_sample)
        base.update(
            median_s=stats.median_s,
            ci_low_s=stats.ci_low_s,
            ci_high_s=stats.ci_high_s,
            q1_s=stats.q1_s,
            q3_s=stats.q3_s,
            n=stats.n,
            items_per_s=p.size / stats.median_s if stats.median_s > 0 else None,
        )
        ref = refs.get((p.device, p.dtype, p.size))
        if p.variant == reference:
            base.update(ratio=1.0, verdict="reference")
        elif ref is not None and len(result.samples_s) >= 2:
            estimate = ratio_of_medians(_per_call(ref), _per_call(result))
            base.update(
                ratio=estimate.ratio,
                ratio_ci_low=estimate.ci_low,
                ratio_ci_high=estimate.ci_high,
                verdict=verdict(estimate, min_effect),
            )
        rows.append(Row(**base))
    return rows


def find_crossovers(rows: Iterable[Row]) -> list[Crossover]:
    """Every crossover of every variant against the reference, per device and dtype."""
    series: dict[tuple[str, str, str, str], list[Row]] = {}
    for row in rows:
        if row.ratio is not None and row.verdict in VERDICTS and row.ratio > 0:
            key = (row.variant, row.reference, row.device, row.dtype)
            series.setdefault(key, []).append(row)
    out: list[Crossover] = []
    for (variant, reference, device, dtype), group in series.items():
        found = crossover_sizes(
            [r.size for r in group],
            [r.ratio for r in group if r.ratio is not None],
            [r.verdict or "same" for r in group],
        )
        for size, below, above, between in found:
            out.append(Crossover(variant, reference, device, dtype, size, below, above, between))
    return out
