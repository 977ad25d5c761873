import math

import numpy as np
import torch

from benchbench.measure.accuracy import compare


def test_float32_sqrt_against_float64_is_within_an_ulp():
    x = torch.rand(1000, dtype=torch.float64) + 0.5
    out = torch.sqrt(x.float())
    acc = compare(out, torch.sqrt(x.float().double()), "float32", {})
    assert acc.ok
    assert acc.max_rel_error <= 2**-23


def test_a_different_computation_fails_the_check():
    x = torch.rand(1000, dtype=torch.float64) + 0.5
    acc = compare(torch.rsqrt(x.float()), torch.sqrt(x), "float32", {})
    assert not acc.ok
    assert acc.max_rel_error > 0.1


def test_nan_in_the_same_places_is_not_a_mismatch():
    ref = torch.tensor([1.0, math.nan, 4.0], dtype=torch.float64)
    out = torch.tensor([1.0, math.nan, 4.0], dtype=torch.float32)
    acc = compare(out, ref, "float32", {})
    assert acc.ok and acc.nonfinite == 1 and acc.mismatched_nonfinite == 0


def test_nan_where_the_reference_is_finite_fails():
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = torch.tensor([1.0, math.nan])
    acc = compare(out, ref, "float32", {})
    assert not acc.ok and acc.mismatched_nonfinite == 1


def test_numpy_outputs_and_rtol_override():
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = np.array([1.0, 2.02], dtype=np.float32)
    assert not compare(out, ref, "float32", {}).ok
    assert compare(out, ref, "float32", {"float32": 0.05}).ok


def test_values_the_dtype_flushes_to_zero_do_not_blow_up():
    ref = torch.tensor([1e-30], dtype=torch.float64)
    out = torch.tensor([0.0], dtype=torch.float16)
    acc = compare(out, ref, "float16", {})
    assert acc.max_rel_error < 1e-20
