"""Backward passes: the ``bwd`` and ``fwd_bwd`` modes of a point.

A workload declared with ``modes=("fwd", "bwd", "fwd_bwd")`` has a ``mode`` parameter
on each point. ``fwd`` is measured as any point is. The other two time autograd:

- **Which inputs get gradients.** The inputs ``setup`` marked ``requires_grad`` (the
  weights of a training step, not its data); if it marked none, every floating tensor
  input. Each becomes a leaf (``x.detach().requires_grad_()``: the same storage, its own
  ``.grad``). Integer inputs (indices, targets) stay as they are.
- **The gradient fed in** is fixed and seeded by the point (every variant and mode of a
  point gets the same one): uniform in [0.5, 1.5), like the suites' positive inputs, so
  that gradients summed over many outputs do not cancel to near zero, where a closeness
  test in a reduced precision would compare rounding noise.
- ``bwd`` times ``torch.autograd.backward(outputs, grads)`` alone. The forward that
  built the graph ran untimed. The graph is retained (``retain_graph=True``) and the
  same graph is differentiated again in the next sample; when a second backward
  through it fails (a custom function that frees what it saved), every sample's
  untimed ``pre`` runs a fresh forward instead (``extra.backward`` says which).
- ``fwd_bwd`` times the forward and its backward together, as a training step does.

**Gradients are released between calls, outside the timed region.** A backward into
a leaf whose ``.grad`` is set adds into it; one whose ``.grad`` is None allocates it,
as after ``optimizer.zero_grad()`` (whose default sets them to None). Setting
``.grad = None`` between two calls of one timed block would put it inside the timed
region, so a sample makes its K calls on **K slots**, each with its own leaves (and,
for ``bwd``, its own graph), and the sample's ``pre`` sets every slot's gradients to
None (and rebuilds the graphs that cannot be retained) before the block. K follows
the in-place rule (:func:`benchbench.measure.inplace.copies_for`): one probed call
against the policy's minimum sample time, capped by copies and memory. A slot shares
its inputs' storage with the others (warm mode: every call reads the same, cached
inputs); in ``rotate`` mode each slot has its own copy.

A variant autograd cannot differentiate (an output that does not require grad, an
in-place write into a leaf, a missing derivative, a NumPy variant) is skipped in these
modes with torch's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from benchbench.measure.accuracy import Accuracy, Tolerance
from benchbench.measure.inplace import PROBE_CALLS, copies_for, nbytes
from benchbench.measure.loops import make_rotating_loop
from benchbench.measure.pipeline import check_output
from benchbench.measure.policy import Block, Subject, Timer, gc_disabled
from benchbench.suite.declare import Skip

#: The seeded gradient fed into the backward pass is uniform in this range.
GRAD_RANGE = (0.5, 1.5)

#: Phrases of the errors by which autograd refuses to differentiate a variant.
REFUSALS = (
    "does not require grad",
    "does not have a grad_fn",
    "in-place operation",
    "is not implemented",
    "not differentiable",
    "derivative for",
)


def grad_positions(inputs: Sequence[Any]) -> tuple[int, ...]:
    """Positions of the inputs that get gradients: those marked ``requires_grad`` by the
    setup, else every floating (or complex) tensor."""
    marked = tuple(
        i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad
    )
    if marked:
        return marked
    return tuple(
        i
        for i, x in enumerate(inputs)
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())
    )


def as_leaves(
    inputs: Sequence[Any], positions: Sequence[int], copy: bool = False
) -> tuple[Any, ...]:
    """``inputs`` with those at ``positions`` as new leaves requiring grad (sharing the
    storage unless ``copy``)."""
    out = list(inputs)
    for i in positions:
        x = inputs[i].detach()
        out[i] = (x.clone() if copy else x).requires_grad_()
    return tuple(out)


def differentiable(output: Any) -> list[torch.Tensor]:
    """The tensors of ``output`` (one, or a tuple or list of them) that require grad;
    all its tensors when none does (autograd then says why it cannot go on)."""
    values = output if isinstance(output, (tuple, list)) else (output,)
    tensors = [t for t in values if isinstance(t, torch.Tensor)]
    return [t for t in tensors if t.requires_grad] or tensors


def seeded_grads(outputs: Sequence[torch.Tensor], seed: int) -> tuple[torch.Tensor, ...]:
    """One gradient per output, like it, drawn from :data:`GRAD_RANGE` with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    low, high = GRAD_RANGE
    return tuple(
        (torch.rand(t.shape, generator=generator, dtype=torch.float64) * (high - low) + low).to(
            device=t.device, dtype=t.dtype
        )
        for t in outputs
    )


def refusal(exc: BaseException) -> str | None:
    """Torch's reason if ``exc`` is autograd refusing to differentiate, else None."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if any(phrase in text for phrase in REFUSALS) else None


@dataclass
class Slot:
    """One set of leaves, the gradients fed in, and (``bwd``) the graph's outputs."""

    leaves: tuple[Any, ...]
    params: tuple[torch.Tensor, ...]
    grads: tuple[torch.Tensor, ...]
    outputs: list[torch.Tensor]


@dataclass(frozen=True)
class BackwardPlan:
    """What to measure in a backward mode: a subject sampled at ``copies`` calls per
    sample (its ``pre`` releases the gradients), the gradients of the first, untimed
    backward (for the reference check), and ``once``, one untimed step on a released
    slot (peak memory, profile)."""

    subject: Subject
    copies: int
    call_s: float
    gradients: tuple[torch.Tensor | None, ...]
    grads: tuple[torch.Tensor, ...]
    positions: tuple[int, ...]
    retained: bool
    once: Callable[[], object]
    note: str


def first_backward(
    name: str, fn: Callable[..., Any], inputs: Sequence[Any], positions: Sequence[int], seed: int
) -> Slot:
    """A slot after one forward and one backward (untimed, graph retained); raises
    :class:`Skip` with torch's reason when autograd cannot differentiate ``fn``."""
    if not positions:
        raise Skip(f"variant {name!r} has no floating tensor input to differentiate")
    leaves = as_leaves(inputs, positions)
    params = tuple(leaves[i] for i in positions)
    try:
        outputs = differentiable(fn(*leaves))
        if not outputs:
            raise Skip(f"variant {name!r} returns no tensor; a backward pass needs one")
        grads = seeded_grads(outputs, seed)
        torch.autograd.backward(outputs, grads, retain_graph=True)
    except (RuntimeError, NotImplementedError) as exc:
        reason = refusal(exc)
        if reason is None:
            raise
        raise Skip(f"variant {name!r} is not differentiable here: {reason}") from None
    return Slot(leaves, params, grads, outputs)


def plan(
    name: str,
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    mode: str,
    *,
    seed: int,
    timer: Timer,
    min_sample_s: float,
    evict: Callable[[], object] | None = None,
    at_least: int = 1,
) -> BackwardPlan:
    """Differentiate ``fn`` once, probe one timed step and plan K slots (module doc)."""
    positions = grad_positions(inputs)
    first = first_backward(name, fn, inputs, positions, seed)
    gradients = tuple(p.grad for p in first.params)
    retained = True
    if mode == "bwd":
        _release([first], None)
        try:
            torch.autograd.backward(first.outputs, first.grads, retain_graph=True)
        except RuntimeError:
            retained = False
    output_bytes = nbytes(first.outputs)
    if mode != "bwd":
        first.outputs = []  # fwd_bwd builds its graph in the timed call
    rebuild = fn if mode == "bwd" and not retained else None
    step = _step(fn, mode, retained)
    copy = at_least > 1  # rotate: every slot reads its own copy of the inputs

    def probe_pre() -> None:
        _release([first], rebuild)

    probe = make_rotating_loop(step, [(first,)], "drop")
    timer.sync()
    with gc_disabled():
        call_s = min(timer.measure([Block(probe, 1, probe_pre)] * PROBE_CALLS))
    grad_bytes = sum(inputs[i].nbytes for i in positions) * (2 if copy else 1)
    k = copies_for(call_s, output_bytes + grad_bytes, min_sample_s, at_least)
    slots = [first, *(_slot(fn, inputs, positions, first.grads, mode, copy) for _ in range(k - 1))]

    def release() -> None:
        _release(slots, rebuild)

    pre: Callable[[], object] = release
    if evict is not None:
        flush = evict

        def pre() -> None:
            release()
            flush()

    def once() -> None:
        _release([first], rebuild)
        step(first)

    graph = (
        "graph retained across samples"
        if mode == "bwd" and retained
        else "fresh forward before each sample (the graph cannot be retained)"
        if mode == "bwd"
        else "forward and backward timed together"
    )
    note = (
        f"{mode}: {k} {'slot' if k == 1 else 'slots'} of {len(positions)} leaf input(s), "
        f"one call on each; gradients set to None before each sample, untimed; {graph}"
    )
    loop = make_rotating_loop(step, [(s,) for s in slots], "drop")
    return BackwardPlan(
        Subject(name, loop, pre), k, call_s, gradients, first.grads, positions, retained, once, note
    )


def _step(fn: Callable[..., Any], mode: str, retained: bool) -> Callable[[Slot], None]:
    backward = torch.autograd.backward
    if mode == "bwd":

        def bwd(slot: Slot) -> None:
            backward(slot.outputs, slot.grads, retain_graph=retained)

        return bwd

    def fwd_bwd(slot: Slot) -> None:
        backward(differentiable(fn(*slot.leaves)), slot.grads)

    return fwd_bwd


def _slot(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    positions: Sequence[int],
    grads: tuple[torch.Tensor, ...],
    mode: str,
    copy: bool,
) -> Slot:
    leaves = as_leaves(inputs, positions, copy)
    outputs = differentiable(fn(*leaves)) if mode == "bwd" else []
    return Slot(leaves, tuple(leaves[i] for i in positions), grads, outputs)


def _release(slots: Sequence[Slot], rebuild: Callable[..., Any] | None) -> None:
    for slot in slots:
        for param in slot.params:
            param.grad = None
        if rebuild is not None:
            slot.outputs = differentiable(rebuild(*slot.leaves))


def reference_gradients(
    reference: Callable[..., Any],
    inputs64: Sequence[Any],
    positions: Sequence[int],
    grads: Sequence[torch.Tensor],
) -> tuple[torch.Tensor | None, ...] | str:
    """The reference's gradients at ``positions`` of its float64 CPU ``inputs64`` for
    the same gradients fed in (as float64), or why they cannot be had."""
    leaves = as_leaves(inputs64, positions)
    try:
        outputs = differentiable(reference(*leaves))
        if len(outputs) != len(grads) or not all(t.requires_grad for t in outputs):
            return "the reference has no autograd graph (gradients not checked)"
        torch.autograd.backward(outputs, [g.detach().to("cpu", torch.float64) for g in grads])
    except (RuntimeError, NotImplementedError) as exc:
        reason = refusal(exc)
        if reason is None:
            raise
        return f"the reference is not differentiable (gradients not checked): {reason}"
    return tuple(leaves[i].grad for i in positions)


def joined(
    gradients: Sequence[torch.Tensor | None], reference: Sequence[torch.Tensor | None]
) -> tuple[torch.Tensor, torch.Tensor] | str:
    """Both sides' gradients flattened and joined in input order, as float64 CPU
    tensors; an input with a gradient on one side only is a wrong result (the reason)."""
    ours: list[torch.Tensor] = []
    theirs: list[torch.Tensor] = []
    for i, (g, r) in enumerate(zip(gradients, reference, strict=True)):
        if g is None and r is None:
            continue
        if g is None or r is None:
            side = "the variant" if g is None else "the reference"
            return f"wrong result: gradient input {i} gets no gradient from {side}"
        ours.append(g.detach().to("cpu", torch.float64).reshape(-1))
        theirs.append(r.detach().to("cpu", torch.float64).reshape(-1))
    empty = torch.zeros(0, dtype=torch.float64)
    return (torch.cat(ours) if ours else empty, torch.cat(theirs) if theirs else empty)


def check_gradients(
    planned: BackwardPlan,
    reference: Callable[..., Any],
    inputs64: Sequence[Any],
    dtype: str,
    tolerance: Tolerance,
    extra: dict[str, Any],
) -> tuple[str | None, Accuracy | None]:
    """The backward modes' reference check: the variant's gradients against the
    reference's, in float64, for the same gradients fed in, with the point's tolerance.

    ``(why wrong or None, accuracy)`` as :func:`~benchbench.measure.pipeline.check_output`
    gives; ``extra["gradient_check"]`` says what was compared, or why nothing could be
    (a reference without an autograd graph: accuracy None, not wrong).
    """
    ref_grads = reference_gradients(reference, inputs64, planned.positions, planned.grads)
    if isinstance(ref_grads, str):
        extra["gradient_check"] = ref_grads
        return None, None
    pair = joined(planned.gradients, ref_grads)
    if isinstance(pair, str):
        return pair, None
    extra["gradient_check"] = "gradients against the reference's, float64"
    return check_output(pair[0], pair[1], dtype, tolerance)
