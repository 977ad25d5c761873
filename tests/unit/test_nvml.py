"""The NVML wrapper: safe and strict calls, process listings, the driver version, on fakes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchbench.machine.nvml import (
    call,
    driver_version,
    process_name,
    read,
    running_processes,
)

NO_SUCH_PID = 999_999_999  # above Linux's pid_max (4,194,304): never a real process


class FakeNvmlError(Exception):
    """Stands for pynvml.NVMLError_NotSupported in the fake."""


@dataclass
class FakeProcessInfo:
    pid: int


class FakeNvml:
    """A stand-in for an initialised ``pynvml`` module; never reported as real data."""

    def __init__(self, driver: object = b"550.54.15", graphics_fails: bool = False) -> None:
        self.driver = driver
        self.graphics_fails = graphics_fails

    def nvmlSystemGetDriverVersion(self) -> object:
        if isinstance(self.driver, Exception):
            raise self.driver
        return self.driver

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[FakeProcessInfo]:
        return [FakeProcessInfo(10 + handle)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[FakeProcessInfo]:
        if self.graphics_fails:
            raise FakeNvmlError("Not Supported")
        return [FakeProcessInfo(20 + handle)]


def test_read_turns_failures_and_missing_functions_into_none() -> None:
    def broken() -> int:
        raise FakeNvmlError("Not Supported")

    assert read(lambda a, b: a + b, 2, 3) == 5
    assert read(broken) is None
    assert read(None) is None


def test_call_raises_with_the_reason() -> None:
    def broken() -> int:
        raise FakeNvmlError("Not Supported")

    assert call(lambda a: a * 2, 21) == 42
    with pytest.raises(FakeNvmlError, match="Not Supported"):
        call(broken)
    with pytest.raises(LookupError, match="not in this pynvml version"):
        call(None)


def test_running_processes_lists_compute_and_graphics() -> None:
    pids = [p.pid for p in running_processes(FakeNvml(), 1)]
    assert pids == [11, 21]


def test_running_processes_keeps_the_readable_listing_unless_strict() -> None:
    nvml = FakeNvml(graphics_fails=True)
    assert [p.pid for p in running_processes(nvml, 0)] == [10]
    with pytest.raises(FakeNvmlError):
        running_processes(nvml, 0, strict=True)


def test_driver_version_decodes_bytes_and_is_none_when_unreadable() -> None:
    assert driver_version(FakeNvml(b"550.54.15")) == "550.54.15"
    assert driver_version(FakeNvml("535.104.05")) == "535.104.05"
    assert driver_version(FakeNvml(FakeNvmlError("Uninitialized"))) is None
    assert driver_version(None) is None


def test_process_name_of_a_missing_process_is_none() -> None:
    assert process_name(NO_SUCH_PID) is None
