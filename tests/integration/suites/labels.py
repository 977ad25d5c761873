# Many points whose names and numbers make a table wider than 80 columns: two dtypes
# of each workload, 2-D shapes and a workload whose setup fails. No torch import: the
# CLI process loads this file.
from benchbench import Suite, Variant


def broken_setup(ctx):
    raise RuntimeError("setup of layer_norm_broken refuses on purpose: the input is never made")


suite = Suite("labels")
suite.workload(
    "layer_norm_rowwise",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[
        Variant("torch.nn.functional.layer_norm", lambda x: x - x.mean(-1, keepdim=True)),
        Variant("manual_mean_and_variance", lambda x: x - x.sum(-1, keepdim=True) / x.shape[-1]),
    ],
    sizes=[(4, 64), (8, 64), (16, 64)],
    dtypes=("float32", "float64"),
    bytes=lambda p: 2 * p.numel * p.itemsize,
    budget_s=0.02,
)
suite.workload(
    "layer_norm_broken",
    setup=broken_setup,
    variants=[Variant("torch.nn.functional.layer_norm", lambda x: x)],
    sizes=[1024],
    budget_s=0.02,
)
