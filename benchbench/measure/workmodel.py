"""Work models for free: the FLOPs and bytes of a workload that declares none.

A workload without ``flops=`` or ``bytes=`` (and without ``derive=False``, which keeps
them None) gets them from one untimed call, made once
per point (by the point's first worker process, as the reference check is; the merge
of a point's processes keeps the first's figures):

- **FLOPs**: ``torch.utils.flop_counter.FlopCounterMode`` around the call. It counts
  the operators torch has a FLOP formula for (matmuls, convolutions, attention; a
  matmul of n x n by n x n counts ``2 n^3``) and nothing else: an elementwise op or a
  reduction counts 0. A count of zero therefore means "no FLOP model", never "no
  work", and leaves FLOPs None; a workload mixing both counts only its matmuls.
- **Bytes** (``fwd`` only): the bytes of the call's input and output tensors, each
  distinct storage once (an in-place call's output is its input; a view counts the
  storage it views, whole). In ``bwd`` and ``fwd_bwd`` what a backward pass moves
  depends on what the forward saved, which no count of inputs and outputs gives: bytes
  stay None there unless the workload declares them (``p["mode"]`` tells the modes
  apart).

**Which call.** The workload's first variant that runs here in torch (not NumPy, not
``torch.compile``d, allowed on the point's device and dtype), else the point's own:
every variant of a point then gets the same work model, as a hand-written one is, and
their FLOP/s compare like their times. In ``bwd`` the count covers the backward call
alone, in ``fwd_bwd`` forward and backward. The figures derived are listed in
``Result.extra["derived"]`` (``["flops", "bytes"]``) and marked ``*`` in tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchbench.core.values import Point
from benchbench.measure import backward
from benchbench.measure.inplace import fresh
from benchbench.suite.declare import Skip, Variant, Workload


@dataclass(frozen=True)
class Derived:
    """What one counted call gave: FLOPs, bytes (None: not derived), the variant counted,
    and why something asked for was not derived (a warning), if so."""

    flops: float | None = None
    bytes: float | None = None
    variant: str | None = None
    problem: str | None = None

    @property
    def names(self) -> list[str]:
        """The derived figures, as ``Result.extra["derived"]`` lists them."""
        return [name for name in ("flops", "bytes") if getattr(self, name) is not None]


def count_flops(call: Callable[[], object]) -> float | None:
    """FLOPs ``call()`` runs by torch's FLOP formulas; None when they count none."""
    counter = FlopCounterMode(display=False)
    with counter:
        call()
    total = counter.get_total_flops()
    return float(total) if total > 0 else None


def _tensors(values: Any) -> Iterator[torch.Tensor]:
    if isinstance(values, torch.Tensor):
        yield values
    elif isinstance(values, (tuple, list)):
        for value in values:
            yield from _tensors(value)


def storage_bytes(*values: Any) -> int:
    """Bytes of the distinct storages of the tensors in ``values`` (nested tuples and
    lists too), each counted once."""
    seen: dict[tuple[str, int], int] = {}
    for tensor in _tensors(values):
        storage = tensor.untyped_storage()
        key = (str(tensor.device), storage.data_ptr() or id(storage))
        seen[key] = max(seen.get(key, 0), storage.nbytes())
    return sum(seen.values())


def counted_variant(workload: Workload, point: Point) -> Variant:
    """The variant whose call is counted at ``point`` (module doc, "Which call")."""
    kind = point.device.partition(":")[0]
    for variant in workload.variants:
        if variant.numpy or variant.compile:
            continue
        if variant.devices is not None and kind not in variant.devices:
            continue
        if variant.dtypes is not None and point.dtype not in variant.dtypes:
            continue
        return variant
    return workload.variant(point.variant)


def derive(
    workload: Workload,
    point: Point,
    inputs: Sequence[Any],
    mode: str,
    *,
    flops: bool,
    bytes: bool,
) -> Derived:
    """Count one call of :func:`counted_variant` at ``point`` for the figures asked
    (``flops``, ``bytes``); never raises for a problem of the call."""
    bytes = bytes and mode == "fwd"
    if not (flops or bytes):
        return Derived()
    variant = counted_variant(workload, point)
    if variant.numpy:
        return Derived(variant=variant.name, problem="a NumPy variant runs no torch operator")
    try:
        if mode == "fwd":
            args = fresh(inputs) if variant.inplace else tuple(inputs)
            held: list[Any] = []
            if flops:
                counted = count_flops(lambda: held.append(variant.fn(*args)))
            else:  # bytes alone: no dispatch mode (its first use imports torch._dynamo)
                counted = None
                held.append(variant.fn(*args))
            moved = float(storage_bytes(args, held)) if bytes else None
            return Derived(counted, moved, variant.name)
        positions = backward.grad_positions(inputs)
        slot = backward.first_backward(
            variant.name, variant.fn, inputs, positions, point.input_seed()
        )
        for param in slot.params:
            param.grad = None
        if mode == "bwd":
            counted = count_flops(lambda: torch.autograd.backward(slot.outputs, slot.grads))
        else:
            counted = count_flops(
                lambda: torch.autograd.backward(
                    backward.differentiable(variant.fn(*slot.leaves)), slot.grads
                )
            )
        return Derived(counted, None, variant.name)
    except Skip as exc:
        return Derived(variant=variant.name, problem=str(exc))
    except Exception as exc:
        return Derived(variant=variant.name, problem=f"{type(exc).__name__}: {exc}")


def fill(
    workload: Workload,
    point: Point,
    inputs: Sequence[Any],
    mode: str,
    work: dict[str, float | None],
    warnings: list[str],
    extra: dict[str, Any],
) -> None:
    """Put into ``work`` the FLOPs and bytes ``workload`` does not declare, list them in
    ``extra["derived"]`` (the counted variant in ``extra["derived_from"]``), and warn
    when a count failed. Nothing when the workload says ``derive=False``."""
    if not workload.derive:
        return
    derived = derive(
        workload, point, inputs, mode, flops=workload.flops is None, bytes=workload.bytes is None
    )
    if derived.problem is not None:
        warnings.append(f"work model not derived: {derived.problem}")
    if derived.flops is not None:
        work["flops"] = derived.flops
    if derived.bytes is not None:
        work["bytes"] = derived.bytes
    if derived.names:
        extra["derived"] = derived.names
        extra["derived_from"] = derived.variant
