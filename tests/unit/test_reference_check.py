"""The reference check of a suite's points: defaults that accept correct operators,
stated tolerances and their precedence, bad tolerances, the stored errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from benchbench.core.errors import SuiteError
from benchbench.core.values import Result
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy
from benchbench.suite.declare import Suite, Variant, Workload

FAST = Options(policy=Policy(max_time_s=0.01, min_samples=3))


def _measure(workload: Workload) -> dict[tuple[str, str], Result]:
    return {(p.variant, p.dtype): measure_point(workload, p, FAST) for p in workload.points()}


def _around_zero(ctx):
    return ctx.uniform(-1.0, 1.0)


def test_gelu_layer_norm_and_matmul_around_zero_pass_in_float32_and_bfloat16():
    suite = Suite("s")
    common = {"setup": _around_zero, "dtypes": ("float32", "bfloat16")}
    workloads = [
        suite.workload("gelu", variants=[Variant("F.gelu", F.gelu)], sizes=[4096], **common),
        suite.workload(
            "layer_norm",
            variants=[Variant("F.layer_norm", lambda x: F.layer_norm(x, x.shape[-1:]))],
            sizes=[(32, 128)],
            **common,
        ),
        suite.workload(
            "matmul",
            setup=lambda ctx: (ctx.uniform(-1.0, 1.0), ctx.uniform(-1.0, 1.0)),
            variants=[Variant("torch.matmul", torch.matmul)],
            sizes=[(128, 128)],
            dtypes=("float32", "bfloat16"),
            reduction_size=lambda p: p.shape[1],
        ),
    ]
    for workload in workloads:
        for (variant, dtype), result in _measure(workload).items():
            assert result.status == "ok", (variant, dtype, result.reason)
            assert result.max_abs_error is not None and result.max_abs_error > 0
            assert result.max_rel_error is not None and result.max_rel_error < 0.05
            assert result.to_dict()["max_abs_error"] == result.max_abs_error


def test_a_wrong_variant_still_fails_and_stores_its_errors():
    suite = Suite("s")
    workload = suite.workload(
        "gelu",
        setup=_around_zero,
        variants=[
            Variant("F.gelu", F.gelu),
            Variant("relu", torch.relu),
            Variant("1 % high", lambda x: F.gelu(x) * 1.01),
        ],
        sizes=[4096],
    )
    results = _measure(workload)
    for name in ("relu", "1 % high"):
        wrong = results[name, "float32"]
        assert wrong.status == "error" and not wrong.samples_s
        assert wrong.reason.startswith("wrong result: ")
        assert "float32 elements beyond atol 1e-05 + rtol 1.3e-06·|expected|" in wrong.reason
        assert wrong.max_abs_error is not None and wrong.max_abs_error > 1e-3
    # relu(x) - gelu(x) is largest in magnitude, 0.1700..., at x = -0.75179
    relu = results["relu", "float32"].max_abs_error
    assert relu == pytest.approx(0.17, abs=0.001)


def test_the_variant_tolerance_wins_over_the_workload_over_the_dtype_default():
    suite = Suite("s")
    workload = suite.workload(
        "w",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[
            Variant("exact", torch.sqrt),
            Variant("off 1 %", lambda x: torch.sqrt(x) * 1.01),
            Variant("off 1 %, allowed 2 %", lambda x: torch.sqrt(x) * 1.01, rtol=0.02),
            Variant("off 1 %, bf16 only", lambda x: torch.sqrt(x) * 1.01, rtol={"bfloat16": 0.5}),
            Variant("atol", lambda x: torch.sqrt(x) + 0.1, atol={"float32": 0.2}),
        ],
        sizes=[256],
        dtypes=("float32", "float64"),
        rtol={"float64": 0.05},
        atol=0.0,
    )
    results = _measure(workload)
    assert results["off 1 %", "float32"].status == "error"  # the float32 default
    assert results["off 1 %", "float64"].status == "ok"  # the workload's float64 rtol
    assert results["off 1 %, allowed 2 %", "float32"].status == "ok"  # the variant's
    assert results["off 1 %, bf16 only", "float32"].status == "error"
    assert results["atol", "float32"].status == "ok"
    assert results["atol", "float64"].status == "error"  # the workload's atol 0
    assert results["exact", "float32"].extra["tolerance"] == {"rtol": 1.3e-6, "atol": 0.0}
    assert results["off 1 %, allowed 2 %", "float64"].extra["tolerance"] == {
        "rtol": 0.02,
        "atol": 0.0,
    }


def test_the_reduction_size_grows_the_default_tolerance_by_its_square_root():
    suite = Suite("s")
    workload = suite.workload(
        "matmul",
        setup=lambda ctx: (ctx.uniform(-1.0, 1.0), ctx.uniform(-1.0, 1.0)),
        variants=[Variant("torch.matmul", torch.matmul)],
        sizes=[(64, 64)],
        reduction_size=lambda p: p.shape[1],
    )
    (result,) = _measure(workload).values()
    assert result.extra["tolerance"] == pytest.approx({"rtol": 1.3e-6 * 8, "atol": 1e-5 * 8})


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("workload", -1e-3, "rtol=-0.001: a tolerance is a finite number >= 0"),
        ("workload", {"float23": 1e-3}, "names unknown dtype 'float23'; use one of float64"),
        ("workload", "1e-3", "a tolerance is a finite number >= 0 or a dict"),
        ("workload", {"bfloat16": True}, "rtol={'bfloat16': True}: a tolerance"),
        ("variant", float("nan"), "variant 'v' rtol=nan: a tolerance is a finite number"),
        ("variant", {"int64": 0.1}, "variant 'v' rtol={'int64': 0.1} names unknown dtype"),
    ],
)
def test_bad_tolerances_name_the_workload_variant_value_and_fix(where, value, message):
    suite = Suite("s")
    on_variant = {"rtol": value} if where == "variant" else {}
    on_workload = {"rtol": value} if where == "workload" else {}
    with pytest.raises(SuiteError, match="workload 'w'") as raised:
        suite.workload(
            "w",
            setup=lambda c: c.uniform(),
            variants=[Variant("v", abs, **on_variant)],
            sizes=[4],
            **on_workload,
        )
    text = str(raised.value)
    assert message in text
    assert "e.g. rtol={'bfloat16': 2e-2}" in text or "use one of float64" in text  # the fix


def test_a_bad_atol_and_reduction_size_are_refused_too():
    suite = Suite("s")
    with pytest.raises(SuiteError, match=r"workload 'w': atol=-1: a tolerance is a finite"):
        suite.workload("w", setup=lambda c: c.uniform(), variants=[Variant("v", abs)],
                       sizes=[4], atol=-1)  # fmt: skip
    with pytest.raises(SuiteError, match="reduction_size must be callable"):
        suite.workload("w", setup=lambda c: c.uniform(), variants=[Variant("v", abs)],
                       sizes=[4], reduction_size=64)  # type: ignore[arg-type]  # fmt: skip


# --- the timed output checked again, the reference on the point's device -----------------


def _sqrt_workload(fn, **kw) -> Workload:  # type: ignore[no-untyped-def]
    suite = Suite("s")
    return suite.workload(
        "sqrt",
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant("v", fn)],
        reference=torch.sqrt,
        sizes=[256],
        **kw,
    )


def test_a_variant_right_once_and_wrong_when_timed_is_an_error_with_the_reason():
    calls = [0]

    def cached(x):  # right on the checked call, garbage on the timed path
        calls[0] += 1
        return torch.sqrt(x) if calls[0] == 1 else torch.empty_like(x).fill_(7.0)

    (point,) = _sqrt_workload(cached).points()
    result = measure_point(_sqrt_workload(cached), point, FAST)
    assert result.status == "error", result.reason
    assert result.reason.startswith("the timed output is wrong though the checked call's was right")
    assert "cached, computed lazily or unfinished" in result.reason
    fine = _sqrt_workload(torch.sqrt)
    assert measure_point(fine, point, FAST).status == "ok"
    # rotate mode cycles through copies of the same inputs: the last one is checked too.
    rotating = _sqrt_workload(torch.sqrt, cache="rotate")
    assert measure_point(rotating, point, FAST).status == "ok"
    calls[0] = 0
    assert measure_point(_sqrt_workload(cached, cache="rotate"), point, FAST).status == "error"


class _DeviceCopies(torch.overrides.TorchFunctionMode):
    """Records every ``Tensor.to(<cuda device>)`` and answers it with the CPU tensor (the
    CPU build has no CUDA): where the reference's inputs were sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.Tensor.to and len(args) > 1 and str(args[1]).startswith("cuda"):
            self.sent.append(str(args[1]))
            return args[0]
        return func(*args, **kwargs)


def test_a_cuda_points_reference_runs_in_float64_on_its_device():
    from benchbench.measure.reference import reference_output as _reference_output

    workload = _sqrt_workload(torch.sqrt)
    x = torch.rand(8, dtype=torch.float32) + 0.5
    with _DeviceCopies() as copies:
        out = _reference_output(workload, (x,), "cuda:1")
    assert copies.sent == ["cuda:1"]  # not computed on the CPU
    assert out.dtype == torch.float64
    with _DeviceCopies() as copies:
        _reference_output(workload, (x,), "cpu")
        _reference_output(workload, (x,), "mps")  # MPS has no float64: the CPU's
    assert copies.sent == []


def test_a_reference_the_device_cannot_run_runs_on_the_cpu():
    from benchbench.measure.reference import reference_output as _reference_output

    tried: list[str] = []

    def numpy_reference(x):  # a CUDA tensor has no .numpy(): fails on the device
        tried.append("call")
        if len(tried) == 1:
            raise TypeError("can't convert cuda:0 device type tensor to numpy")
        return torch.from_numpy(x.numpy() ** 0.5)

    workload = _sqrt_workload(torch.sqrt)
    workload = Suite("s").workload(
        "w", setup=workload.setup, variants=workload.variants, reference=numpy_reference,
        sizes=[8],
    )  # fmt: skip
    x = torch.rand(8) + 0.5
    with _DeviceCopies():
        out = _reference_output(workload, (x,), "cuda:0")
    assert tried == ["call", "call"] and out.dtype == torch.float64
