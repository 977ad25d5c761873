import torch

from benchbench import Suite, Variant

suite = Suite("tiny")

suite.workload(
    "sqrt",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[
        Variant("torch.sqrt", torch.sqrt),
        Variant("x.sqrt_()", lambda x: x.sqrt_(), inplace=True),
    ],
    sizes=[256, 4096],
    # one in-place point is enough to exercise the restore (and keeps the run short)
    exclude=lambda p: p.variant == "x.sqrt_()" and p.size < 4096,
    bytes=lambda p: 2 * p.numel * p.itemsize,
    flops=lambda p: p.numel,
    budget_s=0.05,
)
suite.workload(
    "sum",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.sum", torch.sum)],
    sizes=[1024],
    budget_s=0.05,
    derive=False,  # the tests of a point without a work model
)
