"""In-place variants: every timed call on freshly restored inputs, restored untimed.

An in-place variant (``x.sqrt_()``) overwrites its input, so a second call on the same
buffer computes on other data (the square root of a square root; NaN after ``log_``
of a result below zero). Each timed call must get the pristine inputs back, and the
copy that restores them must stay out of the timed region. Timing copy + call and
subtracting the copy's median, measured alone, made the figure a difference of two
larger times: the copy measured alone is not what it costs before a call that finds
its output in cache (``x.sqrt_()`` at 2^20-2^22 float32 read 179-192 % of the memory
ceiling), and a noisy difference at or below zero was reported as an error.

So the sample's untimed ``pre`` restores **K working copies** of the inputs from the
pristine ones (every tensor and array input, not only the first: an operator may
write to any of them), and the sample makes K calls, one on each copy
(:func:`~benchbench.measure.loops.make_rotating_loop`): no call sees what an earlier
call wrote, no copy is timed, and nothing is subtracted.

**K, the rule.** One restored call is timed :data:`PROBE_CALLS` times (after one
untimed call for lazy initialisation) and the least time ``t`` is kept (preemption
only lengthens a call). If ``t`` reaches the policy's ``min_sample_s`` (1 ms), one call
makes a sample: K = 1. Otherwise K = ceil(1.2 min_sample_s / t), the calls calibration
would have chosen with its 1.2x margin (a call timed alone carries the clock's cost
and a cold start: x.sqrt_() of 2^10 float32 probed at 2.5 µs and ran at 2.0 µs in a
sample here), and in ``rotate`` mode at least the copies that span twice the
last-level cache. K never exceeds :data:`MAX_COPIES` nor :data:`MAX_COPY_BYTES` of
copies; a sample then falls short of 1 ms and its result carries the ``sample < 1 ms``
warning.

**Cache state.** The restore writes the copies just before the calls, so a call reads
inputs the restore left in cache, as far as K copies fit: in ``warm`` mode an in-place
figure is an in-cache figure, like the back-to-back calls of an out-of-place variant.
In ``cold`` mode the flusher runs *after* the restore, so every call reads evicted
inputs (each copy is a different buffer: call k does not warm copy k+1). In ``rotate``
mode the copies span twice the last-level cache, so the copies called first were
evicted by the restores that came after them.

The engine's warm-up runs as the samples do (the ``pre`` before each chunk of at most
K calls), so no call at all, warm-up included, sees an input an earlier call wrote.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchbench.measure.loops import make_loop, make_rotating_loop
from benchbench.measure.policy import Block, Subject, Timer, gc_disabled

#: At most this many working copies: restoring 1,024 copies of 2^10 float32 values
#: takes ~2 ms untimed per sample here, beside 1 ms of calls.
MAX_COPIES = 1024

#: At most this many bytes of working copies (besides the pristine inputs).
MAX_COPY_BYTES = 256 * 2**20

#: Restored calls timed one at a time to estimate one call's time.
PROBE_CALLS = 5

#: K aims this much above the minimum sample time, as calibration does.
MARGIN = 1.2


def copy_value(value: Any) -> Any:
    """A copy of a tensor or array; any other argument is shared as it is."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def fresh(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """A copy of every tensor and array of ``inputs``."""
    return tuple(copy_value(x) for x in inputs)


def nbytes(inputs: Sequence[Any]) -> int:
    """Bytes of the tensors and arrays of ``inputs``."""
    return sum(x.nbytes for x in inputs if isinstance(x, (torch.Tensor, np.ndarray)))


def restorer(copies: Sequence[Sequence[Any]], pristine: Sequence[Any]) -> Callable[[], None]:
    """A callable that writes ``pristine`` over every copy, in order."""
    tensors: list[tuple[torch.Tensor, torch.Tensor]] = [
        (dst, src)
        for copy in copies
        for dst, src in zip(copy, pristine, strict=True)
        if isinstance(src, torch.Tensor)
    ]
    arrays: list[tuple[np.ndarray, np.ndarray]] = [
        (dst, src)
        for copy in copies
        for dst, src in zip(copy, pristine, strict=True)
        if isinstance(src, np.ndarray)
    ]

    def restore() -> None:
        for dst, src in tensors:
            dst.copy_(src)
        for out, value in arrays:
            np.copyto(out, value)

    return restore


def copies_for(call_s: float, copy_bytes: int, min_sample_s: float, at_least: int = 1) -> int:
    """K: working copies, and calls per sample, for calls of ``call_s`` (the rule above)."""
    if call_s >= min_sample_s:
        wanted = 1
    elif call_s <= 0:  # a clock too coarse to see one call
        wanted = MAX_COPIES
    else:
        wanted = math.ceil(MARGIN * min_sample_s / call_s)
    by_memory = MAX_COPY_BYTES // max(copy_bytes, 1)
    return max(1, min(max(wanted, at_least), MAX_COPIES, by_memory))


@dataclass(frozen=True)
class InplacePlan:
    """What to measure for an in-place variant: a subject whose ``pre`` restores its
    ``copies`` working copies, to be sampled at ``copies`` calls per sample."""

    subject: Subject
    copies: int
    call_s: float
    note: str


def plan(
    name: str,
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    *,
    timer: Timer,
    min_sample_s: float,
    outputs: str,
    evict: Callable[[], object] | None = None,
    at_least: int = 1,
) -> InplacePlan:
    """Probe one restored call of ``fn`` with ``timer`` and plan K copies of ``inputs``.

    ``inputs`` stay pristine (no call ever gets them). ``evict`` (the cold-cache
    flusher) runs after each restore; ``at_least`` is the least number of copies
    (``rotate`` mode).
    """
    first = fresh(inputs)
    restore_first = restorer([first], inputs)
    probe = make_loop(fn, first, outputs)
    restore_first()
    probe(1)  # lazy initialisation, never timed
    timer.sync()
    with gc_disabled():
        call_s = min(timer.measure([Block(probe, 1, restore_first)] * PROBE_CALLS))
    k = copies_for(call_s, nbytes(inputs), min_sample_s, at_least)
    copies = [first, *(fresh(inputs) for _ in range(k - 1))]
    restore = restorer(copies, inputs)
    if evict is None:
        pre: Callable[[], object] = restore
        where = "the calls read what the restore left in cache"
    else:
        flush = evict

        def pre() -> None:
            restore()
            flush()

        where = "evicted after the restore (cold)"
    size = nbytes(inputs) * k
    note = (
        f"restored untimed before each sample: {k} {'copy' if k == 1 else 'copies'} "
        f"({size / 2**20:.3g} MiB), one call on each; {where}"
    )
    loop = make_rotating_loop(fn, copies, outputs)
    return InplacePlan(Subject(name, loop, pre), k, call_s, note)
