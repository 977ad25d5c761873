"""Correct operators whose outputs cross zero, and one wrong variant: the reference
check must accept the first and reject the second."""

import torch
import torch.nn.functional as F

from benchbench import Suite, Variant

suite = Suite("around_zero")


def around_zero(ctx):
    return ctx.uniform(-1.0, 1.0)


suite.workload(
    "gelu",
    setup=around_zero,
    variants=[Variant("F.gelu", F.gelu), Variant("relu", torch.relu)],
    sizes=[4096],
    dtypes=("float32", "bfloat16"),
    budget_s=0.02,
)
suite.workload(
    "layer_norm",
    setup=around_zero,
    variants=[Variant("F.layer_norm", lambda x: F.layer_norm(x, x.shape[-1:]))],
    sizes=[(16, 256)],
    dtypes=("float32", "bfloat16"),
    budget_s=0.02,
)
suite.workload(
    "matmul",
    setup=lambda ctx: (ctx.uniform(-1.0, 1.0), ctx.uniform(-1.0, 1.0)),
    variants=[Variant("torch.matmul", torch.matmul)],
    sizes=[(128, 128)],
    dtypes=("float32", "bfloat16"),
    reduction_size=lambda p: p.shape[1],
    budget_s=0.02,
)
