"""Relative error of an operator versus input magnitude, per dtype, against float64.

Computed directly (not from the store): inputs spread log-uniformly over many
decades are rounded to each dtype — as a user's data would be — the operator runs
in that dtype, and the result is compared with the operator on the exact float64
inputs. Each dtype's limits are marked: below its smallest subnormal an input is
stored as 0, between that and its smallest normal it keeps fewer bits, above its
max it is stored as Inf. This makes SEEDS A's claim visible: ``sqrt(1e-8)`` in
float16 is ``sqrt(0)`` because 1e-8 < 6e-8, float16's smallest subnormal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from benchbench.core.defaults import ACCURACY_DTYPES
from benchbench.core.errors import UsageError

DEFAULT_DTYPES = ACCURACY_DTYPES
#: Relative errors are drawn between these bounds: exact results sit on the floor,
#: wrong-by-everything results (0 or Inf for a finite reference) on the ceiling.
FLOOR, CEILING = 1e-18, 1e1
_COLORS = {"float16": "tab:red", "bfloat16": "tab:orange", "float32": "tab:blue", "float64": "k"}


@dataclass(frozen=True)
class Limits:
    """Where a floating dtype stops representing positive numbers faithfully."""

    smallest_subnormal: float
    smallest_normal: float
    max: float
    unit_roundoff: float

    @classmethod
    def of(cls, dtype: torch.dtype) -> Limits:
        info = torch.finfo(dtype)
        return cls(info.tiny * info.eps, info.tiny, info.max, info.eps / 2)


def operator(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """``torch.NAME`` or ``torch.special.NAME`` for a unary operator name."""
    for namespace in (torch, torch.special):
        fn = getattr(namespace, name, None)
        if callable(fn) and not name.startswith("_"):
            return fn
    raise UsageError(
        f"unknown operator {name!r}; give a unary torch or torch.special function, "
        "e.g. sqrt, rsqrt, exp, log, erf"
    )


def relative_errors(
    fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, dtype: torch.dtype
) -> np.ndarray:
    """|fn(x rounded to dtype) - fn(x)| / |fn(x)| per element (Inf for a non-finite miss)."""
    exact = fn(x)
    got = fn(x.to(dtype)).to(torch.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = ((got - exact).abs() / exact.abs()).numpy()
    miss = ~torch.isfinite(got).numpy() & torch.isfinite(exact).numpy()
    rel[miss] = math.inf
    rel[(got == exact).numpy()] = 0.0
    return rel


def accuracy_figure(
    op: str = "sqrt",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    low: float = 1e-12,
    high: float = 1e12,
    points: int = 2001,
) -> Figure:
    """Log-log plot of relative error versus input for ``op`` in each of ``dtypes``."""
    if not 0 < low < high:
        raise UsageError(f"the input range must satisfy 0 < low < high, got {low:g}..{high:g}")
    if points < 2:
        raise UsageError(f"points must be >= 2, got {points}")
    fn = operator(op)
    x = torch.logspace(math.log10(low), math.log10(high), points, dtype=torch.float64)
    figure = Figure(figsize=(9, 5.5), layout="constrained")
    ax = figure.add_subplot()
    for name in dtypes:
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise UsageError(f"--dtype {name!r} is not a floating dtype; use e.g. float16")
        color = _COLORS.get(name)
        rel = np.clip(relative_errors(fn, x, dtype), FLOOR, CEILING)
        limits = Limits.of(dtype)
        label = (
            f"{name} (subnormal {limits.smallest_subnormal:.2g}, "
            f"normal {limits.smallest_normal:.2g}, max {limits.max:.2g})"
        )
        ax.plot(x.numpy(), rel, ".", markersize=2, color=color, label=label)
        ax.axhline(limits.unit_roundoff, color=color, linewidth=0.6, linestyle=":")
        for value, style in (
            (limits.smallest_subnormal, "--"),
            (limits.smallest_normal, "-."),
            (limits.max, "-"),
        ):
            if low <= value <= high:
                ax.axvline(value, color=color, linewidth=0.9, linestyle=style, alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(FLOOR / 2, CEILING * 2)
    ax.set_xlabel("input x (float64, then rounded to the dtype)")
    ax.set_ylabel(f"relative error of {op}(x) vs float64")
    ax.set_title(
        f"{op}: relative error versus input magnitude\n"
        "vertical: smallest subnormal (--), smallest normal (-.), max (-); "
        "dotted: unit roundoff; exact on the floor, 0/Inf results on the ceiling",
        fontsize=9,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="center left", markerscale=6)
    return figure
