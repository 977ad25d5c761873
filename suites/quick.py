"""quick: a minute's tour of elementwise, reduction and matmul costs on one device.

``x.sqrt_()`` runs in place: before each sample, outside the timed region, its input
is restored into K copies and the sample makes one call on each (``extra.inplace``
says how many); the calls read what the restore left in cache (see the README).
"""

import numpy as np
import torch

from benchbench import Suite, Variant, pow2

suite = Suite("quick", description="sqrt, rsqrt, add, sum, matmul; float32", tags=["quick"])

SIZES = pow2(10, 22, step=2)


def positive(ctx):
    """Inputs in [0.5, 1.5): inside the domain of sqrt and rsqrt (no NaN slow paths)."""
    return ctx.uniform(0.5, 1.5)


def unary_bytes(p):
    return 2 * p.numel * p.itemsize  # read x, write the result


suite.workload(
    "sqrt",
    setup=positive,
    variants=[
        Variant("torch.sqrt", torch.sqrt),
        Variant("x.sqrt_()", lambda x: x.sqrt_(), inplace=True),
        Variant("numpy.sqrt", np.sqrt, numpy=True),
    ],
    sizes=SIZES,
    bytes=unary_bytes,
    flops=lambda p: p.numel,
    items=lambda p: p.numel,
)

suite.workload(
    "rsqrt",
    setup=positive,
    variants=[
        Variant("torch.rsqrt", torch.rsqrt),
        Variant("1 / torch.sqrt(x)", lambda x: 1 / torch.sqrt(x)),
    ],
    sizes=SIZES,
    bytes=unary_bytes,
    flops=lambda p: p.numel,
    items=lambda p: p.numel,
)

suite.workload(
    "add",
    setup=lambda ctx: (ctx.uniform(-1, 1), ctx.uniform(-1, 1)),
    variants=[Variant("torch.add", torch.add)],
    sizes=SIZES,
    bytes=lambda p: 3 * p.numel * p.itemsize,
    flops=lambda p: p.numel,
    items=lambda p: p.numel,
)

suite.workload(
    "sum",
    setup=positive,
    variants=[Variant("torch.sum", torch.sum)],
    sizes=SIZES,
    bytes=lambda p: p.numel * p.itemsize,
    flops=lambda p: p.numel,
    items=lambda p: p.numel,
)

suite.workload(
    "matmul",
    setup=lambda ctx: (ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)),
    variants=[Variant("torch.matmul", torch.matmul)],
    sizes=[(n, n) for n in (32, 64, 128, 256)],
    bytes=lambda p: 3 * p.numel * p.itemsize,
    flops=lambda p: 2 * p.shape[0] ** 3,
    reduction_size=lambda p: p.shape[1],  # each output sums n products
    description="square float32 matrices, n x n @ n x n",
)
