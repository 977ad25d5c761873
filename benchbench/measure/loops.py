"""The loops a timed block runs: ``loop(n)`` calls the workload ``n`` times.

Output lifetime is a recorded choice (``outputs``, one of
:data:`~benchbench.core.values.OUTPUT_MODES`):

- ``keep`` (the default): the loop holds the previous call's output until the next
  call has returned, as ``y = f(x)`` inside a model's loop does, so two outputs are
  alive at once and the allocator must find the new output a block other than the one
  it just handed out. The last output of a block is held until the next block (of the
  same loop) runs, so the first call of a sample sees it too.
- ``drop``: each output is released as soon as its call returns; the allocator hands
  the next call the same block, still in cache. Where outputs are cache-sized this is
  the faster regime: ``torch.add`` of 2^20 float32 ran 16-41 % faster than under
  ``keep`` here, one thread (``benchmarks/outputs_bench.py``, BENCHMARKS.md); at
  8 MiB tensors both stream from memory alike.

A ``keep`` loop's last output is readable (:func:`held_output`): the point checks the
timed path's own result against its reference after sampling.

Both loops are compiled like ``timeit``'s: the callable and its arguments bound as
locals, no ``*args`` unpacking and no attribute look-ups per call. ``keep`` costs one
local store per call (the output is bound to a name instead of popped) and two list
operations per block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import cycle as _cycle
from itertools import islice as _islice
from itertools import repeat as _repeat

from benchbench.core.values import DEFAULT_OUTPUTS, OUTPUT_MODES


def _check(outputs: str) -> None:
    if outputs not in OUTPUT_MODES:
        raise ValueError(f"outputs must be one of {', '.join(OUTPUT_MODES)}, got {outputs!r}")


def make_loop(
    fn: Callable[..., object], args: Sequence[object], outputs: str = DEFAULT_OUTPUTS
) -> Callable[[int], None]:
    """The cheapest Python loop calling ``fn(*args)`` ``n`` times, outputs kept or dropped.

    An empty callable costs the same per call as under ``timeit`` (BENCHMARKS.md).
    """
    _check(outputs)
    names = [f"_a{i}" for i in range(len(args))]
    params = "".join(f", {n}={n}" for n in names)
    call = f"_fn({', '.join(names)})"
    if outputs == "keep":
        # ``_out = call`` rebinds only after the call returned: the previous output
        # is alive during the call. ``_held`` carries the last one across blocks.
        source = (
            f"def _loop(_n, _fn=_fn, _repeat=_repeat, _held=_held{params}):\n"
            f"    _out = _held[0]\n"
            f"    _held[0] = None\n"
            f"    for _ in _repeat(None, _n):\n"
            f"        _out = {call}\n"
            f"    _held[0] = _out\n"
        )
    else:
        source = (
            f"def _loop(_n, _fn=_fn, _repeat=_repeat{params}):\n"
            f"    for _ in _repeat(None, _n):\n"
            f"        {call}\n"
        )
    namespace: dict[str, object] = {
        "_fn": fn,
        "_repeat": _repeat,
        "_held": [None],
        **dict(zip(names, args, strict=True)),
    }
    exec(compile(source, "<benchbench loop>", "exec"), namespace)
    loop = namespace["_loop"]
    if outputs == "keep":
        loop.held = namespace["_held"]  # type: ignore[attr-defined]  # see held_output
    return loop  # type: ignore[return-value]


def held_output(loop: Callable[[int], object]) -> tuple[object] | None:
    """``(the last output a keep loop returned,)``, or None for a loop that holds none
    (``drop``, a graph replay, an in-place plan): the timed path's own result, which the
    point checks against its reference after sampling."""
    held = getattr(loop, "held", None)
    return (held[0],) if held is not None and held[0] is not None else None


def make_rotating_loop(
    fn: Callable[..., object], arg_sets: Sequence[Sequence[object]], outputs: str = DEFAULT_OUTPUTS
) -> Callable[[int], None]:
    """Loop that cycles through several copies of the inputs (cache mode ``rotate``,
    in-place variants); the cycle goes on where the previous block left it."""
    _check(outputs)
    sets = [tuple(a) for a in arg_sets]
    cycle = _cycle(sets)
    if outputs == "drop":

        def _drop(_n: int) -> None:
            for args in _islice(cycle, _n):
                fn(*args)

        return _drop
    held: list[object] = [None]

    def _keep(_n: int) -> None:
        out = held[0]
        held[0] = None
        for args in _islice(cycle, _n):
            out = fn(*args)
        held[0] = out

    _keep.held = held  # type: ignore[attr-defined]
    return _keep
