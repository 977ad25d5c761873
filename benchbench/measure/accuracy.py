"""Checking a variant's output against a float64 reference, and recording accuracy.

The check is ``torch.testing.assert_close``'s: every element must satisfy
``|actual - expected| <= atol + rtol * |expected|``, with torch's default ``(rtol,
atol)`` for the *variant's* dtype (:data:`DEFAULT_TOLERANCES`). The reference is
computed in float64 on the same (already rounded) inputs, so the difference is the
variant's own rounding; the dtype it computes in sets how much of that to expect.

A workload that sums ``K`` terms into each output element (a matmul's inner
dimension) declares ``reduction_size``: the default tolerances then grow by
``sqrt(K)``, the growth of the rounding error of a K-term sum with random rounding
errors (the probabilistic bound of Higham & Mary, 2019; the worst case grows as
``K``). A tolerance a suite states itself (``rtol=`` / ``atol=`` on the workload or
variant) is taken as it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

#: ``torch.testing.assert_close``'s default ``(rtol, atol)`` per dtype, as in torch
#: 2.13's ``torch/testing/_comparison.py`` (``_DTYPE_PRECISIONS``). Other dtypes
#: (integers, bool) are compared exactly, as torch does.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}

#: A stated tolerance: one number for every dtype, or a number per dtype name.
ToleranceSpec = float | Mapping[str, float] | None


@dataclass(frozen=True)
class Tolerance:
    """The check's bound: ``|actual - expected| <= atol + rtol * |expected|``."""

    rtol: float
    atol: float

    def describe(self) -> str:
        return f"atol {self.atol:.3g} + rtol {self.rtol:.3g}·|expected|"


def _pick(dtype: str, specs: Sequence[ToleranceSpec]) -> float | None:
    """The first of ``specs`` (most specific first) that names ``dtype``."""
    for spec in specs:
        if isinstance(spec, Mapping):
            if dtype in spec:
                return float(spec[dtype])
        elif spec is not None:
            return float(spec)
    return None


def tolerance_for(
    dtype: str,
    rtol: Sequence[ToleranceSpec] = (),
    atol: Sequence[ToleranceSpec] = (),
    reduction_size: int | None = None,
) -> Tolerance:
    """The tolerance at ``dtype``: the first stated ``rtol``/``atol`` that applies, else
    the dtype's default, grown by ``sqrt(reduction_size)`` when the output sums that
    many terms. ``rtol``/``atol`` list the stated values most specific first
    (variant, then workload)."""
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    growth = math.sqrt(reduction_size) if reduction_size and reduction_size > 1 else 1.0
    stated_rtol, stated_atol = _pick(dtype, rtol), _pick(dtype, atol)
    return Tolerance(
        rtol=stated_rtol if stated_rtol is not None else default_rtol * growth,
        atol=stated_atol if stated_atol is not None else default_atol * growth,
    )


@dataclass(frozen=True)
class Accuracy:
    """Agreement of one output with the reference.

    ``max_rel_error`` is the largest ``|actual - expected| / max(|expected|, floor)``,
    where ``floor`` is the dtype's default atol (1e-5; 1e-7 in float64): a relative
    error that stays finite and meaningful where outputs cross zero. ``beyond``
    counts the elements outside the tolerance; ``worst`` is the one furthest outside
    it (relative to its own bound): ``(index, expected, actual)``.
    """

    max_rel_error: float
    max_abs_error: float
    nonfinite: int  # NaN or Inf in the output
    mismatched_nonfinite: int  # NaN/Inf where the reference is finite, or vice versa
    tolerance: Tolerance
    beyond: int = 0
    compared: int = 0
    worst: tuple[tuple[int, ...], float, float] | None = None
    #: ``(output shape, reference shape)`` when they cannot be compared.
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    @property
    def ok(self) -> bool:
        return self.shapes is None and self.mismatched_nonfinite == 0 and self.beyond == 0

    def why_wrong(self, dtype: str) -> str:
        """What the check found in ``dtype``, for a ``wrong result: ...`` reason."""
        if self.shapes is not None:
            out, ref = self.shapes
            return f"returns shape {out}, the reference {ref}"
        parts = []
        if self.beyond:
            parts.append(
                f"{self.beyond} of {self.compared} {dtype} elements beyond "
                f"{self.tolerance.describe()}"
            )
        if self.mismatched_nonfinite:
            parts.append(f"{self.mismatched_nonfinite} NaN/Inf not in the reference")
        detail = f"max abs error {self.max_abs_error:.3g}"
        if self.worst is not None and self.beyond:
            index, expected, actual = self.worst
            where = index[0] if len(index) == 1 else index
            detail += f"; worst at index {where} (expected {expected:.6g}, got {actual:.6g})"
        return "; ".join([*parts, detail])


def as_float64(value: Any) -> torch.Tensor:
    """Any variant output (tensor, array, scalar, tuple of one) as a float64 CPU tensor."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").to(torch.float64)
    if isinstance(value, np.ndarray | np.generic | float | int):
        return torch.as_tensor(np.asarray(value, dtype=np.float64))
    raise TypeError(
        f"cannot compare an output of type {type(value).__name__}; return a tensor or array"
    )


def compare(
    output: Any, reference: Any, dtype: str, tolerance: Tolerance | None = None
) -> Accuracy:
    """Elementwise agreement of ``output`` with ``reference`` within ``tolerance``
    (default: :func:`tolerance_for` ``dtype``)."""
    tolerance = tolerance or tolerance_for(dtype)
    out = as_float64(output)
    ref = as_float64(reference)
    if out.shape != ref.shape:
        try:
            out = out.expand_as(ref) if out.numel() == 1 else out.reshape(ref.shape)
        except RuntimeError:
            return Accuracy(
                math.inf, math.inf, 0, 0, tolerance, shapes=(tuple(out.shape), tuple(ref.shape))
            )
    finite_out = torch.isfinite(out)
    finite_ref = torch.isfinite(ref)
    nonfinite = int((~finite_out).sum())
    same_special = (~finite_out & ~finite_ref) & (
        (out == ref) | (torch.isnan(out) & torch.isnan(ref))
    )
    mismatched = int(((finite_out != finite_ref) | (~finite_out & ~same_special)).sum())
    both = finite_out & finite_ref
    if not bool(both.any()):
        return Accuracy(0.0, 0.0, nonfinite, mismatched, tolerance, compared=ref.numel())
    diff = torch.where(both, (out - ref).abs(), 0.0)
    magnitude = torch.where(both, ref.abs(), 0.0)
    bound = tolerance.atol + tolerance.rtol * magnitude
    # Exact agreement is never beyond a zero tolerance (0 / 0).
    excess = torch.where(diff > 0, diff / bound, 0.0)
    beyond = int((excess > 1).sum())
    flat = int(excess.reshape(-1).argmax())
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(ref.shape) or (1,)))
    floor = max(DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))[1], 1e-300)
    rel = diff / magnitude.clamp_min(floor)
    return Accuracy(
        max_rel_error=float(rel.max()),
        max_abs_error=float(diff.max()),
        nonfinite=nonfinite,
        mismatched_nonfinite=mismatched,
        tolerance=tolerance,
        beyond=beyond,
        compared=ref.numel(),
        worst=(index, float(ref.reshape(-1)[flat]), float(out.reshape(-1)[flat])),
    )
