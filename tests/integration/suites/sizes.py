import torch

from benchbench import Suite, Variant

suite = Suite("sizes")

suite.workload(
    "sqrt",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[
        Variant("torch.sqrt", torch.sqrt),
        Variant("x ** 0.5", lambda x: x**0.5),
    ],
    sizes=[1024, 16384, 262144],
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
    derive=False,  # the views' tests of a point without a work model
)
