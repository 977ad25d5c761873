"""The measurement policy: warm-up, calibration, adaptive sampling, stopping.

Pure logic over two injected collaborators, so that it is tested with fake clocks:

- a :class:`Timer` that times blocks of calls on one device (CPU host clock, CUDA
  event pairs, MPS sync + host clock; see :mod:`benchbench.measure.timers`);
- a host ``clock`` (``time.perf_counter_ns`` by default) for the policy's own
  budgets (warm-up length, per-point time cap).

The engine also holds the process state it can hold (as ``timeit`` does): it runs
``gc.collect()`` before sampling and keeps the garbage collector disabled inside
every timed block, and it counts the minor page faults of the timed blocks
(``getrusage``), so that allocation cost is visible beside the time.

Several :class:`Subject` s measured together are **interleaved**: each round takes
one sample of every subject in a shuffled order, so drift on a shared machine hits
them alike.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchbench.core.defaults import POLICY_MAX_TIME_S, POLICY_TARGET_REL_CI
from benchbench.core.stats import Stats
from benchbench.measure.faults import fault_warning, minor_faults

Clock = Callable[[], int]  # nanoseconds
FaultCounter = Callable[[], int]  # minor page faults of this process so far

#: What ``Result.extra["gc"]`` says about every point the engine measured.
GC_NOTE = "collected, disabled while timing"


@contextlib.contextmanager
def gc_disabled() -> Iterator[None]:
    """The garbage collector off inside the block, back as it was after, as ``timeit`` does.

    A full collection of a process that imported torch walks ~180,000 objects and
    took 100-200 ms here (load ~2): inside a timed block it would land on one sample
    at random.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class Block:
    """``loop(calls)`` runs the workload ``calls`` times; ``pre`` runs untimed before it."""

    loop: Callable[[int], object]
    calls: int
    pre: Callable[[], object] | None = None


class Timer(Protocol):
    """Times blocks of calls on one device.

    A timer may also offer ``host_block_s`` (the host seconds each block of the last
    :meth:`measure` took to enqueue: CUDA) and ``overhead_s()`` (its own cost, measured
    on an empty block: MPS); the engine uses them where present.
    """

    name: str

    def measure(self, blocks: Sequence[Block]) -> list[float]:
        """Run each block once, in order; return each block's duration in seconds."""
        ...

    def sync(self) -> None:
        """Wait for all queued work on the device."""
        ...


@dataclass(frozen=True)
class Policy:
    """How long and how precisely to measure one point.

    Defaults follow the anchors: warm-up of at least 10 calls or 0.1 s (capped at
    1 s), samples of >= 1 ms with the timer's own cost <= 0.1 % of a sample, at least
    10 samples, stop when the median's 95 % CI half-width is <= 3 % of the median.
    ``max_time_s`` caps the sampling of one point; it is the CLI's ``--budget``.
    The same target judges a run's two-level interval (:mod:`benchbench.run.allocate`):
    3 %, because within a process a point is precise to 0.5-2 % here, while fresh
    processes of it disagree by 1-20 %, so a tighter per-process target buys samples the
    headline interval cannot use.
    """

    target_rel_ci: float = POLICY_TARGET_REL_CI
    min_samples: int = 10
    max_samples: int = 10_000
    min_time_s: float = 0.05
    max_time_s: float = POLICY_MAX_TIME_S
    min_sample_s: float = 1e-3
    max_timer_overhead: float = 0.001
    warmup_min_calls: int = 10
    warmup_min_s: float = 0.1
    warmup_max_s: float = 1.0
    max_calibration_rounds: int = 40
    fixed_calls: int | None = None  # cold-cache mode: one call per sample
    #: False: sample until the time cap even when precise sooner (``ab``'s lockstep, so
    #: that both sides' samples cover the same moments: :func:`measure`).
    stop_when_precise: bool = True
    #: ``run --cuda-graph``: CUDA points replay a captured graph (measure.cuda_graph).
    cuda_graph: bool = False
    rounds_per_batch: int = 1  # >1 on CUDA: one synchronize per batch of samples
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "target_rel_ci": self.target_rel_ci > 0,
            "min_samples": self.min_samples >= 2,
            "max_samples": self.max_samples >= self.min_samples,
            "max_time_s": self.max_time_s > 0,
            "min_sample_s": self.min_sample_s > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"Policy.{name} is out of range: {getattr(self, name)!r}")


@dataclass(frozen=True)
class Subject:
    """One callable to measure, as a loop over calls (see :mod:`benchbench.measure.loops`)."""

    name: str
    loop: Callable[[int], object]
    pre: Callable[[], object] | None = None
    #: A wait before each calibrated or sampled block, before ``pre`` (``ab``'s lockstep
    #: turn: :func:`benchbench.measure.pipeline.gated`); warm-up never waits on it.
    gate: Callable[[], object] | None = None

    def block_pre(self) -> Callable[[], object] | None:
        """What runs untimed before each calibrated or sampled block: the gate, then
        ``pre`` (warm-up takes ``pre`` alone)."""
        gate, pre = self.gate, self.pre
        if gate is None:
            return pre

        def wait_then_pre() -> None:
            gate()
            if pre is not None:
                pre()

        return wait_then_pre


@dataclass(frozen=True)
class Measured:
    """Raw outcome for one subject: samples and how they were obtained.

    ``minor_faults_per_call`` counts the page faults of the sampled blocks over the
    calls they timed (None where nothing counted them); ``gc`` says how the garbage
    collector was held (:data:`GC_NOTE`).
    """

    name: str
    samples_s: tuple[float, ...]
    calls_per_sample: int
    warmup: dict[str, float] = field(default_factory=dict)
    converged: bool = False
    stop_reason: str = ""
    calibration_note: str | None = None
    minor_faults_per_call: float | None = None
    gc: str = GC_NOTE
    #: Host seconds each sample took to enqueue (CUDA), in the order of ``samples_s``.
    host_samples_s: tuple[float, ...] = ()
    #: Samples taken and thrown away by the clock guard (GPU clock too low), retaken.
    discarded_samples: int = 0
    #: ``Result.extra`` keys and warnings about the device during sampling (clocks).
    device_extra: Mapping[str, Any] = field(default_factory=dict)
    device_warnings: tuple[str, ...] = ()

    @property
    def stats(self) -> Stats:
        return Stats.from_samples(self.samples_s, self.calls_per_sample)


class BatchGuard(Protocol):
    """Asked after each batch, outside the timed region: throw the batch away and retake it?"""

    def retake(self) -> bool: ...


def timer_overhead_s(clock: Clock = time.perf_counter_ns, pairs: int = 200) -> float:
    """Smallest cost of reading the clock twice; ~50-100 ns for perf_counter_ns here."""
    best = math.inf
    for _ in range(pairs):
        t0 = clock()
        t1 = clock()
        best = min(best, (t1 - t0) * 1e-9)
    return max(best, 0.0)


def _never() -> bool:
    return False


#: ``stop_reason`` of a measurement cut short by ``should_stop`` (Ctrl-C, SIGTERM).
INTERRUPTED = "interrupted"


def warm_up(
    subject: Subject,
    timer: Timer,
    policy: Policy,
    clock: Clock,
    should_stop: Callable[[], bool] = _never,
) -> dict[str, float]:
    """One call and a sync (lazy init, compilation), then time-based warm-up, its calls
    run as the samples' are: ``pre`` before each chunk, with ``fixed_calls`` no chunk
    larger than a sample (an in-place ``pre`` restores one input copy per call). Chunks
    end with a sync, so they grow on device time (an H100 warmed a 2 ms kernel up for
    4.1 s without), and never plan past the cap."""
    if subject.pre is not None:
        subject.pre()
    t0 = clock()
    subject.loop(1)
    timer.sync()
    first_call_s = (clock() - t0) * 1e-9
    calls, chunk = 0, 1
    start = clock()
    while True:
        elapsed = (clock() - start) * 1e-9
        enough = calls >= policy.warmup_min_calls and elapsed >= policy.warmup_min_s
        if enough or elapsed >= policy.warmup_max_s or should_stop():
            break
        if subject.pre is not None:
            subject.pre()
        began = clock()
        subject.loop(chunk)
        timer.sync()
        calls, now = calls + chunk, clock()
        per_call_s = max((now - began) * 1e-9 / chunk, 1e-9)
        left = int((policy.warmup_max_s - (now - start) * 1e-9) / per_call_s)
        chunk = max(1, min(chunk * 2, policy.fixed_calls or 1 << 20, left))
    return {
        "first_call_s": first_call_s,
        "calls": float(calls),
        "time_s": (clock() - start) * 1e-9,
    }


def calibrate(
    subject: Subject, timer: Timer, policy: Policy, overhead_s: float
) -> tuple[int, str | None]:
    """Calls per sample so that one sample takes >= the target time.

    Target = max(min_sample_s, overhead / max_timer_overhead), reached by two blocks
    in a row. Grows by the ratio measured (1.2x margin), at least 2x and at most 10x
    a round, so it terminates on a coarse clock (reads of 0 grow 10x) and on a clock
    that jumps (a bounded number of rounds). Returns the calls and a note when the
    target was not reached.
    """
    if policy.fixed_calls is not None:
        return policy.fixed_calls, None
    target = max(policy.min_sample_s, overhead_s / policy.max_timer_overhead)
    calls = 1
    for _ in range(policy.max_calibration_rounds):
        block = Block(subject.loop, calls, subject.block_pre())
        with gc_disabled():
            (elapsed,) = timer.measure([block])
        if elapsed >= target:
            # Preemption only ever lengthens a block: confirm with a second one so
            # that one descheduled block (4+ ms on a loaded machine) does not leave
            # every sample at a single call.
            with gc_disabled():
                (elapsed,) = timer.measure([block])
            if elapsed >= target:
                return calls, None
        growth = 10.0 if elapsed <= 0 else min(10.0, max(2.0, 1.2 * target / elapsed))
        if calls * growth > 1e9:
            break
        calls = max(calls + 1, int(calls * growth))
    return calls, f"calibration stopped at {calls} calls per sample below {target * 1e3:.3g} ms"


def measure(
    subjects: Sequence[Subject],
    timer: Timer,
    policy: Policy,
    clock: Clock = time.perf_counter_ns,
    should_stop: Callable[[], bool] = _never,
    faults: FaultCounter = minor_faults,
    guard: BatchGuard | None = None,
) -> list[Measured]:
    """Warm up, calibrate and sample ``subjects`` interleaved until precise enough.

    Stops when every subject has at least ``min_samples`` samples, ``min_time_s``
    has passed and every median's relative CI half-width is <= ``target_rel_ci``
    (``converged``); or at ``max_time_s`` once ``min_samples`` are in, or at
    ``max_samples`` (not converged). Short of ``min_samples``, calls that fill a sample
    alone stop at 10x ``max_time_s``; shorter calls wait out a stall up to 100x. With
    ``stop_when_precise=False`` it samples on to the time cap and says ``converged`` there
    if the medians met the target (``ab``'s lockstep: both sides sample the same moments).

    ``should_stop`` is the cooperative cancellation hook: it is asked between
    warm-up chunks and after every batch of samples, and when it returns True the
    measurement ends there with ``stop_reason == INTERRUPTED`` (not converged). A
    signal handler that sets a flag is the intended caller; the engine never blocks
    a signal, so the wait is at most one sample (>= 1 ms, usually a few ms).

    The garbage collector is collected once before sampling and disabled inside
    every timed block (calibration and samples). ``faults`` is read untimed before
    every sampled block and after each batch: a subject's ``minor_faults_per_call``
    is the faults of its own blocks over the calls they timed (its ``pre`` included:
    the cold-cache flusher writes a buffer it allocated once, so it faults nothing
    after the first block).

    ``guard`` (CUDA: :class:`benchbench.measure.gpu.ClockGuard`) may discard a batch
    after it ran; its samples are counted in ``discarded_samples`` and retaken.
    """
    if not subjects:
        raise ValueError("measure() needs at least one subject")
    own_overhead = getattr(timer, "overhead_s", None)
    overhead = own_overhead() if own_overhead is not None else timer_overhead_s(clock)
    warmups = [warm_up(s, timer, policy, clock, should_stop) for s in subjects]  # ungated
    calibrated = [calibrate(s, timer, policy, overhead) for s in subjects]
    pres = [s.block_pre() for s in subjects]  # the gate, then each subject's own pre
    long_calls = any(calls == 1 for calls, _ in calibrated)  # not a stalled machine
    samples: list[list[float]] = [[] for _ in subjects]
    host: list[list[float]] = [[] for _ in subjects]
    faulted, discarded = [0] * len(subjects), [0] * len(subjects)
    rng = random.Random(policy.seed)
    order = list(range(len(subjects)))
    # Garbage of warm-up and calibration is collected now, not inside a sample.
    gc.collect()
    start = clock()
    reason = ""
    converged = False
    while True:
        blocks: list[Block] = []
        owners: list[int] = []
        reads: list[int] = []
        for _ in range(policy.rounds_per_batch):
            rng.shuffle(order)
            for i in order:
                pre = _reading(faults, reads, pres[i])
                blocks.append(Block(subjects[i].loop, calibrated[i][0], pre))
                owners.append(i)
        with gc_disabled():
            durations = timer.measure(blocks)
        reads.append(faults())
        if guard is not None and not should_stop() and guard.retake():
            for owner in owners:
                discarded[owner] += 1
            continue
        host_s = getattr(timer, "host_block_s", None) or []
        for j, (owner, elapsed) in enumerate(zip(owners, durations, strict=True)):
            samples[owner].append(elapsed)
            if j < len(host_s):
                host[owner].append(host_s[j])
            if j + 1 < len(reads):
                faulted[owner] += reads[j + 1] - reads[j]
        n = min(len(s) for s in samples)
        elapsed_s = (clock() - start) * 1e-9
        if should_stop():
            reason = INTERRUPTED
            break
        enough = n >= policy.min_samples and elapsed_s >= policy.min_time_s
        if policy.stop_when_precise and enough and _precise(samples, calibrated, policy):
            converged, reason = True, f"CI within {policy.target_rel_ci:.1%} of the median"
            break
        # The cap yields to min_samples (see the docstring for how far).
        overrun = elapsed_s / policy.max_time_s
        if overrun >= 1 and (n >= policy.min_samples or overrun >= (10 if long_calls else 100)):
            # Sampled on to the cap (``stop_when_precise=False``): precise all the same?
            on_to_cap = not policy.stop_when_precise and enough
            converged = on_to_cap and _precise(samples, calibrated, policy)
            reason = f"time cap of {policy.max_time_s:g} s reached"
            break
        if n >= policy.max_samples:
            reason = f"sample cap of {policy.max_samples} reached"
            break
    return [
        Measured(
            name=s.name,
            samples_s=tuple(samples[i]),
            calls_per_sample=calibrated[i][0],
            warmup=warmups[i],
            converged=converged,
            stop_reason=reason,
            calibration_note=calibrated[i][1],
            minor_faults_per_call=faulted[i] / (len(samples[i]) * calibrated[i][0]),
            host_samples_s=tuple(host[i]) if len(host[i]) == len(samples[i]) else (),
            discarded_samples=discarded[i],
        )
        for i, s in enumerate(subjects)
    ]


def _precise(
    samples: Sequence[Sequence[float]], calibrated: Sequence[tuple[int, Any]], policy: Policy
) -> bool:
    """Every subject's median within ``policy.target_rel_ci``."""
    return all(
        Stats.from_samples(s, c).rel_ci_half_width <= policy.target_rel_ci
        for s, (c, _) in zip(samples, calibrated, strict=True)
    )


def _reading(
    faults: FaultCounter, reads: list[int], pre: Callable[[], object] | None
) -> Callable[[], None]:
    """A block's untimed ``pre`` that first notes the fault count (outside the timed region)."""

    def _pre() -> None:
        reads.append(faults())
        if pre is not None:
            pre()

    return _pre


def warnings_for(measured: Measured, policy: Policy) -> list[str]:
    """Warnings that travel with the result."""
    out: list[str] = []
    stats = measured.stats
    if not measured.converged:
        out.append(
            f"not converged: CI ±{stats.rel_ci_half_width:.1%} of the median "
            f"({measured.stop_reason})"
        )
    if stats.rel_iqr >= 0.10:
        out.append(f"noisy: IQR is {stats.rel_iqr:.0%} of the median")
    sample_median = stats.median_s * measured.calls_per_sample
    if sample_median < policy.min_sample_s:
        out.append(
            f"sample < 1 ms ({sample_median * 1e6:.3g} µs, {measured.calls_per_sample} "
            "call(s) per sample): timer overhead may be visible"
        )
    if measured.calibration_note:
        out.append(measured.calibration_note)
    faults = fault_warning(measured.minor_faults_per_call, stats.median_s)
    if faults is not None:
        out.append(faults)
    return out
