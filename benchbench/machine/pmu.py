"""The CPU's hardware counters (its PMU), read through Linux's ``perf_event_open``.

A counter here counts one event for the calling thread, in user space only
(``exclude_kernel``, ``exclude_hv``: a page fault's kernel work is the time metric's),
between :meth:`PerfCounter.enable` and :meth:`PerfCounter.disable`. It is what
``run --metric instructions --counter pmu`` counts with
(:mod:`benchbench.measure.instructions`), and what PyTorch's
``torch._C._instruction_counter`` opens for its compile-time benchmarks; that helper
prints to stderr and answers -1 without a reason, so this module makes the system call
itself, through ``ctypes``, and says why a counter cannot be opened:

- no PMU: a VM whose hypervisor exposes none (``/sys/bus/event_source/devices`` has no
  ``cpu``) answers ENOENT;
- ``kernel.perf_event_paranoid`` above 2 (3 on Debian's kernels), or a container whose
  seccomp profile blocks the call, answers EACCES or EPERM;
- not Linux, or an architecture whose system call number is not known here.

Software events (``PERF_TYPE_SOFTWARE``: task clock, context switches) need no PMU and
open on such VMs too; the tests prove the structure, the ioctls and the read with them.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

#: ``perf_event_open``'s number per architecture (``platform.machine()``).
SYSCALL_NUMBERS = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241}

#: Event types and configs (``linux/perf_event.h``).
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_CONTEXT_SWITCHES = 3

#: ``attr.flags`` bits: created disabled, user space only.
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
#: ``read_format``: the value, then the times the event was enabled and running.
_TOTAL_TIME_ENABLED, _TOTAL_TIME_RUNNING = 1 << 0, 1 << 1
#: ``_IO('$', n)``: the same numbers on every architecture.
_IOC_ENABLE, _IOC_DISABLE, _IOC_RESET = 0x2400, 0x2401, 0x2403
_FLAG_FD_CLOEXEC = 1 << 3

PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"
#: Where the kernel lists its event sources (``cpu`` is the CPU's PMU).
DEVICES = "/sys/bus/event_source/devices"
#: What ``doctor`` and the environment say where hardware instruction counts open.
AVAILABLE = "instructions"


class _Attr(ctypes.Structure):
    """``struct perf_event_attr`` up to ``PERF_ATTR_SIZE_VER5`` (112 bytes); the flag
    bit fields are one ``u64``."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    ]


class CounterShared(Exception):
    """The kernel ran the counter for only part of the time it was enabled (another user
    of the PMU took it): the count is not the whole of what ran."""


class PerfCounter:
    """One open counter of the calling thread; :meth:`count` is reset, enable, run,
    disable, read. Close it (or use it as a context manager) to release the descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def reset(self) -> None:
        fcntl.ioctl(self.fd, _IOC_RESET, 0)

    def enable(self) -> None:
        fcntl.ioctl(self.fd, _IOC_ENABLE, 0)

    def disable(self) -> None:
        fcntl.ioctl(self.fd, _IOC_DISABLE, 0)

    def read(self) -> int:
        """The count since the last reset; :class:`CounterShared` when the kernel did not
        run the counter all the time it was enabled (multiplexed with another user)."""
        data = os.read(self.fd, 24)
        if len(data) < 24:  # an event the kernel put in its error state reads as nothing
            raise CounterShared(f"the counter could not be read ({len(data)} of 24 bytes)")
        value, enabled, running = (
            int.from_bytes(data[i : i + 8], sys.byteorder) for i in (0, 8, 16)
        )
        if running < enabled:
            share = running / enabled if enabled else 0.0
            raise CounterShared(
                f"the counter ran {100 * share:.0f} % of the time it was enabled: another "
                "user of the hardware counters (perf, a watchdog) shared it"
            )
        return value

    def count(self, run: Callable[[], object]) -> int:
        """The events of ``run()`` on this thread."""
        self.reset()
        self.enable()
        run()
        self.disable()
        return self.read()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> PerfCounter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def open_counter(kind: int, config: int) -> tuple[PerfCounter | None, str]:
    """A disabled, user-space-only counter of event ``(kind, config)`` for the calling
    thread, and ``""``; or None and why it cannot be opened here (never raises)."""
    if not sys.platform.startswith("linux"):
        return (
            None,
            f"hardware counters are read through Linux's perf_event_open; this is {sys.platform}",
        )
    number = SYSCALL_NUMBERS.get(platform.machine().lower())
    if number is None:
        return (
            None,
            f"perf_event_open's system call number on {platform.machine()} is not known here",
        )
    attr = _Attr(type=kind, config=config, flags=_DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV)
    attr.size = ctypes.sizeof(_Attr)
    attr.read_format = _TOTAL_TIME_ENABLED | _TOTAL_TIME_RUNNING
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as error:
        return None, f"cannot load the C library for perf_event_open: {error}"
    libc.syscall.restype = ctypes.c_long
    # pid 0, cpu -1: this thread, on whatever CPU it runs; no group.
    fd = libc.syscall(
        ctypes.c_long(number),
        ctypes.byref(attr),
        ctypes.c_long(0),
        ctypes.c_long(-1),
        ctypes.c_long(-1),
        ctypes.c_ulong(_FLAG_FD_CLOEXEC),
    )
    if fd >= 0:
        return PerfCounter(int(fd)), ""
    return None, refusal(ctypes.get_errno())


def refusal(code: int) -> str:
    """Why ``perf_event_open`` failed with errno ``code``, and the fix where there is one."""
    if code in (errno.ENOENT, errno.ENODEV, errno.EOPNOTSUPP):
        name = errno.errorcode.get(code, code)
        pmus = sorted(p.name for p in Path(DEVICES).glob("cpu*"))
        if pmus:
            return (
                f"the CPU's PMU ({', '.join(pmus)} in {DEVICES}) does not count retired "
                f"instructions for a thread here: perf_event_open answered {name}"
            )
        return (
            "this machine (a VM?) exposes no hardware counters: perf_event_open answered "
            f"{name} and {DEVICES} has no cpu PMU"
        )
    if code in (errno.EACCES, errno.EPERM):
        return (
            f"perf_event_open was refused ({errno.errorcode[code]}): kernel.perf_event_paranoid "
            f"is {_paranoid()}, and a thread's user-space counts need 2 or less: `sudo sysctl "
            "kernel.perf_event_paranoid=2` (or CAP_PERFMON); in a container, a seccomp "
            "profile that allows perf_event_open"
        )
    if code == errno.ENOSYS:
        return "this kernel has no perf_event_open (built without CONFIG_PERF_EVENTS)"
    return f"perf_event_open failed: {os.strerror(code)} ({errno.errorcode.get(code, code)})"


def _paranoid() -> str:
    try:
        return Path(PARANOID_PATH).read_text().strip()
    except OSError as error:
        return f"unreadable ({error.strerror})"


def instruction_counter() -> tuple[PerfCounter | None, str]:
    """:func:`open_counter` of the CPU's retired instructions."""
    return open_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS)


def availability() -> str:
    """:data:`AVAILABLE` where hardware instruction counts open here, else ``none
    (REASON)``: what the environment and ``doctor`` record (one system call, no torch)."""
    try:
        counter, why = instruction_counter()
    except Exception as error:  # the environment is collected whatever happens here
        return f"none ({type(error).__name__}: {error})"
    if counter is None:
        return f"none ({why})"
    counter.close()
    return AVAILABLE
