"""In-place variants: inputs restored outside the timed blocks, K copies, the rule for K."""

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from benchbench.measure import inplace
from benchbench.measure.policy import Policy, measure
from tests.unit.fakes import LoggingTimer, stepping_clock


class Log(TorchFunctionMode):
    """Logs every ``Tensor.copy_`` (a restore) while active."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.Tensor.copy_:
            self.events.append("restore")
        return func(*args, **(kwargs or {}))


POLICY = Policy(min_samples=5, min_time_s=0.0, warmup_min_calls=6, warmup_min_s=0.0)


def _run(fn: Callable[..., Any], inputs: tuple[Any, ...], events: list[str], **kw: Any):
    timer = LoggingTimer(events)
    with Log(events):
        planned = inplace.plan(
            "op", fn, inputs, timer=timer, min_sample_s=1e-3, outputs="keep", **kw
        )
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


def test_timed_blocks_hold_calls_only_and_every_copy_is_restored_before_each():
    events: list[str] = []
    x, y = torch.full((8,), 2.0), torch.full((8,), 3.0)

    def op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        events.append("call")
        return a.mul_(b)

    planned, measured = _run(op, (x, y), events)
    assert planned.copies == 5  # 1 ms (+20 %) / 0.25 ms per call
    assert measured.calls_per_sample == 5
    blocks = _timed_blocks(events)
    assert len(blocks) == inplace.PROBE_CALLS + measured.stats.n
    for before, inside in blocks:
        assert inside and set(inside) == {"call"}  # no restore inside a timed block
        assert before.count("restore") >= 2  # both inputs of every copy used
    for before, inside in blocks[inplace.PROBE_CALLS :]:
        assert inside == ["call"] * 5
        assert before[-10:] == ["restore"] * 10  # 5 copies x 2 inputs, then the block
    assert torch.equal(x, torch.full((8,), 2.0)) and torch.equal(y, torch.full((8,), 3.0))


def test_an_op_wrong_on_a_second_call_gets_restored_inputs_every_call():
    events: list[str] = []
    seen: list[tuple[float, float]] = []

    def op(a: torch.Tensor, b: torch.Tensor) -> None:
        # on a second call without a restore, a would be 3.0 and b 2.0
        seen.append((float(a[0]), float(b[0])))
        a.add_(1.0)
        b.mul_(2.0)

    planned, measured = _run(op, (torch.full((4,), 2.0), torch.full((4,), 1.0)), events)
    timed = planned.copies * measured.stats.n
    assert len(seen) > timed  # warm-up and probe calls too
    assert set(seen) == {(2.0, 1.0)}  # every call, warm-up included, saw pristine inputs


def test_cold_mode_evicts_after_the_restore_and_says_so():
    events: list[str] = []
    planned, _ = _run(
        lambda a: a.neg_(), (torch.ones(4),), events, evict=lambda: events.append("evict")
    )
    for before, _inside in _timed_blocks(events)[inplace.PROBE_CALLS :]:
        assert before[-(planned.copies + 1) :] == ["restore"] * planned.copies + ["evict"]
    assert "evicted after the restore" in planned.note
    assert planned.note.startswith("restored untimed before each sample: 5 copies")


def test_numpy_inputs_are_restored_too():
    seen: list[float] = []

    def op(a: np.ndarray) -> None:
        seen.append(float(a[0]))
        np.sqrt(a, out=a)

    _run(op, (np.full(4, 16.0),), [])
    assert set(seen) == {16.0}


@pytest.mark.parametrize(
    ("call_s", "copy_bytes", "at_least", "copies"),
    [
        (2e-3, 4096, 1, 1),  # a call alone makes a 1 ms sample
        (1e-3, 4096, 1, 1),
        (0.3e-3, 4096, 1, 4),  # ceil(1.2 / 0.3)
        (0.9e-3, 4096, 1, 2),  # short of 1 ms: two calls
        (0.3e-3, 4096, 16, 16),  # rotate: the copies that span 2x the LLC
        (1e-9, 4096, 1, inplace.MAX_COPIES),
        (0.0, 4096, 1, inplace.MAX_COPIES),  # a clock too coarse to see a call
        (1e-6, 64 * 2**20, 1, 4),  # 256 MiB of copies at most
        (1e-6, 2**30, 1, 1),  # one copy even when it alone is past the memory cap
    ],
)
def test_copies_rule(call_s, copy_bytes, at_least, copies):
    assert inplace.copies_for(call_s, copy_bytes, 1e-3, at_least) == copies
