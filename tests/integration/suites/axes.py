import torch

from benchbench import Suite, Variant

suite = Suite("axes")


def mm_bytes(p):
    m, k, n = p.shape
    return 4 * (m * k + k * n + m * n)


# (m, k, n): a declared x-axis, k, the shape's dimension 1.
suite.workload(
    "mm k",
    setup=lambda ctx: (ctx.uniform(shape=ctx.shape[:2]), ctx.uniform(shape=ctx.shape[1:])),
    variants=[Variant("torch.mm", torch.mm), Variant("a @ b", lambda a, b: a @ b)],
    sizes=[(8, k, 8) for k in (8, 32, 128)],
    x=1,
    flops=lambda p: 2 * p.shape[0] * p.shape[1] * p.shape[2],
    budget_s=0.05,
    derive=False,  # FLOPs only: derived bytes would let the fit pick its unit by R²
)
# Three dimensions varying apart, no axis, bytes not growing with the size: no fit.
suite.workload(
    "mm mixed",
    setup=lambda ctx: (ctx.uniform(shape=ctx.shape[:2]), ctx.uniform(shape=ctx.shape[1:])),
    variants=[Variant("torch.mm", torch.mm)],
    sizes=[(16, 16, 16), (64, 2, 64), (32, 32, 32)],
    bytes=mm_bytes,
    budget_s=0.05,
    derive=False,  # derived FLOPs would grow with the size and give it a fit
)
