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
from benchbench.analysis.claims import Claim, Finding, Rows, speedup

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


def _less_memory(rows: Rows) -> Finding:
    # The published claim is about the forward; the fwd_bwd points are measured beside it.
    tiled_row = rows.one("tile vs broadcast", "cat(tile) + Linear", mode="fwd")
    if isinstance(tiled_row, Finding):
        return tiled_row
    broad = rows.one(
        "tile vs broadcast", "two Linears + broadcast", size=tiled_row["size"], mode="fwd"
    )
    if isinstance(broad, Finding):
        return broad
    timing = speedup(
        "tile vs broadcast", "cat(tile) + Linear", "two Linears + broadcast", low=1.0, mode="fwd"
    )(rows)
    mem_t, mem_b = tiled_row["peak_memory_bytes"], broad["peak_memory_bytes"]
    if mem_t is None or mem_b is None:
        return Finding("not measurable here", reason="peak memory was not recorded")
    less = mem_b < mem_t
    verdict = timing.verdict if less else "does not hold"
    figure = f"{timing.figure}; peak memory {mem_t / 1024:.0f} KiB tiled vs {mem_b / 1024:.0f} KiB"
    return Finding(
        verdict, figure, timing.value, timing.ci, reason="faster (CI > 1x) and less memory"
    )


suite.claims += [
    Claim(
        "C-unbind",
        "C",
        "Summing the rows of a 500x10 matrix: a loop over torch.unbind is about 30 % faster "
        "than a loop of slices z += x[i]",
        "overhead/row sum: loop z += x[i] vs loop over torch.unbind, float32 cpu",
        "overhead",
        ("row sum",),
        speedup("row sum", "loop of slices", "loop over torch.unbind", low=1.15, high=1.5),
    ),
    Claim(
        "C-sum",
        "C",
        "torch.sum(x, dim=0) is about 100x faster than the loop of slices",
        "overhead/row sum: loop z += x[i] vs torch.sum(x, dim=0)",
        "overhead",
        ("row sum",),
        speedup("row sum", "loop of slices", "torch.sum(x, dim=0)", low=50, high=200),
    ),
    Claim(
        "C-script",
        "C",
        "Batch gather: the loop under torch.jit.script is about 10 % faster than the Python loop",
        "overhead/batch gather: loop + torch.stack vs torch.jit.script loop",
        "overhead",
        ("batch gather",),
        speedup("batch gather", "loop + torch.stack", "torch.jit.script loop", low=1.05, high=1.2),
    ),
    Claim(
        "C-vectorise",
        "C",
        "Batch gather: the vectorised flat-index version is about 100x faster than the loop",
        "overhead/batch gather: loop + torch.stack vs flat index",
        "overhead",
        ("batch gather",),
        speedup("batch gather", "loop + torch.stack", "flat index", low=50, high=200),
    ),
    Claim(
        "C-broadcast",
        "C",
        "Broadcasting two Linears is faster and uses less memory than tiling, concatenating "
        "and one Linear",
        "overhead/tile vs broadcast: time ratio and peak memory of one call",
        "overhead",
        ("tile vs broadcast",),
        _less_memory,
    ),
]
