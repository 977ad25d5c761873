"""Captured calls as workloads: inputs regenerated from what :mod:`.capture` recorded.

Each distinct call becomes one workload named after its op (``aten.addmm#3``) with
one variant, the op overload itself, and two parameters: ``capture`` (which captured
callable it came from) and ``count`` (how many times the callable made that call;
the breakdown weighs its median by it). A workload ``whole`` runs the original
callable (parameter ``capture``, no ``count``), so that the breakdown can put the sum
of the parts beside it. With ``compile=True`` a workload ``whole-compiled`` runs the
callable through ``torch.compile`` (variant :data:`COMPILED_VARIANT`, compile time in
the point's ``extra.compile_s``, never in its samples): the breakdown puts it beside
the eager whole, with the calls after which compiling pays. It is a workload of its
own, not a second variant of ``whole``, so that a tag can leave it out: compiling a
layer takes 20-90 s on our 2-core CPU, in every process that measures it.

Inputs are regenerated from the recorded metadata with the point's seeded generator:
a floating tensor whose values were all >= 0 gets uniform values over the recorded
range (a ReLU's output stays non-negative), any other floating tensor normal values
clamped to the recorded range, an integer tensor integers within its recorded range
(an embedding lookup stays inside its table), a bool tensor random bits. Strides and
storage offsets are honoured (``as_strided`` over a buffer spanning the storage), so
a transposed weight or an expanded bias is read as the model read it. A call whose
arguments cannot be regenerated (a generator, a sparse tensor) is skipped with the
reason. Tensors of the capture's main dtype and device follow the point's, so
``run --dtype bfloat16`` or ``--device cuda`` replays a float32 CPU capture there.

Captured calls are not checked against a reference (``check=False``): the op is its
own reference. Work model: ``bytes`` = input plus output tensor bytes (storage spans);
FLOPs are not declared, so they are derived from one untimed call
(:mod:`benchbench.measure.workmodel`: matmuls, convolutions, attention).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from benchbench.core.values import COMPILED_VARIANT, ITEMSIZE, Point
from benchbench.suite.capture import (
    CallRecord,
    Capture,
    CaptureError,
    Opaque,
    TensorSpec,
    capture,
    number_calls,
)
from benchbench.suite.capture_cache import cached_capture
from benchbench.suite.declare import Skip, Suite, Variant
from benchbench.suite.inputs import SetupContext

#: Seed of the global generator before a ``whole`` workload's input factory runs (and
#: before the capture's), so both see the same inputs.
FACTORY_SEED = 0

TAG = "captured"


def T(
    shape: Sequence[int],
    stride: Sequence[int],
    dtype: str,
    device: str = "cpu",
    *,
    offset: int = 0,
    low: float | None = None,
    high: float | None = None,
) -> TensorSpec:
    """A tensor argument as a suite file spells it: ``T((8, 256), (256, 1), "float32")``."""
    return TensorSpec(tuple(shape), tuple(stride), dtype, device, offset, low, high)


def call(
    op: str,
    *,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    count: int = 1,
    mutates: bool = False,
    output_bytes: int = 0,
) -> CallRecord:
    """One captured call as a suite file spells it."""
    return CallRecord(op, tuple(args), tuple((kwargs or {}).items()), count, mutates, output_bytes)


def resolve_op(name: str) -> Any:
    """``torch.ops.aten.addmm.default`` for ``"aten.addmm.default"``."""
    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.rpartition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), packet), overload)
    except (AttributeError, RuntimeError):
        raise Skip(f"{name}: no such operator in torch {torch.__version__}") from None


def main_dtype_device(call_: CallRecord) -> tuple[str, str]:
    """The dtype and device of the call's first floating tensor (else its first tensor)."""
    tensors = call_.tensors
    floating = [t for t in tensors if t.dtype.startswith(("float", "bfloat"))]
    first = (floating or tensors or [TensorSpec((1,), (1,), "float32", "cpu")])[0]
    return first.dtype, first.device


def capture_dtype_device(captured: Capture) -> tuple[str, str]:
    """The dtype and device of a capture: those of its first call on floating tensors."""
    mains = [main_dtype_device(c) for c in captured.calls if c.tensors]
    floating = [m for m in mains if m[0].startswith(("float", "bfloat"))]
    return (floating or mains or [("float32", "cpu")])[0]


def regenerate(ctx: SetupContext, spec: TensorSpec, dtype: str, device: str) -> torch.Tensor:
    """A fresh tensor like ``spec`` (see the module doc), in ``dtype`` on ``device``."""
    numel = spec.storage_numel + spec.offset
    shape = (numel,)
    if dtype == "bool":
        flat = ctx.uniform(0, 1, shape=shape, dtype=torch.float64) < 0.5
    elif dtype in ("float32", "float64", "float16", "bfloat16", "complex64", "complex128"):
        low, high = spec.low, spec.high
        if low is not None and high is not None and low >= 0:
            flat = ctx.uniform(low, high, shape=shape, dtype=torch.float64)
        else:
            flat = ctx.normal(shape=shape, dtype=torch.float64)
            if low is not None and high is not None:
                flat = flat.clamp(low, high)
    else:
        low = int(spec.low) if spec.low is not None else 0
        high = int(spec.high) if spec.high is not None else 0
        flat = torch.randint(low, high + 1, shape, generator=ctx.generator)
    flat = flat.to(getattr(torch, dtype)).to(device)
    return flat.as_strided(spec.shape, spec.stride, spec.offset)


def _fill(template: Any, tensors: Any) -> Any:
    if isinstance(template, TensorSpec):
        return next(tensors)
    if isinstance(template, (list, tuple)):
        return type(template)(_fill(v, tensors) for v in template)
    return template


class Replay:
    """The timed call: ``op(*args, **kwargs)`` with the regenerated tensors put back in
    their places. Top-level tensors (the usual case) are placed by index, ~1 µs."""

    def __init__(self, call_: CallRecord) -> None:
        self.op = resolve_op(call_.op)
        self.args = call_.args
        self.kwargs = dict(call_.kwargs)
        nested = any(
            isinstance(v, (list, tuple)) and any(isinstance(x, TensorSpec) for x in v)
            for v in (*self.args, *self.kwargs.values())
        )
        self.flat = not nested and not any(isinstance(v, TensorSpec) for v in self.kwargs.values())
        self.slots = [i for i, v in enumerate(self.args) if isinstance(v, TensorSpec)]

    def __call__(self, *tensors: torch.Tensor) -> Any:
        if self.flat:
            args = list(self.args)
            for slot, tensor in zip(self.slots, tensors, strict=True):
                args[slot] = tensor
            return self.op(*args, **self.kwargs)
        it = iter(tensors)
        args = _fill(self.args, it)
        kwargs = {k: _fill(v, it) for k, v in self.kwargs.items()}
        return self.op(*args, **kwargs)


def _call_setup(call_: CallRecord, dtype: str, device: str) -> Callable[[SetupContext], Any]:
    reason = call_.unsupported

    def setup(ctx: SetupContext) -> tuple[torch.Tensor, ...]:
        if reason is not None:
            raise Skip(reason)
        resolve_op(call_.op)  # an op this torch lacks is a skip, not an error

        def follow(value: str, main: str, point_value: str) -> str:
            return point_value if value == main else value

        return tuple(
            regenerate(
                ctx,
                spec,
                follow(spec.dtype, dtype, ctx.point.dtype),
                follow(spec.device, device, ctx.point.device),
            )
            for spec in call_.tensors
        )

    return setup


def call_bytes(call_: CallRecord, main_dtype: str, point: Point) -> float:
    """Input plus output bytes, tensors of the main dtype counted at the point's."""
    scale = ITEMSIZE[point.dtype] / ITEMSIZE.get(main_dtype, 4)
    inputs = sum(t.nbytes * (scale if t.dtype == main_dtype else 1) for t in call_.tensors)
    return float(inputs + call_.output_bytes * scale)


def declare_calls(
    suite: Suite,
    name: str,
    calls: Sequence[CallRecord],
    *,
    prefix: str = "",
    budget_s: float | None = None,
    tags: Sequence[str] = (),
) -> None:
    """One workload per call, ``{prefix}aten.addmm#3``, parameters ``capture`` and
    ``count``, tagged ``captured`` and ``tags``."""
    if not calls:
        reason = f"capture {name!r} recorded no aten call"
        skipped(suite, f"{prefix}nothing", name, reason, tags=tags)
        return
    for label, call_ in number_calls(calls):
        dtype, device = main_dtype_device(call_)
        first = call_.tensors[0].shape if call_.tensors else (1,)
        shape = tuple(max(1, s) for s in first) or (1,)
        variant = Variant(
            call_.op,
            _lazy_replay(call_),
            inplace=call_.mutates,
            description=f"{call_.count} call(s) in {name}",
        )
        suite.workload(
            f"{prefix}{label}",
            setup=_call_setup(call_, dtype, device),
            variants=[variant],
            sizes=[shape],
            dtypes=[dtype if dtype in ITEMSIZE else "float32"],
            devices=[device],
            params={"capture": [name], "count": [call_.count]},
            bytes=_bytes_of(call_, dtype),
            check=False,
            tags=[TAG, *tags],
            budget_s=budget_s,
        )


def _bytes_of(call_: CallRecord, dtype: str) -> Callable[[Point], float]:
    return lambda point: call_bytes(call_, dtype, point)


def _lazy_replay(call_: CallRecord) -> Callable[..., Any]:
    """The replay built at its first call: declaring never resolves an op, so a suite
    with an op this torch lacks still loads and skips that point."""
    built: list[Replay] = []

    def replay(*tensors: torch.Tensor) -> Any:
        if not built:
            built.append(Replay(call_))
        return built[0](*tensors)

    return replay


def skipped(
    suite: Suite, workload: str, name: str, reason: str, *, tags: Sequence[str] = ()
) -> None:
    """A workload that is recorded as skipped with ``reason`` (a capture that failed)."""

    def setup(ctx: SetupContext) -> Any:
        raise Skip(reason)

    suite.workload(
        workload,
        setup=setup,
        variants=[Variant(name, _never)],
        sizes=[1],
        params={"capture": [name], "count": [0]},
        check=False,
        tags=[TAG, *tags],
    )


def _never(*_: Any) -> None:
    raise Skip("not measurable")


def factory_inputs(make_inputs: Callable[[], Any] | None) -> tuple[Any, ...]:
    """The factory's arguments, with the global generator seeded first: a tuple or
    list is the positional arguments, anything else the one argument."""
    if make_inputs is None:
        return ()
    torch.manual_seed(FACTORY_SEED)
    made = make_inputs()
    return tuple(made) if isinstance(made, (tuple, list)) else (made,)


def declare_whole(
    suite: Suite,
    name: str,
    fn: Callable[..., Any],
    make_inputs: Callable[[], Any] | None,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    prefix: str = "",
    budget_s: float | None = None,
    tags: Sequence[str] = (),
    compile: bool = False,
    compile_tags: Sequence[str] = (),
) -> None:
    """The workload ``{prefix}whole``: ``fn`` on the factory's inputs, at the capture's
    dtype and device only (its tensors were made there); with ``compile``, also
    ``{prefix}whole-compiled``, ``fn`` through ``torch.compile`` (tagged
    ``compile_tags``, not ``tags``)."""

    def setup(ctx: SetupContext) -> tuple[Any, ...]:
        if (ctx.point.dtype, ctx.point.device) != (dtype, device):
            raise Skip(f"whole {name!r} was captured in {dtype} on {device} and runs only there")
        return factory_inputs(make_inputs)

    suite.workload(
        f"{prefix}whole",
        setup=setup,
        variants=[Variant(name, fn, description="the captured callable, whole")],
        sizes=[1],
        dtypes=[dtype],
        devices=[device],
        params={"capture": [name]},
        check=False,
        tags=[TAG, *tags],
        budget_s=budget_s,
    )
    if compile:
        suite.workload(
            f"{prefix}whole-compiled",
            setup=setup,
            variants=[Variant(COMPILED_VARIANT, fn, compile=True, description="torch.compile(fn)")],
            sizes=[1],
            dtypes=[dtype],
            devices=[device],
            params={"capture": [name]},
            check=False,
            tags=[TAG, *compile_tags],
            budget_s=budget_s,
        )


def declare_capture(
    suite: Suite,
    name: str,
    fn: Callable[..., Any],
    make_inputs: Callable[[], Any] | None = None,
    *,
    prefix: str = "",
    cache_key: str | None = None,
    budget_s: float | None = None,
    tags: Sequence[str] = (),
    compile: bool = False,
    compile_tags: Sequence[str] = (),
) -> Capture | None:
    """Capture ``fn`` on the factory's inputs now and declare its calls and ``whole``
    (and ``whole-compiled`` with ``compile``; see :func:`declare_whole`), every one
    tagged ``tags`` too.

    With ``cache_key`` (e.g. the suite source's hash and the capture's name) the
    capture is kept on disk and later loads read it back
    (:func:`benchbench.suite.capture_cache.cached_capture`). A callable that raises, or
    an input factory that raises (a model whose config the installed library does not
    know), declares one skipped workload with the reason instead (a suite that
    captures at load still loads); returns the capture, or None then.
    """
    try:
        if cache_key is None:
            captured = capture(fn, *_built_inputs(name, make_inputs))
        else:
            captured = cached_capture(cache_key, fn, lambda: _built_inputs(name, make_inputs))
    except CaptureError as exc:
        skipped(suite, f"{prefix}whole", name, str(exc), tags=tags)
        return None
    declare_calls(suite, name, captured.calls, prefix=prefix, budget_s=budget_s, tags=tags)
    if captured.calls:
        dtype, device = capture_dtype_device(captured)
        declare_whole(
            suite,
            name,
            fn,
            make_inputs,
            dtype=dtype,
            device=device,
            prefix=prefix,
            budget_s=budget_s,
            tags=tags,
            compile=compile,
            compile_tags=compile_tags,
        )
    return captured


def _built_inputs(name: str, make_inputs: Callable[[], Any] | None) -> tuple[Any, ...]:
    """The factory's inputs; a factory that raises is a :class:`CaptureError` naming
    the capture, the exception and its message (its first line)."""
    try:
        return factory_inputs(make_inputs)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        raise CaptureError(
            f"capture {name!r}: building its inputs raised {type(exc).__name__}: "
            f"{text[0] if text else ''}"
        ) from exc


__all__ = ["Opaque", "T", "call", "declare_calls", "declare_capture", "declare_whole"]
