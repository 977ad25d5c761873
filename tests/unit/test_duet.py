"""``ab --duet``: duet only on two idle cores, the sides swapping cores each round, one
torch thread a side."""

from __future__ import annotations

import pytest

from benchbench.core.errors import UsageError
from benchbench.run import duet


def test_two_idle_cores_give_a_duet_on_the_last_two():
    chosen = duet.choose(usage=lambda _s: [3.0, 2.0, 1.0, 4.0], cpus=(0, 1, 2, 3))
    assert chosen.cores == (2, 3) and chosen.name == "duet"
    assert "same moment on cores 2-3" in chosen.note


def test_a_busy_core_gives_lockstep_and_says_how_busy():
    windows: list[float] = []

    def usage(window_s: float) -> list[float]:
        windows.append(window_s)
        return [90.0, 5.0]

    chosen = duet.choose(usage=usage, cpus=(0, 1))
    assert chosen.cores is None and chosen.name == "lockstep"
    assert "other processes used 0.9 of cores 0-1" in chosen.note
    assert windows == [duet.IDLE_CHECK_S]


def test_use_spread_over_both_cores_counts_as_a_core_taken():
    # 20 % on each: 0.4 of a core in all, past the 0.25 a core may be used by others.
    assert duet.choose(usage=lambda _s: [20.0, 20.0], cpus=(0, 1)).cores is None
    assert duet.choose(usage=lambda _s: [10.0, 10.0], cpus=(0, 1)).cores == (0, 1)


def test_one_core_gives_lockstep_without_reading_the_cores():
    def usage(_s: float) -> list[float]:
        raise AssertionError("no window for one core")

    chosen = duet.choose(usage=usage, cpus=(5,))
    assert chosen.cores is None and "--cpus names one core" in chosen.note


def test_the_sides_zygotes_swap_cores_every_round_and_never_share_one():
    made: list[tuple[str, tuple[int, ...]]] = []

    def factory(side: str):
        def make(cpus: tuple[int, ...]) -> str:
            made.append((side, cpus))
            return side

        return make

    sides = [duet.Alternating(factory(name), k, (2, 3)) for k, name in enumerate("ab")]  # type: ignore[arg-type]
    for _round in range(4):
        for side in sides:
            side()
    rounds = [dict(made[2 * r : 2 * r + 2]) for r in range(4)]
    assert [(r["a"], r["b"]) for r in rounds] == [((2,), (3,)), ((3,), (2,))] * 2


def test_more_than_one_thread_a_side_is_a_usage_error():
    duet.check_threads(1)
    duet.check_threads(None)  # --threads all: one per pinned core
    with pytest.raises(UsageError, match="--threads must be 1, got 2"):
        duet.check_threads(2)
