"""The instrumented workers: processes under callgrind that count every point's
instructions (``run --metric instructions``).

Importing torch under callgrind's instrumentation takes 137 s on a 2-core AVX2 EPYC (2.7 s
natively), so a worker pays the import once, and without the instrumentation: each
worker, started with ``valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no``
(31 s for the import), switches instrumentation on before its first count
(``callgrind_control -i on``; where valgrind's package lacks that script, the worker is
instrumented from its start) and answers ``metric: instructions`` requests until the
run's points are counted (collection is switched on only around the counted calls:
:mod:`benchbench.measure.instructions`). A run starts one such worker per core it may
use, up to :data:`MAX_COUNTING_WORKERS` (:func:`counting_workers`), worker n of N counting
the plan's points n, n + N, ..., the same ones in the same order on every run: a count
is of its own process's instructions, so what runs on the other core does not change
it, and what its own process ran before is the same each time. Their environment
makes counts reproducible: a fixed hash seed (``PYTHONHASHSEED=0``: dict and set order,
so the same code paths, in every process) and one thread (``OMP_NUM_THREADS=1``; the
request says ``threads: 1`` as well).

The hardware tier (``--counter pmu``) counts the same way with the CPU's own counter,
in workers that run natively (:class:`HardwareLauncher`, the same fixed hash seed and
one thread), where the machine exposes one: :func:`hardware_counter` says why not,
before anything is started.

The counts of a point are merged into its timed result by :func:`with_counts` (a run
with both metrics), or stand alone (``--metric instructions``: no time samples).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchbench.core.defaults import CONTROL_VARIABLE, COUNTERS, OUT_FILE_VARIABLE
from benchbench.core.errors import UsageError
from benchbench.core.values import Result
from benchbench.machine import pmu
from benchbench.machine.allocator import worker_environment
from benchbench.machine.cpus import usable_cpus
from benchbench.run.workers import Spawner

#: The metrics ``run --metric`` takes.
METRICS = ("time", "instructions")
#: How much slower a point runs under callgrind than natively (~50x measured here for
#: elementwise ops and the torch import): an instruction request's timeout is the
#: run's times this (times 1 for the hardware counter, which runs natively).
SLOWDOWN = 50.0
#: Seconds the instrumented worker may take to import torch (31 s idle on a 2-core EPYC,
#: 137 s where callgrind instruments from the start).
START_TIMEOUT_S = 900.0

VALGRIND_OPTIONS = (
    "--tool=callgrind",
    "--quiet",  # its banner and summary would fill the run's stderr
    "--collect-atstart=no",  # counted only between the toggles
    "--dump-line=no",  # a dump holds totals per function only: small and quick to write
    "--dump-instr=no",
    "--combine-dumps=no",
)


def parse_metrics(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``--metric`` as a tuple: ``time``, ``instructions`` or both (comma-separated)."""
    if text is None:
        return ("time",)
    items = text.split(",") if isinstance(text, str) else list(text)
    names = tuple(dict.fromkeys(item.strip() for item in items if item.strip()))
    bad = [n for n in names if n not in METRICS]
    if bad or not names:
        raise UsageError(f"--metric must be time, instructions or time,instructions, got {text!r}")
    return names


def valgrind() -> str:
    """The ``valgrind`` program, or a UsageError naming the package that provides it."""
    found = shutil.which("valgrind")
    if found is None:
        raise UsageError(
            "--metric instructions counts under valgrind's callgrind, and valgrind is not "
            "installed: apt-get install valgrind (Debian, Ubuntu), dnf install valgrind "
            "(Fedora), or drop --metric instructions"
        )
    return found


def known_counter(name: str) -> str:
    """``name`` when it is one of the counters, else a UsageError naming them."""
    if name not in COUNTERS:
        raise UsageError(f"--counter must be one of {', '.join(COUNTERS)}, got {name!r}")
    return name


def check_counter(name: str) -> str:
    """``--counter``'s value, or a UsageError naming the counters and, for ``pmu`` on a
    machine without hardware counters, why and what to use instead."""
    if known_counter(name) == "pmu":
        counter, why = pmu.instruction_counter()
        if counter is None:
            raise UsageError(
                f"--counter pmu counts with the CPU's hardware counters, and {why}; count "
                "under callgrind instead (drop --counter, or --counter callgrind)"
            )
        counter.close()
    return name


def slowdown(counter: str) -> float:
    """How much longer a count request of ``counter`` may take than a timed one."""
    return SLOWDOWN if counter == "callgrind" else 1.0


#: Most counting workers a run starts (each under callgrind holds ~1.1 GB).
MAX_COUNTING_WORKERS = 4


def counting_workers() -> int:
    """Counting workers a run starts: one per core this process may use, at most
    :data:`MAX_COUNTING_WORKERS`. A count is of its own process's instructions, so
    workers counting side by side give the counts one alone gives; worker n of N counts
    the plan's points n, n + N, ... (:meth:`benchbench.run.visits.Visits.count`)."""
    return max(1, min(MAX_COUNTING_WORKERS, len(usable_cpus())))


def counting_launcher(
    counter: str, memory_limit_bytes: int = 0, allocator: str = "system"
) -> Spawner:
    """The launcher of the run's counting worker: under callgrind, or native for ``pmu``."""
    if counter == "pmu":
        return HardwareLauncher(memory_limit_bytes, allocator)
    return InstrumentedLauncher(memory_limit_bytes, allocator)


def _counting_environment(allocator: str) -> dict[str, str]:
    """A counting worker's environment: reproducible paths (hash seed) on one thread."""
    env = worker_environment(allocator)
    env.update({"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"})
    return env


class HardwareLauncher(Spawner):
    """A :class:`Spawner` of the native worker that counts with the CPU's counter."""

    def __init__(self, memory_limit_bytes: int = 0, allocator: str = "system") -> None:
        check_counter("pmu")
        super().__init__(memory_limit_bytes, _counting_environment(allocator))


class InstrumentedLauncher(Spawner):
    """A :class:`Spawner` whose worker runs under callgrind, its dumps in a temp folder
    removed by :meth:`close`."""

    def __init__(self, memory_limit_bytes: int = 0, allocator: str = "system") -> None:
        program = valgrind()
        self.folder = Path(tempfile.mkdtemp(prefix="benchbench-callgrind-"))
        out_file = str(self.folder / "callgrind.%p")
        env = _counting_environment(allocator)
        env[OUT_FILE_VARIABLE] = out_file
        control = shutil.which("callgrind_control")
        if control is not None:
            env[CONTROL_VARIABLE] = control
        instr = "--instr-atstart=no" if control is not None else "--instr-atstart=yes"
        super().__init__(
            memory_limit_bytes,
            env,
            prefix=(program, *VALGRIND_OPTIONS, instr, f"--callgrind-out-file={out_file}"),
            start_timeout_s=START_TIMEOUT_S,
        )

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def count_request(
    request: Mapping[str, Any], timed: bool, counter: str = "callgrind"
) -> dict[str, Any]:
    """A job's request for the counting worker: one thread, no trace, ``counter``; the
    reference check only where no timed process checks the point (``timed`` False)."""
    out = dict(request)
    out.update(metric="instructions", counter=counter, threads=1, profile_dir=None)
    if timed:
        out["check"] = False
    return out


def with_counts(timed: Result, counted: Result) -> Result:
    """A point's timed result with the instructions its instrumented worker counted.

    A count that failed or was skipped leaves the time as it is, with a warning that
    says why; a timed result that failed stays that failure.
    """
    if timed.status != "ok":
        return timed
    if counted.status != "ok" or counted.instructions_per_call is None:
        why = counted.reason or counted.status
        return replace(timed, warnings=(*timed.warnings, f"instructions not counted: {why}"))
    notes = tuple(w for w in counted.warnings if w.startswith("instruction"))
    return replace(
        timed,
        instructions_per_call=counted.instructions_per_call,
        instruction_counts=counted.instruction_counts,
        warnings=(*timed.warnings, *notes),
        extra={**timed.extra, "instructions": counted.extra.get("instructions", {})},
    )
