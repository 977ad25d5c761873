"""``ab``'s relay: the next round's zygotes start while this round measures, one import at
a time, and the round after takes them; what is not started by then starts at once."""

from __future__ import annotations

import pytest

from benchbench.run import relay as relay_module
from benchbench.run.relay import Relay, spare_core


class FakeZygote:
    """A zygote whose torch import ends when the test says so."""

    def __init__(self, side: int, log: list[str]) -> None:
        self.side, self.log = side, log
        self.imported = False
        self.closed = False
        log.append(f"start {side}")

    def poll_ready(self) -> bool:
        return self.imported

    def close(self) -> None:
        self.closed = True


def _relay(log: list[str]) -> tuple[Relay, list[FakeZygote]]:
    made: list[FakeZygote] = []

    def maker(side: int):
        def make() -> FakeZygote:
            made.append(FakeZygote(side, log))
            return made[-1]

        return make

    return Relay([maker(0), maker(1)]), made


def test_the_next_zygotes_start_one_at_a_time_in_the_order_given():
    log: list[str] = []
    relay, made = _relay(log)
    relay.prepare([1, 0])
    assert log == ["start 1"]  # side 0 waits for side 1's import
    relay.advance()
    assert log == ["start 1"]
    made[0].imported = True
    relay.advance()
    assert log == ["start 1", "start 0"]
    made[1].imported = True
    assert relay.take(0) is made[1] and relay.take(1) is made[0]
    assert log == ["start 1", "start 0"]  # nothing started twice


def test_a_round_that_ends_first_starts_the_rest_at_once_and_nothing_more_ahead():
    log: list[str] = []
    relay, made = _relay(log)
    relay.prepare([0, 1])
    first = relay.take(0)  # the round ended while side 0 was still importing
    assert first is made[0] and not made[0].imported
    made[0].imported = True
    relay.advance()  # the queue is gone: nothing starts ahead any more
    assert log == ["start 0"]
    second = relay.take(1)  # started now, beside side 0's import
    assert second is made[1] and log == ["start 0", "start 1"]


def test_without_prepare_take_starts_a_zygote_as_a_pool_without_relay_does():
    log: list[str] = []
    relay, made = _relay(log)
    assert relay.take(1) is made[0] and log == ["start 1"]


def test_close_ends_the_zygotes_started_ahead_and_not_taken():
    log: list[str] = []
    relay, made = _relay(log)
    relay.prepare([0, 1])
    made[0].imported = True
    relay.advance()
    taken = relay.take(0)
    relay.close()
    assert not taken.closed  # its pool closes it
    assert made[1].closed
    relay.close()  # twice: nothing left


def test_a_spawner_has_no_import_to_wait_for():
    class Spawnerish:
        def poll_ready(self) -> bool:
            return True

        def close(self) -> None:
            return None

    relay = Relay([Spawnerish, Spawnerish])
    relay.prepare([0, 1])
    assert relay.take(0) is not relay.take(1)


def test_only_lockstep_with_no_cpus_named_and_two_usable_cores_gets_a_relay(monkeypatch):
    monkeypatch.setattr(relay_module.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert spare_core((), duet=False)
    assert not spare_core((), duet=True)  # duet measures on both cores
    assert not spare_core((1,), duet=False)  # --cpus: the user's cores only
    monkeypatch.setattr(relay_module.os, "sched_getaffinity", lambda _pid: {0})
    assert not spare_core((), duet=False)


@pytest.mark.parametrize("failed", [False, True])
def test_a_real_zygote_is_polled_without_waiting_and_keeps_its_failure(tmp_path, failed):
    """``poll_ready`` never blocks; a zygote whose import failed is done, and its first
    fork raises the failure."""
    import sys
    import time

    from benchbench.core.errors import MeasurementError
    from benchbench.run.workers import Zygote

    python = sys.executable
    if failed:
        python = str(tmp_path / "python")
        (tmp_path / "python").write_text("#!/bin/sh\nexit 7\n")
        (tmp_path / "python").chmod(0o755)
    zygote = Zygote(python=python, start_timeout_s=60.0)
    try:
        started = time.monotonic()
        while not zygote.poll_ready():
            assert time.monotonic() - started < 60.0
            time.sleep(0.05)
        if failed:
            with pytest.raises(MeasurementError, match="exited with code 7"):
                zygote.worker()
            with pytest.raises(MeasurementError, match="exited with code 7"):
                zygote.worker()  # the same failure, not a second wait
        else:
            worker = zygote.worker()
            worker.close()
    finally:
        zygote.close()
