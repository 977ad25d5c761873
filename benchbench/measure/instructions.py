"""Instruction counts per call, under callgrind: a metric that no neighbour can change.

Wall time on a shared runner moves with whatever else the machine runs; the number of
instructions a call executes does not. ``run --metric instructions`` starts workers
under ``valgrind --tool=callgrind --collect-atstart=no``, one per usable core (the runner's
side: :mod:`benchbench.run.instrumented`); inside it, this module counts a point's calls by
switching collection on around them (``torch._C._valgrind_toggle``, the switch that
``torch.utils.benchmark.Timer.collect_callgrind`` uses) and reading the total of the
dump that ``_valgrind_toggle_and_dump_stats`` writes, less what the C allocator executed.

How a count is made reproducible (PyTorch's ``instruction_counts`` benchmarks and
``Timer`` do the same):

- the process has a fixed hash seed and one thread (the launcher's environment;
  callgrind runs threads one at a time anyway, and an OpenMP pool's spinning would add
  a varying number of instructions), and the garbage collector is off while counting;
- :data:`WARMUP_CALLS` calls before any count (lazy initialisation, the allocator's
  caches);
- the cost of the loop itself (the same loop over a callable that does nothing) is
  counted and subtracted, as ``Timer`` subtracts its empty statement;
- a pilot count of one call chooses ``K``, the calls of each count, so that a count
  spans at least :data:`TARGET_INSTRUCTIONS` (an allocator's occasional slow path is
  then a small share of it); :data:`REPEATS` counts of ``K`` calls give the median and
  the spread within the process;
- the C allocator's own instructions are left out (:func:`allocator_instructions`: the
  calls into :data:`ALLOCATOR_ENTRY_POINTS` and everything under them) and recorded
  apart. Their path depends on the heap that earlier allocations left, not on the code
  under test: ``torch.sqrt`` of 1,024 float32 took 11,028-11,309 instructions a call
  after ten heap states in one process (2.5 %); between two of those counts, 247 of the
  266 a call were in glibc's ``_int_free``, ``malloc_consolidate``, ``_int_malloc`` and
  ``_int_memalign``, 19 in Python's small-object allocator. Without the C allocator's
  the counts took 9,836-9,872 (0.37 %), the same in two processes. An allocation the
  code makes still counts (c10's ``allocate``, the tensor's construction); its page
  faults are for the time metric.

What counts cannot see: memory stalls and cache misses (a call that moves the same
data through a slower path executes the same instructions), time spent waiting, other
threads' work (counted here with one thread), and on a GPU everything but the host's
launch path (a CUDA point counts the instructions that enqueue its kernels, labelled
``scope: host``).

The hardware tier (``--counter pmu``): the CPU's retired-instructions counter
(:class:`Hardware`, :mod:`benchbench.machine.pmu`) counts the same loops in a worker that
runs natively, so a count costs what the calls cost; the C allocator's instructions stay
in it (a hardware counter does not know functions), so it moves with the heap's history
as callgrind's counts with the allocator did. A count records its ``tool``; counts of two
tools are never compared. It has not yet run on a machine with a PMU.
"""

from __future__ import annotations

import functools
import math
import os
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchbench.core.defaults import CONTROL_VARIABLE, OUT_FILE_VARIABLE
from benchbench.core.values import Point, Result
from benchbench.machine import pmu
from benchbench.measure.loops import make_loop
from benchbench.measure.pipeline import sync
from benchbench.measure.policy import Subject, gc_disabled

#: Seconds ``callgrind_control -i on`` may take (1.4 s measured).
CONTROL_TIMEOUT_S = 120.0
#: Calls before any count.
WARMUP_CALLS = 3
#: Fewest instructions one count spans (K calls); a count of 2e6 instructions takes
#: ~0.1 s under callgrind here.
TARGET_INSTRUCTIONS = 2_000_000
#: Most calls in one count.
MAX_CALLS = 1000
#: Most counts summed into one where the calls of a count are fixed (in-place and
#: backward points restore their K copies before each count).
MAX_TIMES = 100
#: Counts of K calls per point: their median is the point's count in this process.
REPEATS = 3
#: A point whose repeated counts differ by more than this (relative) gets a warning.
UNSTABLE_SPREAD = 0.005
#: The C allocator's entry points (glibc's names, which jemalloc and tcmalloc export too
#: when preloaded): a count leaves out the calls into them and everything they call.
ALLOCATOR_ENTRY_POINTS = frozenset(
    {
        *("malloc", "free", "calloc", "realloc", "reallocarray", "cfree"),
        *("posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc"),
        *("__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc"),
        *("__libc_memalign", "__posix_memalign", "malloc_usable_size", "sdallocx"),
    }
)


class CountError(Exception):
    """Counting is impossible in this process (not under callgrind, a dump missing)."""


class Callgrind:
    """Counts the instructions of a callable in this process, which runs under callgrind.

    ``toggle`` switches collection on, ``toggle_and_dump`` switches it off and writes a
    dump (torch's switches by default); the count is the ``totals:`` line of the dump
    ``<out_file>.<n>`` (callgrind numbers a process's dumps), deleted once read, so that
    after each count exactly one dump is there to read.
    """

    def __init__(
        self,
        out_file: str,
        toggle: Callable[[], object] | None = None,
        toggle_and_dump: Callable[[], object] | None = None,
    ) -> None:
        if toggle is None or toggle_and_dump is None:
            import torch

            toggle = torch._C._valgrind_toggle
            toggle_and_dump = torch._C._valgrind_toggle_and_dump_stats
        self._toggle = toggle
        self._toggle_and_dump = toggle_and_dump
        self._out = Path(out_file)

    @classmethod
    def from_environment(cls) -> Callgrind:
        """The counter of a worker the instrumented launcher started (CountError if not)."""
        out_file = os.environ.get(OUT_FILE_VARIABLE)
        if not out_file:
            raise CountError(
                "this worker does not run under callgrind; instruction counts come from "
                "`benchbench run --metric instructions`"
            )
        control = os.environ.get(CONTROL_VARIABLE)
        if control:
            instrument(control)
        return cls(out_file.replace("%p", str(os.getpid())))

    def count(self, run: Callable[[], object]) -> Count:
        """Instructions executed by ``run()`` (with whatever the switches themselves add),
        those of the C allocator apart."""
        self._toggle()
        run()
        self._toggle_and_dump()
        dumps = sorted(self._out.parent.glob(f"{self._out.name}.*"))
        if len(dumps) != 1:
            raise CountError(
                f"expected one callgrind dump {self._out}.N after a count, found {len(dumps)}"
            )
        text = dumps[0].read_text()
        dumps[0].unlink()
        allocator = allocator_instructions(text)
        return Count(read_total(text, str(dumps[0])) - allocator, allocator)


class Hardware:
    """Counts the instructions of a callable with the CPU's own counter (``--counter
    pmu``: :mod:`benchbench.machine.pmu`), in user space, on this thread only, natively.

    Unlike callgrind it cannot tell the C allocator's instructions from the rest (a
    count holds them), and an interrupt's return to user space can add a few; the loop
    and the switches are subtracted as for callgrind. Never yet run on a machine with a
    PMU: only its system calls, on a software event.
    """

    def __init__(self) -> None:
        counter, why = pmu.instruction_counter()
        if counter is None:
            raise CountError(f"no hardware instruction counts here: {why}")
        self._counter = counter

    def count(self, run: Callable[[], object]) -> Count:
        try:
            return Count(self._counter.count(run))
        except pmu.CounterShared as error:
            raise CountError(str(error)) from error


def counter_named(name: str) -> Counter:
    """This worker's counter of ``name`` (``pmu`` or ``callgrind``: ``defaults.COUNTERS``;
    CountError where it cannot count here)."""
    return _hardware() if name == "pmu" else Callgrind.from_environment()


@functools.cache
def _hardware() -> Hardware:
    """One hardware counter per worker, open for its life (a counting worker serves every
    point of a run)."""
    return Hardware()


#: Whether this process has switched callgrind's instrumentation on (:func:`instrument`).
_instrumented = False


def instrument(control: str) -> None:
    """Switch callgrind's instrumentation on in this process, once: ``callgrind_control
    -i on PID`` asks valgrind's gdbserver, which answers between blocks of guest code,
    so this process keeps running Python (a busy wait) until the command returns.
    Counts made after it are those of a process instrumented from its start: collection
    is still switched on only around the counted calls, after warm-up calls."""
    global _instrumented
    if _instrumented:
        return
    command = [control, "-i", "on", str(os.getpid())]
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as error:
        raise CountError(f"could not run {control}: {error}") from error
    deadline = time.monotonic() + CONTROL_TIMEOUT_S
    while child.poll() is None:
        if time.monotonic() > deadline:
            child.kill()
            break
    said = child.communicate()[0].decode(errors="replace").strip()
    if child.returncode != 0 or "OK" not in said:
        raise CountError(
            f"`{' '.join(command)}` did not switch callgrind's instrumentation on "
            f"(exit {child.returncode}): {said[-300:] or 'no output'}"
        )
    _instrumented = True


@dataclass(frozen=True)
class Count:
    """One count: the ``instructions`` executed outside the C allocator, and those of the
    ``allocator`` (module docstring: its path depends on the heap's history)."""

    instructions: int
    allocator: int = 0


def read_total(text: str, name: str = "the dump") -> int:
    """The ``Ir`` total of a callgrind dump (its ``totals:`` or ``summary:`` line; the
    header's ``summary:`` comes first, without a split of the whole dump into lines)."""
    found = _TOTAL.search(text)
    if found is None:
        raise CountError(f"{name} has no totals line")
    return int(found.group(1))


#: The total's line of a dump.
_TOTAL = re.compile(r"^(?:totals|summary):\s*(\d+)", re.MULTILINE)


def allocator_instructions(text: str) -> int:
    """The ``Ir`` a callgrind dump spent in the C allocator: the inclusive cost of every
    call into :data:`ALLOCATOR_ENTRY_POINTS` from a function outside them (so nothing is
    counted twice), read from the dump's ``cfn=`` / ``calls=`` lines. Names may be
    compressed (``(12) malloc`` once in a dump, ``(12)`` after) and carry a recursion
    suffix (``free'2``).

    It reads a dump with two regular expressions rather than line by line: it runs
    inside the instrumented worker, ~50x slower than natively, once per count (a
    point's in-place counts are up to 600 dumps of ~50 KB).
    """
    keys = {(compressed or name).strip() for compressed, name in _ENTRY_DEFINITION.findall(text)}
    if not keys:
        return 0
    calls = re.compile(
        r"cfn=(?:" + "|".join(map(re.escape, keys)) + r")(?: [^\n]*)?\ncalls=[^\n]*\n([^\n]*)\n"
    )
    spent = 0
    for call in calls.finditer(text):
        start = text.rfind("\nfn=", 0, call.start()) + 4
        caller = text[start : text.index("\n", start)]
        if caller.split(" ", 1)[0] not in keys and caller not in keys:
            spent += int(call.group(1).split()[-1])
    return spent


#: Where a dump names an allocator entry point: ``fn=(12) malloc`` (compressed: later
#: lines say ``(12)``) or ``fn=malloc``, on ``fn=`` and ``cfn=`` lines alike.
_ENTRY_DEFINITION = re.compile(
    r"fn=(\(\d+\) )?((?:"
    + "|".join(map(re.escape, sorted(ALLOCATOR_ENTRY_POINTS)))
    + r")(?:'\d+)?)\n"
)


@dataclass(frozen=True)
class Counted:
    """A point's instructions per call in one process: ``counts`` (each over ``calls``
    calls, per call, less the loop's own ``loop_per_call``) and their median ``per_call``;
    ``allocator_per_call``, the C allocator's instructions a call, left out of them."""

    per_call: float
    counts: tuple[float, ...]
    calls: int
    loop_per_call: float
    allocator_per_call: float = 0.0

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeated counts: how stable the count is here."""
        if self.per_call <= 0:
            return 0.0
        return (max(self.counts) - min(self.counts)) / self.per_call

    def extra(self, scope: str, tool: str = "callgrind") -> dict[str, Any]:
        """What ``Result.extra["instructions"]`` records about the count: ``tool`` is the
        counter that made it (counts of two counters are never compared)."""
        return {
            "tool": tool,
            "scope": scope,
            "calls": self.calls,
            "repeats": list(self.counts),
            "loop_per_call": self.loop_per_call,
            # The CPU's counter cannot tell the allocator apart: its share is in the count.
            "allocator_per_call": self.allocator_per_call if tool == "callgrind" else None,
            "spread": self.spread,
            "threads": 1,
        }


class Counter(Protocol):
    """What :func:`count_subject` needs of a counter (a :class:`Callgrind`, or a fake)."""

    def count(self, run: Callable[[], object]) -> Count: ...


def count_subject(
    subject: Subject,
    idle: Subject,
    counter: Counter,
    *,
    fixed_calls: int | None = None,
    after: Callable[[], object] | None = None,
) -> Counted:
    """Instructions per call of ``subject``'s loop, less those of ``idle`` (the same loop
    over a callable that does nothing).

    ``fixed_calls``: the calls of every count (an in-place or backward plan's copies,
    restored by ``subject.pre`` before each count); otherwise a pilot of one call
    chooses them. ``after`` runs after each loop, outside the count (a device sync).
    """
    for _ in range(WARMUP_CALLS):
        if subject.pre is not None:
            subject.pre()
        subject.loop(fixed_calls or 1)
    if after is not None:
        after()

    def one(loop_subject: Subject, calls: int) -> Count:
        if loop_subject.pre is not None:
            loop_subject.pre()
        with gc_disabled():
            # after() (a device sync) comes outside the count: only the host's side.
            counted = counter.count(lambda: loop_subject.loop(calls))
        if after is not None:
            after()
        return counted

    def total(loop_subject: Subject, calls: int, times: int) -> Count:
        parts = [one(loop_subject, calls) for _ in range(times)]
        return Count(sum(c.instructions for c in parts), sum(c.allocator for c in parts))

    # The pilot: instructions of one count of the fewest calls the subject allows.
    calls, times = fixed_calls or 1, 1
    pilot = max(1, one(subject, calls).instructions - one(idle, calls).instructions)
    wanted = max(1, math.ceil(TARGET_INSTRUCTIONS / pilot))
    if fixed_calls is None:
        calls = min(MAX_CALLS, wanted)
    else:
        # K is fixed (each count restores K copies first): sum several counts instead, so
        # the switches' own few thousand instructions are a small share of the total.
        times = min(MAX_TIMES, wanted)
    spanned = calls * times
    idles = [total(idle, calls, times) for _ in range(REPEATS)]
    loop = statistics.median(c.instructions for c in idles) / spanned
    loop_allocator = statistics.median(c.allocator for c in idles) / spanned
    subjects = [total(subject, calls, times) for _ in range(REPEATS)]
    counts = tuple(max(0.0, c.instructions / spanned - loop) for c in subjects)
    allocator = statistics.median(c.allocator / spanned - loop_allocator for c in subjects)
    return Counted(
        per_call=float(statistics.median(counts)),
        counts=counts,
        calls=spanned,
        loop_per_call=float(loop),
        allocator_per_call=max(0.0, float(allocator)),
    )


def counted_result(
    point: Point,
    subject: Subject,
    call_inputs: tuple[Any, ...],
    outputs: str,
    fixed_calls: int | None,
    work: dict[str, float | None],
    warnings: list[str],
    extra: dict[str, Any],
    counter: str = "callgrind",
    **base: Any,
) -> Result:
    """The result of a point whose instructions are counted (``metric="instructions"``)
    by ``counter`` (:func:`counter_named`): ok, with the count and no samples (no peak memory
    or trace: the time metric has them). ``base`` holds the result's other fields (code
    version, cache mode, ...)."""
    idle = Subject("idle", make_loop(_idle, call_inputs, outputs))
    device = point.device.partition(":")[0]
    counted = count_subject(
        subject,
        idle,
        counter_named(counter),
        fixed_calls=fixed_calls,
        after=None if device == "cpu" else lambda: sync(point.device),
    )
    extra["instructions"] = counted.extra("process" if device == "cpu" else "host", counter)
    extra["outputs"] = outputs
    if counted.spread > UNSTABLE_SPREAD:
        warnings.append(
            f"instruction count unstable: its {len(counted.counts)} counts differ by "
            f"{100 * counted.spread:.1f} %"
        )
    return Result(
        point=point,
        status="ok",
        stop_reason=f"instructions counted ({counted.calls} calls x {len(counted.counts)})",
        bytes_per_call=work["bytes"],
        flop_per_call=work["flops"],
        items_per_call=work["items"],
        warnings=tuple(warnings),
        extra=extra,
        instructions_per_call=counted.per_call,
        instruction_counts=(counted.per_call,),
        **base,
    )


def _idle(*_args: Any) -> None:
    """The callable of the loop whose count is subtracted: the loop's own cost."""
