"""Backward modes: what the timed blocks hold, gradients released untimed, the check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from benchbench.measure import backward
from benchbench.measure.accuracy import tolerance_for
from benchbench.measure.inplace import PROBE_CALLS
from benchbench.measure.policy import Policy, measure
from benchbench.suite.declare import Skip
from tests.unit.fakes import LoggingTimer, stepping_clock

POLICY = Policy(min_samples=5, min_time_s=0.0, warmup_min_calls=6, warmup_min_s=0.0)


def doubling(events: list[str], fresh_grads: list[bool], *, once: bool = False):
    """``2 x`` through a function that logs its forward and backward, and whether the
    leaf's gradient was released before each backward. ``once``: a second backward
    through one graph fails, as when a function frees what it saved."""

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            events.append("forward")
            ctx.leaf, ctx.used = x, False
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            if once and ctx.used:
                raise RuntimeError("Trying to backward through the graph a second time")
            ctx.used = True
            events.append("backward")
            fresh_grads.append(ctx.leaf.grad is None)
            return grad * 2

    return Double.apply


def _run(fn: Callable[..., Any], inputs: tuple[Any, ...], mode: str, events: list[str]):
    timer = LoggingTimer(events)
    planned = backward.plan("op", fn, inputs, mode, seed=7, timer=timer, min_sample_s=1e-3)
    policy = Policy(**{**POLICY.__dict__, "fixed_calls": planned.copies})
    (measured,) = measure([planned.subject], timer, policy, stepping_clock())
    return planned, measured


def _timed_blocks(events: list[str]) -> list[tuple[list[str], list[str]]]:
    """(events before the block since the last one, events inside it) per timed block."""
    out, before, inside, timing = [], [], [], False
    for event in events:
        if event == "start":
            timing, inside = True, []
        elif event == "stop":
            out.append((before, inside))
            timing, before = False, []
        elif timing:
            inside.append(event)
        else:
            before.append(event)
    return out


def test_bwd_times_backward_only_over_a_retained_graph_with_gradients_released():
    events: list[str] = []
    fresh: list[bool] = []
    planned, measured = _run(doubling(events, fresh), (torch.full((4,), 3.0),), "bwd", events)
    assert planned.retained and planned.copies == 5
    assert measured.calls_per_sample == 5
    blocks = _timed_blocks(events)
    assert len(blocks) == PROBE_CALLS + measured.stats.n
    for _before, inside in blocks[PROBE_CALLS:]:
        assert inside == ["backward"] * 5  # no forward inside a timed block
    # One forward per slot, all untimed: 1 for the first slot, 4 for the others.
    assert events.count("forward") == 5
    assert fresh and all(fresh)  # every backward, timed or not, found .grad released
    assert "graph retained" in planned.note and "5 slots" in planned.note


def test_bwd_runs_a_fresh_forward_untimed_when_the_graph_cannot_be_retained():
    events: list[str] = []
    fresh: list[bool] = []
    fn = doubling(events, fresh, once=True)
    planned, _measured = _run(fn, (torch.full((4,), 3.0),), "bwd", events)
    assert not planned.retained
    for before, inside in _timed_blocks(events)[PROBE_CALLS:]:
        assert inside == ["backward"] * 5
        assert before[-5:] == ["forward"] * 5  # every slot's graph rebuilt before the block
    assert all(fresh)
    assert "fresh forward before each sample" in planned.note


def test_fwd_bwd_times_forward_and_backward_together():
    events: list[str] = []
    fresh: list[bool] = []
    planned, _measured = _run(doubling(events, fresh), (torch.full((4,), 3.0),), "fwd_bwd", events)
    blocks = _timed_blocks(events)
    assert [inside for _, inside in blocks[:PROBE_CALLS]] == [["forward", "backward"]] * 5
    for _before, inside in blocks[PROBE_CALLS:]:
        assert inside == ["forward", "backward"] * 5
    assert planned.copies == 5 and "forward and backward timed together" in planned.note
    assert all(fresh)


def test_the_first_gradients_are_kept_for_the_check_and_the_fed_gradient_is_seeded():
    x = torch.full((6,), 3.0)
    planned, _ = _run(lambda t: t * 2, (x,), "bwd", [])
    (grad,) = planned.grads
    assert torch.equal(planned.gradients[0], 2 * grad)
    low, high = backward.GRAD_RANGE
    assert bool(((grad >= low) & (grad < high)).all())
    again, _ = _run(lambda t: t * 2, (x,), "bwd", [])
    assert torch.equal(again.grads[0], grad)  # the same seed: the same gradient fed in
    assert not x.requires_grad and x.grad is None  # the setup's tensor is untouched


def test_gradients_go_to_marked_inputs_else_to_floating_ones():
    data, weight = torch.ones(3), torch.ones(3).requires_grad_()
    index = torch.arange(3)
    assert backward.grad_positions((data, weight, index)) == (1,)
    assert backward.grad_positions((data, index, data.double())) == (0, 2)


@pytest.mark.parametrize(
    ("fn", "inputs", "reason"),
    [
        (torch.argmax, (torch.rand(4),), "does not require grad"),
        (lambda x: x.sqrt_(), (torch.rand(4),), "in-place operation"),
        (lambda i: i * 2, (torch.arange(4),), "has no floating tensor input"),
        (lambda x: 3, (torch.rand(4),), "returns no tensor"),
    ],
)
def test_a_variant_autograd_cannot_differentiate_is_skipped_with_the_reason(fn, inputs, reason):
    with pytest.raises(Skip) as info:
        _run(fn, inputs, "bwd", [])
    assert str(info.value).startswith("variant 'op' ")
    assert reason in str(info.value)


def _check(fn: Callable[..., Any], reference: Callable[..., Any], extra: dict[str, Any]):
    x = torch.linspace(0.5, 1.5, 16)
    planned, _ = _run(fn, (x,), "bwd", [])
    return backward.check_gradients(
        planned, reference, (x.double(),), "float32", tolerance_for("float32"), extra
    )


def test_gradients_are_checked_against_the_references_in_float64():
    extra: dict[str, Any] = {}
    wrong, accuracy = _check(torch.sin, torch.sin, extra)
    assert wrong is None and accuracy is not None and accuracy.compared == 16
    assert extra["gradient_check"] == "gradients against the reference's, float64"
    # The same forward values, another derivative: caught only by the gradient check.
    wrong, accuracy = _check(lambda x: x.detach() + (x - x.detach()) * 3, lambda x: x, {})
    assert wrong is not None and wrong.startswith("wrong result: 16 of 16 float32 elements")


def test_a_reference_without_autograd_skips_the_check_and_says_why():
    extra: dict[str, Any] = {}
    numpy_ref = lambda x: np.sin(x.detach().numpy())  # noqa: E731
    wrong, accuracy = _check(torch.sin, numpy_ref, extra)
    assert wrong is None and accuracy is None
    assert extra["gradient_check"] == "the reference has no autograd graph (gradients not checked)"


def test_a_gradient_on_one_side_only_is_a_wrong_result():
    g = torch.ones(2)
    assert backward.joined([g, None], [g, g]) == (
        "wrong result: gradient input 1 gets no gradient from the variant"
    )
    ours, theirs = backward.joined([None, g], [None, 2 * g])  # type: ignore[misc]
    assert ours.tolist() == [1.0, 1.0] and theirs.tolist() == [2.0, 2.0]
