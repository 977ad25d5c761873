"""The CPU's counters through ``perf_event_open``: the structure, the ioctls and the read
proven on a real software event (which needs no PMU), the reasons a hardware counter
cannot open, and, where the machine has a PMU, a real instruction count."""

from __future__ import annotations

import ctypes
import errno
from pathlib import Path

import pytest

from benchbench.machine import pmu
from benchbench.machine.doctor import check_hardware_counters
from benchbench.machine.doctor_sources import SystemSources

#: Whether this machine shows a CPU PMU (``cpu``, or ``cpu_core``/``cpu_atom`` on hybrid
#: Intel parts) to the kernel's perf events.
HAS_PMU_DEVICE = any(Path("/sys/bus/event_source/devices").glob("cpu*"))


def _busy(n: int = 200_000) -> int:
    return sum(i * i for i in range(n))


def _software(config: int = pmu.PERF_COUNT_SW_TASK_CLOCK) -> pmu.PerfCounter:
    counter, why = pmu.open_counter(pmu.PERF_TYPE_SOFTWARE, config)
    if counter is None:
        pytest.skip(f"no perf events here at all: {why}")
    return counter


def test_the_attribute_structure_is_perf_event_attr_version_5() -> None:
    # PERF_ATTR_SIZE_VER0..VER5 end at 64, 72, 80, 96, 104, 112 bytes (linux/perf_event.h).
    attr = pmu._Attr
    assert ctypes.sizeof(attr) == 112
    ends = {"flags": 48, "config2": 72, "branch_sample_type": 80, "clockid": 96}
    ends |= {"sample_regs_intr": 104, "reserved_2": 112}
    for name, end in ends.items():
        field = getattr(attr, name)
        assert field.offset + field.size == end, name
    assert attr.config.offset == 8 and attr.read_format.offset == 32


def test_a_software_counter_counts_only_while_enabled_and_resets() -> None:
    with _software() as counter:
        assert counter.read() == 0  # opened disabled
        _busy()
        assert counter.read() == 0  # still disabled: nothing counted
        counted = counter.count(_busy)
        assert counted > 0
        _busy()  # disabled again by count()
        assert counter.read() == counted
        counter.reset()
        assert counter.read() == 0
    assert counter.fd == -1


def test_two_counters_are_independent_descriptors() -> None:
    with _software() as first, _software() as second:
        assert first.fd != second.fd
        first.count(_busy)
        assert second.read() == 0


def test_the_hardware_counter_says_why_it_cannot_open_here() -> None:
    if HAS_PMU_DEVICE:
        pytest.skip("this machine exposes a CPU PMU; the no-PMU reason is for machines without")
    counter, why = pmu.instruction_counter()
    assert counter is None
    assert "exposes no hardware counters" in why and "ENOENT" in why
    found = pmu.availability()
    assert found.startswith("none (") and "no hardware counters" in found


def test_refusals_name_the_cause_and_the_fix() -> None:
    for code in (errno.EACCES, errno.EPERM):
        text = pmu.refusal(code)
        assert "kernel.perf_event_paranoid is" in text
        assert "sudo sysctl kernel.perf_event_paranoid=2" in text and "seccomp" in text
    assert "no hardware counters" in pmu.refusal(errno.ENOENT)
    assert "CONFIG_PERF_EVENTS" in pmu.refusal(errno.ENOSYS)
    assert "EINVAL" in pmu.refusal(errno.EINVAL)


def test_another_platform_or_architecture_is_named(monkeypatch) -> None:
    monkeypatch.setattr(pmu.platform, "machine", lambda: "riscv64")
    counter, why = pmu.instruction_counter()
    assert counter is None and "riscv64" in why
    monkeypatch.setattr(pmu.sys, "platform", "darwin")
    counter, why = pmu.instruction_counter()
    assert counter is None and "Linux" in why and "darwin" in why


def test_doctor_names_the_hardware_counters() -> None:
    (found,) = check_hardware_counters(SystemSources(pmu=lambda: pmu.AVAILABLE))
    assert found.status == "ok" and "--counter pmu" in found.value
    (missing,) = check_hardware_counters(SystemSources(pmu=lambda: "none (no PMU here)"))
    assert missing.status == "info" and missing.value == "none (no PMU here)"
    assert "callgrind" in missing.advice
    (here,) = check_hardware_counters(SystemSources())
    assert (here.status == "ok") == (pmu.availability() == pmu.AVAILABLE)


def test_the_hardware_counter_counts_instructions() -> None:
    counter, why = pmu.instruction_counter()
    if counter is None:
        pytest.skip(f"no hardware instruction counts on this machine: {why}")
    with counter:
        short = counter.count(lambda: _busy(10_000))
        long = counter.count(lambda: _busy(100_000))
    assert 0 < short < long
