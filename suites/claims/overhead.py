"""The claims the ``overhead`` suite's points answer (``suites/overhead.py``).

SEEDS C: the row-sum and batch-gather speedups, and broadcasting two Linears
versus tiling.
"""

from benchbench.analysis.claims import Claim, Finding, Rows, speedup


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


claims = [
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
