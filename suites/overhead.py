"""overhead: what Python loops over small tensors cost (SEEDS C, "writing efficient PyTorch").

- ``row sum``: summing the rows of a 500x10 matrix with a loop of slices
  (``z += x[i]``), a loop over ``torch.unbind(x)``, and ``torch.sum(x, dim=0)``.
- ``batch gather``: ``out[i] = inp[i, idx[i]]`` as a Python loop with
  ``torch.stack``, the same loop under ``torch.jit.script``, and one flat-index
  gather over ``inp.view(B * N, D)``.
- ``tile vs broadcast``: a Linear over ``cat([x, tile(y)])`` versus two Linears
  whose outputs are added with broadcasting (the weights are the two halves of the
  one Linear's, so both compute the same thing); the peak memory of one call is
  stored beside the time. Measured forward (``mode=fwd``, the claim) and as a training
  step (``mode=fwd_bwd``: forward and backward, gradients checked against float64).
  The other workloads stay forward only: their claims are about Python overhead, not
  training.
"""

import warnings

import torch

from benchbench import Suite, Variant
from benchbench.analysis.claims import read_claims

suite = Suite("overhead", description="Python loops versus vectorised PyTorch")

QUICK = ("quick", "nightly", "full")


def row_sum_slices(x):
    z = torch.zeros_like(x[0])
    for i in range(x.shape[0]):
        z += x[i]
    return z


def row_sum_unbind(x):
    z = torch.zeros_like(x[0])
    for row in torch.unbind(x):
        z += row
    return z


suite.workload(
    "row sum",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[
        Variant("torch.sum(x, dim=0)", lambda x: torch.sum(x, dim=0)),
        Variant("loop of slices", row_sum_slices, description="z += x[i] for each row i"),
        Variant("loop over torch.unbind", row_sum_unbind),
    ],
    sizes=[(500, 10)],
    tags=QUICK,
    bytes=lambda p: p.numel * p.itemsize,
    flops=lambda p: p.numel,
    description="sum of the 500 rows of a 500x10 matrix",
)


def gather_loop(inp, idx):
    return torch.stack([inp[i, idx[i]] for i in range(inp.shape[0])])


def _gather_loop_typed(inp: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = []
    for i in range(inp.shape[0]):
        out.append(inp[i, idx[i]])
    return torch.stack(out)


# torch.jit.script is deprecated (torch 2.13 warns on every use); the claim is about it,
# so it is measured for as long as torch ships it.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    gather_loop_scripted = torch.jit.script(_gather_loop_typed)


def gather_flat(inp, idx):
    batch, rows, width = inp.shape
    offsets = torch.arange(batch, device=inp.device).unsqueeze(1) * rows
    return inp.reshape(batch * rows, width)[idx + offsets]


GATHER_K = 16  # indices gathered per batch entry


def gather_setup(ctx):
    batch, rows, _width = ctx.shape
    return ctx.uniform(0.5, 1.5), ctx.randint(0, rows, shape=(batch, GATHER_K))


suite.workload(
    "batch gather",
    setup=gather_setup,
    variants=[
        Variant("loop + torch.stack", gather_loop),
        Variant("torch.jit.script loop", gather_loop_scripted),
        Variant("flat index", gather_flat),
    ],
    sizes=[(256, 64, 32)],
    tags=QUICK,
    bytes=lambda p: 2 * p.shape[0] * GATHER_K * p.shape[2] * p.itemsize,
    items=lambda p: p.shape[0],
    description="out[i] = inp[i, idx[i]] for inp of shape (B, N, D), idx of shape (B, 16)",
)


def tile_setup(ctx):
    batch, _rows, width = ctx.shape
    out = width
    return (
        ctx.uniform(0.5, 1.5),  # x: (B, N, D)
        ctx.uniform(0.5, 1.5, shape=(batch, width)),  # y: (B, D), one row per batch entry
        ctx.uniform(0.0, 0.1, shape=(out, 2 * width)),  # W of Linear(2D -> D)
        ctx.uniform(0.0, 0.1, shape=(out,)),  # bias
    )


def tiled(x, y, w, b):
    tiled_y = y.unsqueeze(1).expand(-1, x.shape[1], -1)
    return torch.nn.functional.linear(torch.cat([x, tiled_y], dim=-1), w, b)


def broadcast(x, y, w, b):
    width = x.shape[-1]
    left = torch.nn.functional.linear(x, w[:, :width])
    right = torch.nn.functional.linear(y, w[:, width:], b)
    return left + right.unsqueeze(1)


suite.workload(
    "tile vs broadcast",
    setup=tile_setup,
    variants=[
        Variant("cat(tile) + Linear", tiled),
        Variant("two Linears + broadcast", broadcast),
    ],
    sizes=[(64, 128, 64)],
    tags=QUICK,
    # A Linear is trained: fwd_bwd is its forward and backward (gradients of x, y and
    # the weights), where the broadcast form's backward sums over the N rows it broadcast.
    modes=("fwd", "fwd_bwd"),
    # The tiled form's work: one matmul forward, two more (dW, dX) backward.
    flops=lambda p: (
        (3 if p["mode"] == "fwd_bwd" else 1)
        * 2
        * p.shape[0]
        * p.shape[1]
        * 2
        * p.shape[2]
        * p.shape[2]
    ),
    # Each output sums 2D products; a weight's gradient sums over the B * N rows.
    reduction_size=lambda p: p.shape[0] * p.shape[1] if p["mode"] == "fwd_bwd" else 2 * p.shape[2],
    description="Linear over cat([x, tile(y)]) vs Linear(x) + Linear(y) broadcast",
)

# The claims these points answer: suites/claims/overhead.py (no torch there, so that
# `benchbench claims` reads them without loading this file).
suite.claims += read_claims(__file__)
