"""Checking a variant's output against a float64 reference, and recording accuracy."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

#: Default relative tolerance of the reference check, per dtype. Loose enough for
#: reductions over 2^22 elements (float32 pairwise sums drift to ~1e-6 relative),
#: tight enough that a different computation (sqrt vs rsqrt) fails by orders.
DEFAULT_RTOL = {
    "float64": 1e-9,
    "float32": 1e-4,
    "float16": 1e-2,
    "bfloat16": 5e-2,
    "complex128": 1e-9,
    "complex64": 1e-4,
}


@dataclass(frozen=True)
class Accuracy:
    """Agreement of one output with the reference."""

    max_rel_error: float
    max_abs_error: float
    nonfinite: int  # NaN or Inf in the output
    mismatched_nonfinite: int  # NaN/Inf where the reference is finite, or vice versa
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.mismatched_nonfinite == 0 and self.max_rel_error <= self.tolerance


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


def compare(output: Any, reference: Any, dtype: str, rtol: Mapping[str, float]) -> Accuracy:
    """Max relative error of ``output`` against ``reference`` (elementwise).

    The relative error divides by max(|reference|, smallest normal of ``dtype``), so
    values the dtype flushes to zero do not count as infinitely wrong.
    """
    out = as_float64(output)
    ref = as_float64(reference)
    tolerance = float(rtol.get(dtype, DEFAULT_RTOL.get(dtype, 1e-4)))
    if out.shape != ref.shape:
        try:
            out = out.expand_as(ref) if out.numel() == 1 else out.reshape(ref.shape)
        except RuntimeError:
            return Accuracy(math.inf, math.inf, 0, max(out.numel(), ref.numel()), tolerance)
    finite_out = torch.isfinite(out)
    finite_ref = torch.isfinite(ref)
    nonfinite = int((~finite_out).sum())
    same_special = (~finite_out & ~finite_ref) & (
        (out == ref) | (torch.isnan(out) & torch.isnan(ref))
    )
    mismatched = int(((finite_out != finite_ref) | (~finite_out & ~same_special)).sum())
    both = finite_out & finite_ref
    if not bool(both.any()):
        return Accuracy(0.0, 0.0, nonfinite, mismatched, tolerance)
    diff = (out[both] - ref[both]).abs()
    torch_dtype = getattr(torch, dtype, None)
    tiny = (
        torch.finfo(torch_dtype).tiny
        if torch_dtype is not None and torch_dtype.is_floating_point
        else 1e-300
    )
    rel = diff / ref[both].abs().clamp_min(tiny)
    return Accuracy(float(rel.max()), float(diff.max()), nonfinite, mismatched, tolerance)
