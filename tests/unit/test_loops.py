"""The timed loops: bound arguments, rotation, and how long each output lives."""

import dis
import weakref
from collections.abc import Callable

import pytest

from benchbench.measure.loops import make_loop, make_rotating_loop


class Output:
    """A call's output; weak references tell whether it is still alive."""


class Op:
    """Returns a fresh Output per call and notes, at each call, how many earlier ones live."""

    def __init__(self) -> None:
        self.made: list[weakref.ref[Output]] = []
        self.alive_at_call: list[int] = []

    def __call__(self, *args: object) -> Output:
        self.alive_at_call.append(sum(ref() is not None for ref in self.made))
        out = Output()
        self.made.append(weakref.ref(out))
        return out


@pytest.mark.parametrize("outputs", ["keep", "drop"])
def test_make_loop_calls_with_the_bound_arguments(outputs):
    seen: list[tuple[int, int]] = []
    loop = make_loop(lambda a, b: seen.append((a, b)), (1, 2), outputs)
    loop(3)
    assert seen == [(1, 2)] * 3
    empty_calls: list[int] = []
    make_loop(lambda: empty_calls.append(0), (), outputs)(4)
    assert len(empty_calls) == 4


def _loops(op: Op) -> dict[str, Callable[[str], Callable[[int], None]]]:
    return {
        "make_loop": lambda mode: make_loop(op, (1,), mode),
        "make_rotating_loop": lambda mode: make_rotating_loop(op, [(1,), (2,)], mode),
    }


@pytest.mark.parametrize("maker", ["make_loop", "make_rotating_loop"])
def test_keep_holds_the_previous_output_through_the_next_call_across_blocks(maker):
    op = Op()
    loop = _loops(op)[maker]("keep")
    loop(3)
    loop(2)  # a new block (sample): the previous block's last output is still held
    # the first call ever has no predecessor; every later one sees exactly one
    assert op.alive_at_call == [0, 1, 1, 1, 1]
    assert sum(ref() is not None for ref in op.made) == 1  # held for the next block


@pytest.mark.parametrize("maker", ["make_loop", "make_rotating_loop"])
def test_drop_releases_each_output_before_the_next_call(maker):
    op = Op()
    loop = _loops(op)[maker]("drop")
    loop(3)
    loop(2)
    assert op.alive_at_call == [0, 0, 0, 0, 0]
    assert all(ref() is None for ref in op.made)


def test_keep_recovers_after_a_call_that_raised():
    calls: list[int] = []

    def flaky(x: int) -> Output:
        calls.append(x)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return Output()

    loop = make_loop(flaky, (7,), "keep")
    with pytest.raises(RuntimeError):
        loop(3)
    loop(2)  # the loop still works: nothing half-held breaks the next block
    assert calls == [7, 7, 7, 7]


def test_rotating_loop_cycles_through_copies():
    seen: list[int] = []
    loop = make_rotating_loop(lambda x: seen.append(x), [(1,), (2,), (3,)])
    loop(4)
    loop(2)
    assert seen == [1, 2, 3, 1, 2, 3]


def test_an_unknown_output_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"outputs must be one of keep, drop, got 'hold'"):
        make_loop(print, (), "hold")
    with pytest.raises(ValueError, match="'hold'"):
        make_rotating_loop(print, [()], "hold")


def _loop_body(loop: Callable[[int], None]) -> list[str]:
    """Opcodes of the per-call loop body: from FOR_ITER to the jump back."""
    ops = [i.opname for i in dis.get_instructions(loop)]
    start = ops.index("FOR_ITER")
    end = next(k for k in range(start, len(ops)) if ops[k].startswith("JUMP_BACKWARD"))
    return ops[start : end + 1]


def test_keep_costs_one_store_per_call_and_nothing_else():
    keep = _loop_body(make_loop(abs, (1,), "keep"))
    drop = _loop_body(make_loop(abs, (1,), "drop"))
    assert "LOAD_GLOBAL" not in keep and "LOAD_ATTR" not in keep  # locals only
    # the output is bound to a local where drop pops it: the only difference per call
    assert keep == ["STORE_FAST" if op == "POP_TOP" else op for op in drop]
    assert "POP_TOP" in drop
