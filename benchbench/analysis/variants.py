"""Variants compared at each point: ratio of medians, verdict, crossovers, table rows.

``benchbench time 'torch.rsqrt(x)' '1 / torch.sqrt(x)'`` and
:func:`benchbench.compare_variants` measure several variants of one computation at
each point (size x device x dtype) **interleaved** (one sample of each per round, in
a shuffled order), so drift on a shared machine hits them alike. This module holds
the pure logic both share; measuring itself is in :mod:`benchbench.measure.variants`
(it imports torch, which costs ~3 s, so it runs in the worker and never in the CLI's
own process).

The ratio of a variant to the reference at a point is ``median(variant) /
median(reference)`` of the per-call times (below 1: the variant is faster); its CI,
p-value and verdict (``faster`` / ``slower`` / ``same`` / ``not significant``, with
``min_effect`` m, default 5 %) are benchbench's one verdict,
:mod:`benchbench.analysis.verdict`. When both sides have one sample per round
(interleaved, so as many samples), rounds are resampled as pairs, so what drifted
within a round cancels in the ratio. A crossover is where the verdict flips from
``faster`` to ``slower`` (or back) across sizes, placed by
:func:`benchbench.analysis.crossover.crossings`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from benchbench.analysis.crossover import crossings
from benchbench.analysis.verdict import FASTER, MIN_EFFECT, SLOWER, estimate, mark
from benchbench.core.stats import Stats
from benchbench.core.values import Result

__all__ = ["MIN_EFFECT", "Crossover", "Row", "find_crossovers", "rows_from_results"]


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
    #: The measured shapes either side of the crossing when the size is a product of
    #: several varying dimensions: an element count says nothing there.
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def describe(self) -> str:
        if self.shapes is not None:
            low, high = ("x".join(map(str, s)) for s in self.shapes)
            return (
                f"{self.variant!r} vs {self.reference!r} [{self.dtype}, {self.device}]: "
                f"{self.below} up to shape {low}, {self.above} from shape {high}"
            )
        return (
            f"{self.variant!r} vs {self.reference!r} [{self.dtype}, {self.device}]: "
            f"{self.below} below ~{self.size:,.0f} elements (2^{math.log2(self.size):.1f}), "
            f"{self.above} above"
        )


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
    verdict: str | None = None  # a verdict.VERDICTS mark; "reference" on the reference
    p_value: float | None = None
    max_rel_error: float | None = None
    warnings: tuple[str, ...] = ()
    #: The input's shape; ``(size,)`` for one-dimensional inputs.
    shape: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["warnings"] = list(self.warnings)
        out["shape"] = list(self.shape)
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
        shape = values["shape"]
        values["shape"] = tuple(int(d) for d in shape) if shape is not None else ()
        if values["n"] is not None:
            values["n"] = int(values["n"])
        return cls(**values)


def _per_call(result: Result) -> list[float]:
    return [s / result.calls_per_sample for s in result.samples_s]


def rows_from_results(
    results: Iterable[Result], reference: str, min_effect: float = MIN_EFFECT
) -> list[Row]:
    """Rows in the order of ``results``; ratios against the ``reference`` variant's result
    at the same (device, dtype, shape)."""
    results = list(results)
    refs = {
        (r.point.device, r.point.dtype, r.point.shape): r
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
            "shape": p.shape,
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
        stats = Stats.from_samples(
            result.samples_s, result.calls_per_sample, result.process_samples
        )
        base.update(
            median_s=stats.median_s,
            ci_low_s=stats.ci_low_s,
            ci_high_s=stats.ci_high_s,
            q1_s=stats.q1_s,
            q3_s=stats.q3_s,
            n=stats.n,
            items_per_s=p.size / stats.median_s if stats.median_s > 0 else None,
        )
        ref = refs.get((p.device, p.dtype, p.shape))
        if p.variant == reference:
            base.update(ratio=1.0, verdict="reference")
        elif ref is not None:
            ref_s, var_s = _per_call(ref), _per_call(result)
            # Interleaved rounds give one sample of each variant per round: paired.
            found = estimate(
                ref_s,
                var_s,
                paired=len(ref_s) == len(var_s),
                base_processes=ref.process_samples,
                contender_processes=result.process_samples,
            )
            base.update(
                ratio=found.ratio,
                ratio_ci_low=found.ci_low,
                ratio_ci_high=found.ci_high,
                verdict=mark(found, min_effect),
                p_value=found.p_value,
            )
        rows.append(Row(**base))
    return rows


def find_crossovers(rows: Iterable[Row]) -> list[Crossover]:
    """Every crossover of every variant against the reference, per device and dtype: where
    the verdict flips between ``faster`` and ``slower`` (sizes with another verdict in
    between are passed over, and locate the flip; see
    :func:`benchbench.analysis.crossover.crossings`)."""
    series: dict[tuple[str, str, str, str], list[Row]] = {}
    for row in rows:
        if row.ratio is not None and row.ratio > 0 and row.verdict not in (None, "reference"):
            key = (row.variant, row.reference, row.device, row.dtype)
            series.setdefault(key, []).append(row)
    out: list[Crossover] = []
    for (variant, reference, device, dtype), group in series.items():
        found = crossings(
            [r.size for r in group],
            [r.ratio for r in group if r.ratio is not None],
            [r.verdict in (FASTER, SLOWER) for r in group],
        )
        for c in found:
            below, above = (FASTER, SLOWER) if c.below < 0 else (SLOWER, FASTER)
            between = (int(c.between[0]), int(c.between[1]))
            out.append(
                Crossover(
                    variant,
                    reference,
                    device,
                    dtype,
                    c.size,
                    below,
                    above,
                    between,
                    _shapes_around(group, c.size),
                )
            )
    return out


def _shapes_around(
    group: Sequence[Row], size: float
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The measured shapes just below and above ``size`` when more than one dimension
    of the group's shapes varies (else None: the element count reads well)."""
    shapes = [r.shape for r in group]
    if any(len(s) != len(shapes[0]) for s in shapes) or not shapes[0]:
        return None
    if sum(len({s[d] for s in shapes}) > 1 for d in range(len(shapes[0]))) < 2:
        return None
    ordered = sorted(group, key=lambda r: r.size)
    low = [r.shape for r in ordered if r.size <= size]
    high = [r.shape for r in ordered if r.size > size]
    return (low[-1], high[0]) if low and high else None
