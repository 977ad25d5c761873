"""A tiny suite with backward modes and no declared work model (derived)."""

import numpy as np
import torch

from benchbench import Suite, Variant

suite = Suite("modes")

suite.workload(
    "mm",
    setup=lambda ctx: (ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)),
    variants=[
        Variant("torch.matmul", torch.matmul),
        Variant("numpy", np.matmul, numpy=True),
    ],
    sizes=[(16, 16)],
    modes=("fwd", "bwd", "fwd_bwd"),
    reduction_size=lambda p: p.shape[1],
    budget_s=0.05,
)
