"""The steps every point measurement shares: device policy, reference check, Result."""

from __future__ import annotations

import math

import pytest
import torch

from benchbench.core.values import Point
from benchbench.measure.accuracy import Tolerance
from benchbench.measure.pipeline import check_output, ok_result, policy_for_device
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Measured, Policy
from benchbench.suite.declare import Suite, Variant

CPU = Point("s", "w", "v", 64, (64,), "float32", "cpu")


def test_cuda_points_sync_once_per_ten_rounds_and_every_point_seeds_its_shuffle():
    cuda = Point("s", "w", "v", 64, (64,), "float32", "cuda:0")
    on_cuda = policy_for_device(Policy(), cuda)
    on_cpu = policy_for_device(Policy(), CPU)
    assert (on_cuda.rounds_per_batch, on_cpu.rounds_per_batch) == (10, 1)
    assert on_cpu.seed == CPU.input_seed() and on_cuda.seed == cuda.input_seed()
    assert on_cpu.seed != on_cuda.seed


def test_check_output_accepts_a_close_output_and_returns_its_accuracy():
    x = torch.rand(64) + 0.5
    reason, accuracy = check_output(torch.sqrt(x), torch.sqrt(x.double()), "float32")
    assert reason is None and accuracy is not None and accuracy.max_rel_error < 1e-6


def test_check_output_says_how_wrong_against_what_and_with_which_tolerance():
    x = torch.rand(64) + 0.5
    reason, accuracy = check_output(x * 1.01, x, "float32", reference_name="exact")
    assert accuracy is not None and accuracy.max_rel_error == pytest.approx(0.01, rel=1e-3)
    assert accuracy.max_abs_error == pytest.approx(float(x.max()) * 0.01, rel=1e-3)
    assert reason is not None and reason.startswith(
        "wrong result against 'exact': 64 of 64 float32 elements beyond "
        "atol 1e-05 + rtol 1.3e-06·|expected|; max abs error "
    )
    nan = x.clone()
    nan[:3] = math.nan
    reason, _ = check_output(nan, x, "float32", Tolerance(rtol=0.5, atol=0.0))
    assert reason == "wrong result: 3 NaN/Inf not in the reference; max abs error 0"


def test_check_output_without_a_tensor_on_either_side():
    x = torch.rand(4)
    assert check_output(None, x, "float32", reference_name="ref") == (
        "wrong result: returns NoneType, 'ref' does not",
        None,
    )
    assert check_output(x, None, "float32") == (None, None)  # nothing to check against


def test_ok_result_puts_the_engine_warnings_first_and_keeps_the_fields_given():
    measured = Measured("v", (1e-6,) * 10, 1, {"calls": 3.0}, converged=False, stop_reason="cap")
    result = ok_result(CPU, measured, Policy(), ["mine"], items_per_call=64.0, threads=3)
    assert result.status == "ok" and result.samples_s == measured.samples_s
    assert result.warmup == {"calls": 3.0} and result.stop_reason == "cap"
    assert result.warnings[0].startswith("not converged") and result.warnings[-1] == "mine"
    assert (result.items_per_call, result.threads) == (64.0, 3)
    assert ok_result(CPU, measured, Policy()).threads == torch.get_num_threads()


def test_a_suite_variant_returning_no_tensor_is_a_wrong_result():
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[Variant("right", torch.sqrt), Variant("none", lambda x: None)],
        sizes=[64],
    )
    point = next(p for p in w.points() if p.variant == "none")
    result = measure_point(w, point, Options(policy=Policy(max_time_s=0.01)))
    assert result.status == "error"
    assert result.reason == "wrong result: returns NoneType, the reference does not"
