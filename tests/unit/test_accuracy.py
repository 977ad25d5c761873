"""The reference check: torch's closeness test, its tolerances and what it records."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchbench.measure.accuracy import DEFAULT_TOLERANCES, Tolerance, compare, tolerance_for


def _uniform(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=generator, dtype=torch.float64) * 2 - 1


def _check(fn, dtype: str, *inputs: torch.Tensor, **tolerance):
    """``fn`` in ``dtype`` against ``fn`` in float64 on the same rounded inputs."""
    rounded = [x.to(getattr(torch, dtype)) for x in inputs]
    return compare(
        fn(*rounded), fn(*(x.double() for x in rounded)), dtype, tolerance_for(dtype, **tolerance)
    )


def test_the_defaults_are_torch_testing_own():
    from torch.testing._comparison import _DTYPE_PRECISIONS

    for name, (rtol, atol) in DEFAULT_TOLERANCES.items():
        assert _DTYPE_PRECISIONS[getattr(torch, name)] == (rtol, atol), name
    assert tolerance_for("int64") == Tolerance(0.0, 0.0)  # integers: exact, as torch


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_correct_operators_on_inputs_around_zero_pass_the_default_check(dtype):
    # Outputs cross zero: an elementwise relative error blows up there (gelu float32
    # reached 3e-3), the atol + rtol * |expected| bound does not.
    x = _uniform(64, 256)
    for name, fn in (
        ("gelu", F.gelu),
        ("layer_norm", lambda t: F.layer_norm(t, (256,))),
    ):
        accuracy = _check(fn, dtype, x)
        assert accuracy.ok, (name, accuracy)
        assert accuracy.max_rel_error < 1 and accuracy.max_abs_error > 0
    a, b = _uniform(256, 256, seed=1), _uniform(256, 256, seed=2)
    assert _check(torch.matmul, dtype, a, b).ok


def test_a_large_matmul_passes_with_its_reduction_size_and_not_by_looser_defaults():
    a, b = _uniform(1024, 1024, seed=1), _uniform(1024, 1024, seed=2)
    scaled = _check(torch.matmul, "float32", a, b, reduction_size=1024)
    assert scaled.ok, scaled
    assert scaled.tolerance == Tolerance(1.3e-6 * 32, 1e-5 * 32)
    # A 1 % error is still far outside the grown tolerance.
    wrong = compare(
        torch.matmul(a.float(), b.float()) * 1.01,
        torch.matmul(a.float().double(), b.float().double()),
        "float32",
        scaled.tolerance,
    )
    assert not wrong.ok and wrong.beyond > 0.9 * wrong.compared


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_wrong_operators_still_fail(dtype):
    x = _uniform(4096).to(getattr(torch, dtype))
    expected = F.gelu(x.double())
    for wrong in (F.gelu(x) * 1.05, torch.relu(x), F.gelu(x, approximate="tanh") + 0.05):
        assert not compare(wrong, expected, dtype).ok
    if dtype == "float32":  # 1 % is within bfloat16's own rounding, not float32's
        assert not compare(F.gelu(x) * 1.01, expected, dtype).ok


def test_the_bound_is_atol_plus_rtol_times_the_expected_magnitude():
    tolerance = Tolerance(rtol=1e-3, atol=1e-2)
    expected = torch.tensor([0.0, 100.0, 100.0], dtype=torch.float64)
    inside = torch.tensor([0.0099, 100.109, 99.891])  # 0.01 + 0.1 = 0.11 at 100
    assert compare(inside, expected, "float32", tolerance).ok
    outside = torch.tensor([0.0101, 100.0, 100.2])
    accuracy = compare(outside, expected, "float32", tolerance)
    assert (accuracy.beyond, accuracy.compared) == (2, 3)
    assert accuracy.max_abs_error == pytest.approx(0.2, rel=1e-4)
    index, want, got = accuracy.worst or ((), 0.0, 0.0)
    assert index == (2,) and want == 100.0 and got == pytest.approx(100.2, rel=1e-6)


def test_max_rel_error_is_relative_with_the_dtype_atol_as_the_floor():
    expected = torch.tensor([1e-12, 2.0], dtype=torch.float64)
    accuracy = compare(torch.tensor([1e-9, 2.0]), expected, "float32")
    assert accuracy.max_rel_error == pytest.approx((1e-9 - 1e-12) / 1e-5, rel=1e-3)
    accuracy = compare(torch.tensor([1e-12, 2.02]), expected, "float32")
    assert accuracy.max_rel_error == pytest.approx(0.01, rel=1e-3)


def test_the_failure_says_how_many_elements_where_and_by_how_much():
    expected = torch.linspace(-1, 1, 64, dtype=torch.float64).reshape(8, 8)
    out = expected.float().clone()
    out[3, 5] += 0.3
    out[6, 1] += 0.1
    accuracy = compare(out, expected, "float32")
    assert accuracy.why_wrong("float32") == (
        "2 of 64 float32 elements beyond atol 1e-05 + rtol 1.3e-06·|expected|; "
        f"max abs error 0.3; worst at index (3, 5) (expected {float(expected[3, 5]):.6g}, "
        f"got {float(out[3, 5]):.6g})"
    )


def test_stated_tolerances_win_over_the_default_most_specific_first():
    assert tolerance_for("bfloat16") == Tolerance(1.6e-2, 1e-5)
    workload = {"bfloat16": 2e-2}
    assert tolerance_for("bfloat16", rtol=(None, workload)) == Tolerance(2e-2, 1e-5)
    assert tolerance_for("float32", rtol=(None, workload)) == Tolerance(1.3e-6, 1e-5)
    assert tolerance_for("bfloat16", rtol=(3e-2, workload)) == Tolerance(3e-2, 1e-5)
    assert tolerance_for("float32", rtol=({"bfloat16": 1.0}, 1e-4), atol=(0.0, 1.0)) == Tolerance(
        1e-4, 0.0
    )
    # The reduction grows the defaults only; a stated tolerance is taken as it is.
    assert tolerance_for("float32", rtol=(1e-4,), reduction_size=100) == Tolerance(1e-4, 1e-4)


def test_a_different_computation_fails_the_check():
    x = torch.rand(1000, dtype=torch.float64) + 0.5
    acc = compare(torch.rsqrt(x.float()), torch.sqrt(x), "float32")
    assert not acc.ok
    assert acc.max_rel_error > 0.1


def test_nan_in_the_same_places_is_not_a_mismatch():
    ref = torch.tensor([1.0, math.nan, 4.0], dtype=torch.float64)
    out = torch.tensor([1.0, math.nan, 4.0], dtype=torch.float32)
    acc = compare(out, ref, "float32")
    assert acc.ok and acc.nonfinite == 1 and acc.mismatched_nonfinite == 0


def test_nan_where_the_reference_is_finite_fails():
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = torch.tensor([1.0, math.nan])
    acc = compare(out, ref, "float32")
    assert not acc.ok and acc.mismatched_nonfinite == 1 and acc.beyond == 0
    assert acc.why_wrong("float32") == "1 NaN/Inf not in the reference; max abs error 0"


def test_numpy_outputs_and_a_stated_rtol():
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = np.array([1.0, 2.02], dtype=np.float32)
    assert not compare(out, ref, "float32").ok
    assert compare(out, ref, "float32", tolerance_for("float32", rtol=({"float32": 0.05},))).ok


def test_outputs_of_another_shape_are_wrong_and_say_so():
    acc = compare(torch.zeros(3), torch.zeros(4, dtype=torch.float64), "float32")
    assert not acc.ok and acc.why_wrong("float32") == "returns shape (3,), the reference (4,)"


def test_values_the_dtype_flushes_to_zero_are_within_its_atol():
    ref = torch.tensor([1e-30], dtype=torch.float64)
    out = torch.tensor([0.0], dtype=torch.float16)
    acc = compare(out, ref, "float16")
    assert acc.ok and acc.max_rel_error < 1e-20
