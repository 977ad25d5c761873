"""Capturing the aten operator calls a callable makes, to benchmark them one by one.

``capture(fn, *args, **kwargs)`` runs ``fn`` once under a
:class:`~torch.utils._python_dispatch.TorchDispatchMode` and records every aten call:
the overload (``aten.addmm.default``), each tensor argument's shape, strides, storage
offset, dtype and device, the value range of integer and floating tensors (so that
regenerated indices stay inside an embedding table, and a ReLU's output stays
non-negative), the scalar and list arguments, and how many times that exact call
happened. Calls that differ only in their values are one call (their ranges merged).

View and metadata ops (``view``, ``t``, ``expand``, ``detach``...: every op whose
outputs alias an input without writing it) cost dispatch, not memory traffic: they
are kept apart in :attr:`Capture.views` and never timed.

:mod:`benchbench.suite.captured` turns a :class:`Capture` into workloads;
:mod:`benchbench.suite.capture_file` writes it as a suite file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchbench.core.errors import UsageError
from benchbench.core.values import ITEMSIZE

#: The literal argument values a call may carry and a suite file can spell.
_LITERALS = (bool, int, float, complex, str, type(None))
_TORCH_LITERALS = (torch.dtype, torch.device, torch.layout, torch.memory_format)

#: Aliasing ops the schema does not mark as views but that move no data.
#: ``_unsafe_view`` returns a fresh tensor sharing its input's storage (no alias in
#: its schema, so that autograd can treat it as a new tensor), and copies nothing.
_METADATA_OPS = frozenset(
    {"aten._unsafe_view", "aten.lift_fresh", "aten.sym_size", "aten.sym_stride", "aten.size"}
)


class CaptureError(UsageError):
    """The callable could not be captured (it raised); the message says which and why."""


@dataclass(frozen=True)
class TensorSpec:
    """What a tensor argument looked like: enough to build a fresh one like it.

    ``low``/``high`` is the range of its values (integer and floating tensors; None
    for bool, complex, empty or non-finite ones).
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    device: str
    offset: int = 0
    low: float | None = None
    high: float | None = None

    @property
    def storage_numel(self) -> int:
        """Elements of storage the tensor spans (an expanded bias spans its row only)."""
        if any(s == 0 for s in self.shape):
            return 0
        return 1 + sum((s - 1) * abs(st) for s, st in zip(self.shape, self.stride, strict=True))

    @property
    def nbytes(self) -> int:
        """Bytes of the storage the tensor reads or writes (its span, not the offset)."""
        return self.storage_numel * ITEMSIZE.get(self.dtype, 4)

    def same_layout(self) -> tuple[Any, ...]:
        """The identity of a call's argument: everything but the value range."""
        return (self.shape, self.stride, self.dtype, self.device, self.offset)

    def merged(self, other: TensorSpec) -> TensorSpec:
        """This spec with its value range widened to cover ``other``'s."""
        if self.low is None or other.low is None or self.high is None or other.high is None:
            return self
        return replace(self, low=min(self.low, other.low), high=max(self.high, other.high))


@dataclass(frozen=True)
class Opaque:
    """An argument that cannot be regenerated (a generator, a sparse tensor, a
    script object); the call that holds one is skipped with ``why``."""

    why: str


@dataclass(frozen=True)
class CallRecord:
    """One distinct aten call and how many times it happened.

    ``args`` and ``kwargs`` hold literals, torch dtypes/devices/layouts, lists and
    tuples of those, :class:`TensorSpec` and :class:`Opaque`. ``mutates``: the op
    writes one of its inputs (``add_``, batch norm's running statistics).
    ``output_bytes``: bytes of the tensors it returned.
    """

    op: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()
    count: int = 1
    mutates: bool = False
    output_bytes: int = 0

    @property
    def packet(self) -> str:
        """The op without its overload: ``aten.addmm`` for ``aten.addmm.default``."""
        return self.op.rsplit(".", 1)[0] if self.op.count(".") >= 2 else self.op

    @property
    def tensors(self) -> list[TensorSpec]:
        """Every tensor argument, lists flattened, in order."""
        return [v for v in _flatten((*self.args, *(v for _, v in self.kwargs))) if _is_spec(v)]

    @property
    def unsupported(self) -> str | None:
        """Why the call's inputs cannot be regenerated, or None."""
        for value in _flatten((*self.args, *(v for _, v in self.kwargs))):
            if isinstance(value, Opaque):
                return f"{self.op}: cannot regenerate an argument: {value.why}"
        return None

    @property
    def input_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    def key(self) -> tuple[Any, ...]:
        return (self.op, _layout_key(self.args), _layout_key(self.kwargs))


@dataclass(frozen=True)
class Capture:
    """The aten calls of one run of a callable: timed ``calls`` and untimed ``views``,
    each in order of first occurrence."""

    name: str
    calls: tuple[CallRecord, ...] = ()
    views: tuple[CallRecord, ...] = ()

    @property
    def total_calls(self) -> int:
        return sum(c.count for c in self.calls)

    def summary(self) -> list[tuple[str, int]]:
        """(op, calls) per op overload, most called first: what a person reads first."""
        return _per_op(self.calls)

    def view_summary(self) -> list[tuple[str, int]]:
        """(op, calls) per view or metadata op overload, most called first."""
        return _per_op(self.views)


def _per_op(calls: Iterable[CallRecord]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.op] = counts.get(call.op, 0) + call.count
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _is_spec(value: Any) -> bool:
    return isinstance(value, TensorSpec)


def _flatten(values: Iterable[Any]) -> Iterable[Any]:
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from _flatten(value)
        else:
            yield value


def _layout_key(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        return ("T", value.same_layout())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_layout_key(v) for v in value))
    if isinstance(value, float) and value != value:
        return ("nan",)
    return (type(value).__name__, repr(value))


def _merge_values(a: Any, b: Any) -> Any:
    if isinstance(a, TensorSpec) and isinstance(b, TensorSpec):
        return a.merged(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a)(_merge_values(x, y) for x, y in zip(a, b, strict=True))
    return a


def _is_fake(tensor: torch.Tensor) -> bool:
    # Importing torch._subclasses costs ~1 s (decompositions, meta registrations) in
    # every worker that loads a captured suite; no fake tensor exists before it is.
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    return fake is not None and bool(fake.is_fake(tensor))


def tensor_spec(tensor: torch.Tensor) -> TensorSpec | Opaque:
    """The spec of ``tensor`` (value range measured here), or why it cannot have one."""
    if tensor.layout != torch.strided:
        return Opaque(f"a {tensor.layout} tensor (only dense tensors are regenerated)")
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in ITEMSIZE:
        return Opaque(f"a tensor of dtype {dtype} (known: {', '.join(ITEMSIZE)})")
    if tensor.is_quantized or tensor.device.type == "meta":
        return Opaque(f"a {tensor.device.type} or quantized tensor has no values to regenerate")
    low = high = None
    # A fake tensor (FakeTensorMode: shapes without values, no compute) has no range.
    if tensor.numel() and dtype not in ("bool", "complex64", "complex128") and not _is_fake(tensor):
        lo, hi = torch.aminmax(tensor.detach())
        low, high = float(lo), float(hi)
        if not (abs(low) < float("inf") and abs(high) < float("inf")):
            low = high = None
    return TensorSpec(
        shape=tuple(tensor.shape),
        stride=tuple(tensor.stride()),
        dtype=dtype,
        device=str(tensor.device),
        offset=int(tensor.storage_offset()),
        low=low,
        high=high,
    )


def describe(value: Any) -> Any:
    """An argument as literal data: specs for tensors, :class:`Opaque` for the rest."""
    if isinstance(value, torch.Tensor):
        return tensor_spec(value)
    if isinstance(value, (list, tuple)):
        return type(value)(describe(v) for v in value)
    if isinstance(value, _LITERALS + _TORCH_LITERALS):
        return value
    if isinstance(value, torch.Generator):
        return Opaque("a torch.Generator (its state is not a literal)")
    return Opaque(f"an opaque {type(value).__name__} object")


def is_view_op(func: Any) -> bool:
    """True for ops whose outputs alias an input they do not write: views and metadata."""
    if str(func.overloadpacket) in _METADATA_OPS or str(func) in _METADATA_OPS:
        return True
    returns = func._schema.returns
    if not returns:
        return False
    return all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def _output_bytes(out: Any) -> int:
    total = 0
    for value in _flatten(out if isinstance(out, (list, tuple)) else (out,)):
        if isinstance(value, torch.Tensor) and value.layout == torch.strided:
            spec = tensor_spec(value) if value.device.type != "meta" else None
            total += spec.nbytes if isinstance(spec, TensorSpec) else 0
    return total


class _Recorder(TorchDispatchMode):
    """Records each call before running it (an in-place op's inputs as they came in)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[tuple[Any, ...], CallRecord] = {}
        self.views: dict[tuple[Any, ...], CallRecord] = {}

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        record = CallRecord(
            op=str(func),
            args=describe(tuple(args)),
            kwargs=tuple((k, describe(v)) for k, v in kwargs.items()),
            mutates=bool(func._schema.is_mutable),
        )
        out = func(*args, **kwargs)
        table = self.views if is_view_op(func) else self.calls
        key = record.key()
        seen = table.get(key)
        if seen is None:
            table[key] = replace(record, output_bytes=_output_bytes(out))
        else:
            table[key] = replace(
                seen,
                count=seen.count + 1,
                args=_merge_values(seen.args, record.args),
                kwargs=_merge_values(seen.kwargs, record.kwargs),
            )
        return out


def capture(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Capture:
    """Run ``fn(*args, **kwargs)`` once and record its aten calls (see the module doc).

    ``out.sum().backward()`` inside ``fn`` records the backward's calls too. A
    callable that raises is a :class:`CaptureError` naming it and the exception.
    """
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    if not callable(fn):
        raise CaptureError(f"capture: {fn!r} is not callable; pass a function or an nn.Module")
    recorder = _Recorder()
    try:
        with recorder:
            fn(*args, **kwargs)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        raise CaptureError(
            f"capture of {name!r}: the callable raised {type(exc).__name__}: "
            f"{text[0] if text else ''}; fix it so that one call of it runs"
        ) from exc
    return Capture(
        name=name, calls=tuple(recorder.calls.values()), views=tuple(recorder.views.values())
    )


def number_calls(calls: Iterable[CallRecord]) -> list[tuple[str, CallRecord]]:
    """Workload names for calls: the op and its index among the op's calls, 1-based
    in order of first occurrence (``aten.addmm#1``, ``aten.addmm#2``)."""
    seen: dict[str, int] = {}
    out: list[tuple[str, CallRecord]] = []
    for call in calls:
        seen[call.packet] = seen.get(call.packet, 0) + 1
        out.append((f"{call.packet}#{seen[call.packet]}", call))
    return out


__all__ = [
    "CallRecord",
    "Capture",
    "CaptureError",
    "Opaque",
    "TensorSpec",
    "capture",
    "describe",
    "is_view_op",
    "number_calls",
]
