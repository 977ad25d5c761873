"""The values ``setup(ctx)`` draws: the same numbers as the float64 formulas they stand
for, every variant of a point seeing the same ones."""

from __future__ import annotations

import torch

from benchbench.core.values import Point
from benchbench.suite.inputs import SetupContext


def _point(dtype: str = "float32") -> Point:
    return Point("s", "w", "v", 4096, (64, 64), dtype, "cpu")


def _draws(ctx: SetupContext) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(ctx.point.input_seed())


def test_uniform_normal_and_log_uniform_are_their_float64_formulas_rounded_once():
    context = SetupContext(_point())
    g = _draws(context)
    u = torch.rand((64, 64), generator=g, dtype=torch.float64)
    n = torch.randn((64, 64), generator=g, dtype=torch.float64)
    v = torch.rand((64, 64), generator=g, dtype=torch.float64)
    lo, hi = torch.log(torch.tensor(1e-3)), torch.log(torch.tensor(10.0))
    expected = [
        (u * 2.0 + 0.5).to(torch.float32),
        (n * 3.0 - 1.0).to(torch.float32),
        torch.exp(lo + v * (hi - lo)).to(torch.float32),
    ]
    got = [context.uniform(0.5, 2.5), context.normal(-1.0, 3.0), context.log_uniform(1e-3, 10.0)]
    for one, want in zip(got, expected, strict=True):
        assert one.dtype == torch.float32
        assert torch.equal(one, want)


def test_every_variant_of_a_point_sees_the_same_numbers_rounded_from_float64():
    point = _point("bfloat16")
    other = Point("s", "w", "another variant", 4096, (64, 64), "bfloat16", "cpu")
    wide = SetupContext(point).uniform(0.5, 1.5, dtype=torch.float64)
    narrow = SetupContext(other).uniform(0.5, 1.5)
    assert wide.dtype == torch.float64 and narrow.dtype == torch.bfloat16
    assert torch.equal(narrow, wide.to(torch.bfloat16))
    assert float(wide.min()) >= 0.5 and float(wide.max()) < 1.5
