"""The NVML wrapper: safe and strict calls, process listings, the driver version, on fakes."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from benchbench.core.errors import UsageError
from benchbench.machine.nvml import (
    ClockReading,
    call,
    cuda_handles,
    cuda_uuid,
    driver_version,
    locked_clocks,
    nvml_handle,
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
    """NVML clock calls on fakes: three GPUs by UUID in NVML's (PCI) order; records locks
    and resets; the GPU at NVML index ``refuse`` raises."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_LIMIT_ID_TDP = 0xFFFFFF01
    UUIDS = ("GPU-aaaa", "GPU-bbbb", "GPU-cccc")

    def __init__(self, refuse: int | None = None, error: Exception | None = None) -> None:
        self.refuse = refuse
        self.error = error or FakeNoPermission("Insufficient Permissions")
        self.log: list[tuple[str, int, int]] = []

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        if uuid not in self.UUIDS:
            raise FakeNvmlError("Not Found")
        return self.UUIDS.index(uuid)

    def nvmlDeviceGetApplicationsClock(self, handle: int, kind: int) -> int:
        raise FakeNvmlError("Not Supported")  # the default is read instead

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: int, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return 1755 + handle

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return 1410 + handle

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return 0x4

    def nvmlDeviceSetGpuLockedClocks(self, handle: int, low: int, high: int) -> None:
        if handle == self.refuse:
            raise self.error
        assert low == high
        self.log.append(("lock", handle, low))

    def nvmlDeviceResetGpuLockedClocks(self, handle: int) -> None:
        self.log.append(("reset", handle, 0))


class FakeTorch:
    """``torch.cuda.get_device_properties(i).uuid`` as CUDA numbers the visible GPUs."""

    def __init__(self, uuids: list[str]) -> None:
        self.cuda = self
        self._uuids = uuids

    def get_device_properties(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(uuid=self._uuids[index])  # torch gives no "GPU-" prefix


TDP = ClockNvml.NVML_CLOCK_LIMIT_ID_TDP


def test_cuda_devices_are_matched_to_nvml_by_uuid_not_by_index() -> None:
    # CUDA_VISIBLE_DEVICES=2,0: cuda:0 is NVML's GPU 2, cuda:1 NVML's GPU 0.
    torch = FakeTorch(["cccc", "aaaa"])
    uuids = {i: cuda_uuid(torch, i) for i in range(2)}
    assert uuids == {0: "cccc", 1: "aaaa"}
    nvml = ClockNvml()
    assert cuda_handles(nvml, uuids) == {0: 2, 1: 0}
    assert nvml_handle(nvml, "GPU-bbbb") == 1  # already prefixed: taken as it is
    assert nvml_handle(nvml, "dddd") is None  # a GPU NVML does not know
    assert nvml_handle(object(), "aaaa") is None  # a pynvml without the function
    assert nvml_handle(None, "aaaa") is None and nvml_handle(nvml, None) is None
    assert cuda_uuid(FakeTorch([]), 0) is None


def test_a_mig_instance_is_found_by_its_mig_uuid() -> None:
    class MigNvml(ClockNvml):
        UUIDS = ("GPU-aaaa", "MIG-eeee")

    assert nvml_handle(MigNvml(), "eeee") == 1


def test_sm_clock_reader_reads_the_clock_beside_the_reference() -> None:
    read = sm_clock_reader(ClockNvml(), 1)  # an NVML index
    assert read is not None
    assert read() == ClockReading(sm_mhz=1411, reference_mhz=1756, reasons_mask=0x4)
    by_uuid = sm_clock_reader(ClockNvml(), "cccc")  # a CUDA device's torch UUID
    assert by_uuid is not None and by_uuid() == ClockReading(1412, 1757, 0x4)
    assert sm_clock_reader(ClockNvml(), "dddd") is None
    assert sm_clock_reader(None, 0) is None


def test_a_reading_marked_gpu_idle_is_idle() -> None:
    assert ClockReading(345, 1980, 0x1).idle and ClockReading(345, 1980, 0x5).idle
    assert not ClockReading(1980, 1980, 0x4).idle and not ClockReading(1980, 1980, None).idle


def test_locked_clocks_lock_the_uuid_matched_gpus_to_their_base_clock_and_reset_after() -> None:
    nvml = ClockNvml()
    # cuda:0 is NVML's GPU 2 and cuda:1 NVML's GPU 0: NVML's GPU 1 (someone else's) untouched.
    with locked_clocks(nvml, "", {0: "cccc", 1: "aaaa"}) as mhz:
        assert mhz == {0: 1412, 1: 1410}  # the SM clock read after locking
        # nvbench's "base": the TDP limit as min and max, not the default application
        # clock, which on an H100 SXM is the 1980 MHz boost clock a power cap undercuts.
        assert nvml.log == [("lock", 2, TDP), ("lock", 0, TDP)]
    assert nvml.log[2:] == [("reset", 2, 0), ("reset", 0, 0)]


def test_locked_clocks_refuse_a_gpu_nvml_cannot_match_before_locking_any() -> None:
    nvml = ClockNvml()
    with pytest.raises(UsageError) as info, locked_clocks(nvml, "", {0: "aaaa", 1: "dddd"}):
        pass
    assert "cannot lock the clocks of cuda:1 (NVML knows no GPU with its UUID 'dddd')" in str(
        info.value
    )
    with pytest.raises(UsageError, match="its UUID is unknown"), locked_clocks(nvml, "", {0: None}):
        pass
    assert nvml.log == []


def test_locked_clocks_refused_is_a_usage_error_naming_the_fix_and_resets_the_rest() -> None:
    nvml = ClockNvml(refuse=1)
    with pytest.raises(UsageError) as info, locked_clocks(nvml, "", {0: "aaaa", 1: "bbbb"}):
        pass
    text = str(info.value)
    assert "cannot lock the clocks of cuda:1 (Insufficient Permissions)" in text
    assert "run as root" in text and "-lgc base" in text
    assert nvml.log == [("lock", 0, TDP), ("reset", 0, 0)]
    unsupported = ClockNvml(refuse=0, error=FakeNvmlError("Not Supported"))
    refused = pytest.raises(UsageError, match="does not allow it: run without --lock-clocks")
    with refused, locked_clocks(unsupported, "", {0: "aaaa"}):
        pass


def test_locked_clocks_without_nvml_says_why_and_what_to_do() -> None:
    no_nvml = locked_clocks(None, "nvmlInit failed: no driver", {0: "aaaa"})
    with pytest.raises(UsageError) as info, no_nvml:
        pass
    assert str(info.value) == (
        "--lock-clocks needs NVML: nvmlInit failed: no driver; install nvidia-ml-py on a "
        "machine with an NVIDIA driver, or run without --lock-clocks"
    )


def test_visible_cuda_uuids_reads_the_workers_view_in_a_child(monkeypatch) -> None:
    """The child's answer (torch's UUIDs, CUDA's order) becomes {index: UUID}; a failed
    child is None. The real child needs a GPU; here its command is replaced."""
    import subprocess

    from benchbench.machine import nvml as module

    def fake_run(args, **kw):
        assert "get_device_properties" in args[-1]
        return SimpleNamespace(stdout='["cccc", "aaaa"]\n')

    module._uuids_seen_with.cache_clear()
    monkeypatch.setattr(module.subprocess, "run", fake_run)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert module.visible_cuda_uuids() == {0: "cccc", 1: "aaaa"}
    runs: list[str] = []
    monkeypatch.setattr(
        module.subprocess,
        "run",
        lambda args, **kw: runs.append("run") or SimpleNamespace(stdout='["bbbb"]'),
    )
    assert module.visible_cuda_uuids() == {0: "cccc", 1: "aaaa"} and runs == []  # cached
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another view: asked again
    assert module.visible_cuda_uuids() == {0: "bbbb"} and runs == ["run"]
    module._uuids_seen_with.cache_clear()

    def failing(args, **kw):
        raise subprocess.CalledProcessError(1, args)

    monkeypatch.setattr(module.subprocess, "run", failing)
    assert module.visible_cuda_uuids() is None
    module._uuids_seen_with.cache_clear()
