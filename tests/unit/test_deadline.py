"""`run --deadline`: a duration or a time of day, read against an injected clock."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from benchbench.core.errors import UsageError
from benchbench.run.deadline import DEADLINE_SIGNAL, deadline, seconds_until

NOW = dt.datetime(2026, 11, 27, 22, 15, 30)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("25m", 1500.0),
        ("1h30m", 5400.0),
        ("90s", 90.0),
        ("2h", 7200.0),
        ("1h0m5s", 3605.0),
        ("23:00", 44 * 60 + 30.0),  # later today
        ("02:30", 4 * 3600 + 14 * 60 + 30.0),  # tomorrow
        ("22:15", 24 * 3600 - 30.0),  # a minute already begun: tomorrow
    ],
)
def test_a_deadline_is_seconds_from_now(text, seconds):
    assert seconds_until(text, NOW) == seconds


@pytest.mark.parametrize("text", ["", "0m", "25", "1.5h", "24:00", "7:61", "m", "soon", "-5m"])
def test_anything_else_is_refused_naming_the_forms(text):
    with pytest.raises(UsageError) as caught:
        seconds_until(text, NOW)
    assert f"--deadline {text!r} is not a deadline" in str(caught.value)
    assert "25m, 1h30m" in str(caught.value) and "HH:MM" in str(caught.value)


class _Stop:
    def __init__(self) -> None:
        self.signals: list[int] = []
        self.asked = threading.Event()

    def request(self, signum: int) -> None:
        self.signals.append(signum)
        self.asked.set()


def test_the_deadline_asks_the_run_to_stop_once_as_its_signal():
    stop = _Stop()
    with deadline(0.01, stop):
        assert stop.asked.wait(10)
    assert stop.signals == [int(DEADLINE_SIGNAL)]


def test_a_run_that_ends_first_is_never_asked_to_stop():
    stop = _Stop()
    with deadline(3600.0, stop):
        pass
    with deadline(None, stop):
        pass
    assert stop.signals == []
