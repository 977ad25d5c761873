"""--cpus parsing and pinning checks, and the threads-versus-idle-cores rule."""

from __future__ import annotations

import pytest

from benchbench.core.errors import UsageError
from benchbench.machine.cpus import (
    check_cpus,
    format_cpus,
    idle_cores,
    parse_cpus,
    threads_warning,
)

FOUR = (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0", (0,)),
        ("0-1", (0, 1)),
        ("0,2-3", (0, 2, 3)),
        (" 3 , 1 ", (1, 3)),
        ("1,1,0-1", (0, 1)),
    ],
)
def test_parse_cpus_reads_the_kernel_list_notation(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpus(text, FOUR) == cpus


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"--cpus '': '' is not a core number or range; give a list like 0 or 0-1"),
        ("a", r"--cpus 'a': 'a' is not a core number or range"),
        ("0,,1", r"'' is not a core number"),
        ("1-", r"'1-' is not a core number or range"),
        ("3-1", r"--cpus '3-1': '3-1' is not an ascending range"),
        ("-1", r"'-1' is not a core number or range"),
    ],
)
def test_malformed_lists_are_usage_errors_naming_the_value(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        parse_cpus(text, FOUR)
    assert "the cores here are 0-3" in str(caught.value)


def test_cores_the_machine_does_not_have_are_named_with_the_valid_range() -> None:
    with pytest.raises(
        UsageError, match=r"^--cpus '0,4-5,7': this machine has no usable core 4-5,7; "
        r"the cores here are 0-3$"
    ):  # fmt: skip
        parse_cpus("0,4-5,7", FOUR)
    with pytest.raises(UsageError, match=r"no usable core 1; the cores here are 0,2-3"):
        parse_cpus("1", (0, 2, 3))


def test_the_default_usable_cores_are_this_process_affinity() -> None:
    assert parse_cpus("0") == (0,)  # every machine has a core 0 that we may use
    with pytest.raises(UsageError, match="no usable core 100000"):
        parse_cpus("100000")


def test_check_cpus_sorts_and_rejects_an_empty_or_foreign_set() -> None:
    assert check_cpus([3, 1], FOUR) == (1, 3)
    with pytest.raises(UsageError, match="names no core"):
        check_cpus([], FOUR)
    with pytest.raises(UsageError, match="no usable core 9"):
        check_cpus([0, 9], FOUR)


def test_a_platform_that_cannot_pin_refuses_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr("os.sched_setaffinity")
    with pytest.raises(UsageError, match=r"--cpus '0': pinning needs os.sched_setaffinity"):
        parse_cpus("0", FOUR)


def test_format_cpus_round_trips() -> None:
    for cpus in [(0,), (0, 1, 2, 5), (1, 3, 4, 5, 9)]:
        assert parse_cpus(format_cpus(cpus), range(10)) == cpus
    assert format_cpus([]) == ""


@pytest.mark.parametrize(
    ("cores", "others", "idle"),
    [
        (2, 0.0, 2),
        (2, 0.25, 2),  # a quarter of a core is tolerated
        (2, 0.3, 1),
        (2, 1.0, 1),
        (2, 1.25, 1),
        (2, 1.3, 0),
        (2, 5.0, 0),  # never negative
        (8, 2.1, 6),
    ],
)
def test_idle_cores_rule(cores: int, others: float, idle: int) -> None:
    assert idle_cores(cores, others) == idle


def test_threads_warning_fires_only_beyond_the_idle_cores() -> None:
    line = threads_warning(2, 1, 2, 1.04)
    assert line is not None
    assert line.startswith("2 torch threads but only 1 of 2 cores were idle during the point")
    assert "other processes used 1.0 cores" in line and "--threads 1" in line
    assert threads_warning(1, 1, 2, 1.04) is None
    assert threads_warning(2, 2, 2, 0.1) is None
    nothing_idle = threads_warning(4, 0, 4, 6.0)
    assert nothing_idle is not None and "--threads 1" in nothing_idle
    alone = threads_warning(1, 0, 1, 0.8)
    assert alone == (
        "1 torch thread but none of 1 cores was idle during the point (other processes used "
        "0.8 cores): its thread shared a core; measure on a quieter machine or with --cpus "
        "naming an idle core"
    )


def test_run_and_time_configs_check_their_cores() -> None:
    from benchbench.run.runner import RunConfig
    from benchbench.run.statements import TimeConfig

    assert RunConfig(suites=(), cpus=(0, 0)).cpus == (0,)
    with pytest.raises(UsageError, match="no usable core 100000"):
        RunConfig(suites=(), cpus=(0, 100000))
    with pytest.raises(UsageError, match="no usable core 100000"):
        TimeConfig(statements=("x",), sizes=(8,), cpus=(100000,))
    with pytest.raises(UsageError, match="--threads must be >= 1, got 0"):
        TimeConfig(statements=("x",), sizes=(8,), threads=0)
    request = TimeConfig(statements=("x",), sizes=(8,), threads=3).request(
        TimeConfig(statements=("x",), sizes=(8,)).point(8, "cpu", "float32")
    )
    assert request["threads"] == 3
