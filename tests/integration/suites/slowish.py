# Three quick points, then points that sample for a minute each unless stopped:
# the interrupt tests signal the run while it is inside one of those. No work model
# (derive=False): each run's zygote then skips the first dispatch mode (~2.4 s).
import torch

from benchbench import Suite, Variant

suite = Suite("slowish")
suite.workload(
    "quick",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.sqrt", torch.sqrt)],
    sizes=[256, 512, 1024],
    budget_s=0.05,
    derive=False,
)
suite.workload(
    "long",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.sqrt", torch.sqrt)],
    sizes=[2048, 4096],
    budget_s=60.0,
    derive=False,
)
