"""The NVML wrapper: safe and strict calls, process listings, the driver version, on fakes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchbench.core.errors import UsageError
from benchbench.machine.nvml import (
    ClockReading,
    call,
    driver_version,
    locked_clocks,
    process_name,
    read,
    running_processes,
    sm_clock_reader,
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


class FakeNoPermission(Exception):
    """Stands for pynvml.NVMLError_NoPermission."""


class ClockNvml:
    """NVML clock calls on fakes: records locks and resets; GPU ``refuse`` raises."""

    NVML_CLOCK_SM = 1

    def __init__(self, refuse: int | None = None, error: Exception | None = None) -> None:
        self.refuse = refuse
        self.error = error or FakeNoPermission("Insufficient Permissions")
        self.log: list[tuple[str, int, int]] = []

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetApplicationsClock(self, handle: int, kind: int) -> int:
        raise FakeNvmlError("Not Supported")  # the default is read instead

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: int, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return 1755 + handle

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        return 1410

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return 0x4

    def nvmlDeviceSetGpuLockedClocks(self, handle: int, low: int, high: int) -> None:
        if handle == self.refuse:
            raise self.error
        self.log.append(("lock", handle, low))

    def nvmlDeviceResetGpuLockedClocks(self, handle: int) -> None:
        self.log.append(("reset", handle, 0))


def test_sm_clock_reader_reads_the_clock_beside_the_reference() -> None:
    read = sm_clock_reader(ClockNvml(), 1)
    assert read is not None
    assert read() == ClockReading(sm_mhz=1410, reference_mhz=1756, reasons_mask=0x4)
    assert sm_clock_reader(None, 0) is None


def test_locked_clocks_lock_to_the_default_and_reset_after() -> None:
    nvml = ClockNvml()
    with locked_clocks(nvml, "", [0, 1]) as mhz:
        assert mhz == {0: 1755, 1: 1756}
        assert nvml.log == [("lock", 0, 1755), ("lock", 1, 1756)]
    assert nvml.log[2:] == [("reset", 0, 0), ("reset", 1, 0)]


def test_locked_clocks_refused_is_a_usage_error_naming_the_fix_and_resets_the_rest() -> None:
    nvml = ClockNvml(refuse=1)
    with pytest.raises(UsageError) as info, locked_clocks(nvml, "", [0, 1]):
        pass
    text = str(info.value)
    assert "cannot lock the clocks of GPU 1 (Insufficient Permissions)" in text
    assert "run as root" in text and "nvidia-smi -i 1 -lgc" in text
    assert nvml.log == [("lock", 0, 1755), ("reset", 0, 0)]
    unsupported = ClockNvml(refuse=0, error=FakeNvmlError("Not Supported"))
    refused = pytest.raises(UsageError, match="does not allow it: run without --lock-clocks")
    with refused, locked_clocks(unsupported, "", [0]):
        pass


def test_locked_clocks_without_nvml_says_why_and_what_to_do() -> None:
    with pytest.raises(UsageError) as info, locked_clocks(None, "nvmlInit failed: no driver", [0]):
        pass
    assert str(info.value) == (
        "--lock-clocks needs NVML: nvmlInit failed: no driver; install nvidia-ml-py on a "
        "machine with an NVIDIA driver, or run without --lock-clocks"
    )
