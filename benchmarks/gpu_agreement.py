"""The agreement table: benchbench beside ``triton.testing.do_bench`` and
``torch.utils.benchmark.Timer`` on 10 ops x 3 device-bound sizes, one ratio per cell.

- **Cold against do_bench.** ``do_bench(fn, return_mode="median")`` writes a buffer of
  256 MB before every call (its L2 flush) and times each call between its own events:
  our cold mode (``--cache cold``) flushes L2 before each call too, so the two time
  the same thing. Target: within 5 % at 27 of 30 cells or more.
- **Warm against Timer.** ``Timer.blocked_autorange`` times blocks of back-to-back
  calls on the host clock with a synchronize at each end, on warm caches: beside our
  warm mode. Listed, not judged.

Sizes are device-bound (20 µs a call and more on an H100): at launch-bound sizes a
call's time is the host's launch, whose speed differs by ±20 % between processes (the
first acceptance, BENCHMARKS.md), and no 5 % agreement could hold whatever is timed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: Cold within this of do_bench, at ``AGREE_CELLS`` of the cells or more.
AGREE_TOLERANCE = 0.05
AGREE_CELLS = 27
ELEMENTWISE_SIZES = (2**24, 2**25, 2**26)


@dataclass(frozen=True)
class Op:
    """One op of the table: its name, the call, the shape of its inputs at a size, and
    the sizes (elements of its first input; ``n`` of an n x n matmul)."""

    name: str
    fn: Callable[..., Any]
    shapes: Callable[[int], tuple[tuple[int, ...], ...]]
    sizes: tuple[int, ...]
    dtype: str = "float32"


def _one(n: int) -> tuple[tuple[int, ...], ...]:
    return ((n,),)


def _two(n: int) -> tuple[tuple[int, ...], ...]:
    return ((n,), (n,))


def _rows(width: int) -> Callable[[int], tuple[tuple[int, ...], ...]]:
    return lambda n: ((n // width, width),)


def _square(n: int) -> tuple[tuple[int, ...], ...]:
    return ((n, n), (n, n))


def ops(torch: Any) -> list[Op]:
    """The table's 10 ops: six elementwise, two reductions, a normalisation and a
    matmul, each at 3 sizes of 20 µs to ~1 ms a call on an H100."""
    functional = torch.nn.functional

    def layer_norm(x: Any) -> Any:
        return functional.layer_norm(x, x.shape[-1:])

    def softmax(x: Any) -> Any:
        return torch.softmax(x, dim=-1)

    def cumsum(x: Any) -> Any:
        return torch.cumsum(x, dim=0)

    return [
        Op("torch.sqrt", torch.sqrt, _one, ELEMENTWISE_SIZES),
        Op("torch.exp", torch.exp, _one, ELEMENTWISE_SIZES),
        Op("torch.sigmoid", torch.sigmoid, _one, ELEMENTWISE_SIZES),
        Op("F.gelu", functional.gelu, _one, ELEMENTWISE_SIZES),
        Op("torch.add", torch.add, _two, ELEMENTWISE_SIZES),
        Op("torch.sum", torch.sum, _one, ELEMENTWISE_SIZES),
        Op("torch.cumsum", cumsum, _one, ELEMENTWISE_SIZES),
        Op("torch.softmax (rows of 4096)", softmax, _rows(4096), ELEMENTWISE_SIZES),
        Op("F.layer_norm (rows of 1024)", layer_norm, _rows(1024), ELEMENTWISE_SIZES),
        Op("torch.mm bfloat16", torch.mm, _square, (2048, 4096, 8192), "bfloat16"),
    ]


@dataclass(frozen=True)
class Cell:
    """One op at one size: our cold and warm medians beside do_bench's and Timer's
    (seconds per call; None where that tool is missing)."""

    op: str
    size: str
    cold_s: float
    do_bench_s: float | None
    warm_s: float
    timer_s: float | None

    @property
    def cold_ratio(self) -> float | None:
        return None if not self.do_bench_s else self.cold_s / self.do_bench_s

    @property
    def warm_ratio(self) -> float | None:
        return None if not self.timer_s else self.warm_s / self.timer_s

    def agrees(self) -> bool:
        ratio = self.cold_ratio
        return ratio is not None and abs(ratio - 1.0) <= AGREE_TOLERANCE


def size_text(op: Op, n: int) -> str:
    """``2^24`` for a vector size, ``4096²`` for a square matmul."""
    if op.shapes is _square:
        return f"{n}²"
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


def verdict(cells: Sequence[Cell]) -> tuple[bool, str]:
    """(passed, the numbers): cold within 5 % of do_bench at 27 cells or more, every
    disagreement named with its ratio."""
    judged = [c for c in cells if c.cold_ratio is not None]
    agreeing = sum(1 for c in judged if c.agrees())
    needed = min(AGREE_CELLS, len(cells))
    passed = bool(judged) and len(judged) == len(cells) and agreeing >= needed
    off = [f"{c.op} {c.size} {c.cold_ratio:.3f}" for c in judged if not c.agrees()]
    timer = [c.warm_ratio for c in cells if c.warm_ratio is not None]
    numbers = f"cold within ±{AGREE_TOLERANCE:.0%} of do_bench at {agreeing}/{len(cells)} cells"
    numbers += f" (needs {needed})"
    if off:
        numbers += "; outside: " + ", ".join(off)
    if timer:
        numbers += (
            f"; warm / Timer median {statistics.median(timer):.3f} "
            f"({min(timer):.3f}-{max(timer):.3f})"
        )
    return passed, numbers


def _us(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e6:,.1f}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def markdown(cells: Sequence[Cell], heading: str) -> str:
    """The table as markdown to paste into docs/gpu.md: per cell our cold and warm
    medians, do_bench's and Timer's, and the two ratios (a ratio outside ±5 % bold)."""
    lines = [
        heading,
        "",
        "| op | size | cold (µs) | do_bench (µs) | cold / do_bench | warm (µs) | Timer (µs) "
        "| warm / Timer |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cells:
        cold = _ratio(c.cold_ratio)
        if c.cold_ratio is not None and not c.agrees():
            cold = f"**{cold}**"
        lines.append(
            f"| {c.op} | {c.size} | {_us(c.cold_s)} | {_us(c.do_bench_s)} | {cold} | "
            f"{_us(c.warm_s)} | {_us(c.timer_s)} | {_ratio(c.warm_ratio)} |"
        )
    return "\n".join(lines) + "\n"


# -- measurement (a GPU only) ---------------------------------------------------------


def inputs(torch: Any, op: Op, n: int, device: str) -> tuple[Any, ...]:
    """The op's inputs at size ``n``: uniform in [0.5, 1.5), as the engine's are."""
    dtype = getattr(torch, op.dtype)
    return tuple((torch.rand(shape, device=device) + 0.5).to(dtype) for shape in op.shapes(n))


def timer_seconds(torch: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
    """``torch.utils.benchmark.Timer``'s median per call (blocks of ~0.2 s in all)."""
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn(*args)", globals={"fn": fn, "args": args})
    return float(timer.blocked_autorange(min_run_time=0.2).median)


def measure_cell(
    torch: Any,
    op: Op,
    n: int,
    device: str,
    engine: Callable[..., float],
    do_bench: Callable[..., Any] | None,
) -> Cell:
    """One cell: ``engine(op, n, cache)`` gives our median per call in that cache mode."""
    args = inputs(torch, op, n, device)

    def call() -> Any:
        return op.fn(*args)

    reference = None if do_bench is None else float(do_bench(call, return_mode="median")) * 1e-3
    return Cell(
        op=op.name,
        size=size_text(op, n),
        cold_s=engine(op, n, "cold"),
        do_bench_s=reference,
        warm_s=engine(op, n, "warm"),
        timer_s=timer_seconds(torch, op.fn, args),
    )
