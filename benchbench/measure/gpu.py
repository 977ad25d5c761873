"""What a CUDA point records beside its event times: host time, launch overhead, clocks.

- **Host time.** :class:`~benchbench.measure.timers.CudaTimer` notes the host seconds
  each sample took to enqueue its calls. :func:`host_extra` stores them per call
  (``host_samples_s``, same length as ``samples_s``) and their median
  (``host_s_per_call``).
- **Launch overhead**, as nvbench measures it: the same block of calls is timed once
  more queued behind a blocking kernel (``torch.cuda._sleep``, long enough to cover the
  host's launches), so that the device runs them back to back with no launch gap.
  ``launch_overhead`` is the share of each call's event time that is launch gap,
  ``1 - blocked / unblocked``: ~0 for a kernel that keeps the GPU busy, ~0.85 for
  ``torch.sqrt`` of 1,024 floats on an H100 (10.2 µs eager, 1.4 µs in a graph). A
  point is **launch-bound** (``launch_bound``, with a warning) when at least
  :data:`LAUNCH_BOUND_SHARE` of its time is launch gap: the events then measure the
  launches, not the kernel (a CUDA graph, ``run --cuda-graph``, removes them). The
  host's time beside the device's cannot tell: a device-bound 10 µs kernel fills the
  launch queue and the host then waits on the device, reading host ≈ device too. No
  share is measured where a block needs its ``pre`` (cold mode's flush, which also
  hides the launches; in-place restores; ``ab``'s turns): ``launch_overhead`` is None.
- **Work off the timed stream.** The events time the current stream only: a workload
  that puts kernels on another stream (its own ``torch.cuda.Stream``, a library's
  worker stream) would read fast. :func:`untimed_share` times one block of calls with
  the events and with the host's wall clock up to a device-wide synchronize; the wall
  time beyond the larger of the events and the launches is work the events missed.
  ``untimed_share`` above :data:`UNTIMED_SHARE` gets a warning.
- **Clocks.** :class:`ClockGuard` reads the GPU's SM clock through NVML once a batch
  is queued, before its synchronize (:meth:`ClockGuard.note`, called by the timer):
  after the synchronize the GPU is idle and reads its idle clock (an H100: 345 MHz
  idle, 1980 under load, ``gpu_idle`` in every read). A read NVML marks ``gpu_idle``
  (the queue drained first: a launch-bound point) is ignored. A batch read below
  :data:`CLOCK_FLOOR` of the application clock is discarded and retaken after a
  back-off, a bounded number of times; then kept, with a warning. A low clock whose
  reasons name no throttle (application clocks, ``run --lock-clocks``' base clock) is
  held there on purpose and kept. The reasons
  seen and the median SM clock under load (``sm_clock_mhz``) are recorded; the clock
  times the event time gives ``cycles_per_call`` (:func:`cycles_per_call`).

Run on an H100 (torch 2.11, CUDA 13.0; BENCHMARKS.md, GPU acceptance); its logic is
unit-tested with fakes (tests/unit/test_gpu_measure.py, tests/unit/test_cuda_async.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchbench.machine.nvml import ClockReading
from benchbench.machine.sensors import decode_throttle_reasons, throttling_reasons

#: Launch-bound when at least this share of each call's event time is launch gap: the
#: GPU idles more than it works, waiting for Python and the dispatcher.
LAUNCH_BOUND_SHARE = 0.5

#: The blocking kernel outlasts the host's launches of the block by this factor, plus
#: :data:`BLOCK_MARGIN_S`; at most :data:`BLOCKED_CALLS` calls are queued behind it,
#: well inside CUDA's ~1,024-deep launch queue (a full queue would make the host wait).
BLOCK_COVER = 2.0
BLOCK_MARGIN_S = 50e-6
BLOCKED_CALLS = 256
BLOCKED_SAMPLES = 5

#: A point whose device stays busy this share longer than its timed stream's events
#: (and at least :data:`UNTIMED_FLOOR_S` a block: a synchronize's own ~10-20 µs) has
#: work the events did not time.
UNTIMED_SHARE = 0.05
UNTIMED_FLOOR_S = 50e-6

#: The start of the warning of a launch-bound point (and its table marker).
LAUNCH_BOUND = "launch-bound"

#: A batch read below this share of the application SM clock is retaken.
CLOCK_FLOOR = 0.75
#: Retakes of one batch before it is kept (with a warning), and the first back-off;
#: each retake doubles it (0.05, 0.1, 0.2 s): long enough for a boost clock to recover
#: from a power-cap dip, short against a point's 0.5 s budget.
MAX_RETAKES = 3
BACKOFF_S = 0.05


class ClockGuard:
    """Discards batches measured while the GPU's SM clock was throttled.

    ``read`` returns a :class:`~benchbench.machine.nvml.ClockReading` (or None when
    unreadable: the batch is kept). After a batch is kept below the floor the guard
    stops retaking for the rest of the point: a GPU that stays throttled through
    three back-offs is held down (heat, a power cap) and retakes only spend budget.
    """

    def __init__(
        self,
        read: Callable[[], ClockReading | None],
        sleep: Callable[[float], object] = time.sleep,
        floor: float = CLOCK_FLOOR,
        max_retakes: int = MAX_RETAKES,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self._read = read
        self._sleep = sleep
        self._floor = floor
        self._max_retakes = max_retakes
        self._backoff_s = backoff_s
        self._tries = 0
        self._gave_up = False
        self._noted: tuple[ClockReading | None] | None = None
        self.reasons: dict[str, None] = {}  # every reason seen under load, first-seen order
        self.kept_low: list[ClockReading] = []
        self.load_mhz: list[int] = []  # the SM clock of every read under load

    def note(self) -> None:
        """Read the clock now, for the next :meth:`retake`: the timer calls this once a
        batch is queued and before it synchronizes, while the GPU runs the batch."""
        self._noted = (self._read(),)

    def retake(self) -> bool:
        """True: the batch just measured ran on a low clock and must be retaken."""
        reading = self._noted[0] if self._noted is not None else self._read()
        self._noted = None
        if reading is None or reading.idle:
            return False  # unreadable, or read from an idle GPU: nothing to judge
        names = decode_throttle_reasons(reading.reasons_mask) if reading.reasons_mask else ()
        self.reasons.update(dict.fromkeys(names))
        self.load_mhz.append(reading.sm_mhz)
        reference = reading.reference_mhz
        low = bool(reference) and reading.sm_mhz < self._floor * (reference or 0)
        if low and names and not throttling_reasons(names):
            # Reasons given, none a throttle (application clocks, a lock, sync boost): the
            # clock is held there on purpose, not dipping. No reason at all is judged.
            low = False
        if not low:
            self._tries = 0
            return False
        if not self._gave_up and self._tries < self._max_retakes:
            self._sleep(self._backoff_s * 2**self._tries)
            self._tries += 1
            return True
        self.kept_low.append(reading)
        self._gave_up, self._tries = True, 0
        return False

    def extra(self, discarded_samples: int) -> dict[str, Any]:
        """``discarded_samples``, ``throttle_reasons`` and, when the clock was read under
        load, its median ``sm_clock_mhz``, for ``Result.extra``."""
        out: dict[str, Any] = {
            "discarded_samples": discarded_samples,
            "throttle_reasons": list(self.reasons),
        }
        if self.load_mhz:
            out["sm_clock_mhz"] = statistics.median(self.load_mhz)
        return out

    def warnings(self) -> list[str]:
        """One warning when samples were kept on a throttled clock, else none."""
        if not self.kept_low:
            return []
        low = min(self.kept_low, key=lambda r: r.sm_mhz)
        why = ", ".join(throttling_reasons(self.reasons)) or "no throttle reason reported"
        return [
            f"GPU clocks throttled: {len(self.kept_low)} batch(es) kept at down to "
            f"{low.sm_mhz} MHz, below {self._floor:.0%} of the {low.reference_mhz} MHz "
            f"application clock after {self._max_retakes} retakes ({why})"
        ]


def cycles_per_call(sm_clock_mhz: float | None, device_s_per_call: float) -> float | None:
    """SM cycles one call spans: its event time times the SM clock NVML read while the
    batch ran; None without a clock. A GPU figure that a clock change does not move
    (as instruction counts are on the CPU) for work the SM clock paces; memory-bound
    work takes the memory's time whatever the SM clock, so its cycles move with the
    clock. The clock is read once per batch, not per kernel: a clock that moves inside
    a batch blurs the figure by that much."""
    if not sm_clock_mhz or device_s_per_call <= 0:
        return None
    return device_s_per_call * float(sm_clock_mhz) * 1e6


def host_extra(
    samples_s: Sequence[float], host_samples_s: Sequence[float], calls_per_sample: int
) -> dict[str, Any]:
    """``host_samples_s`` (per call) and ``host_s_per_call`` of a CUDA point: the host
    seconds per sample as the timer noted them (same length as ``samples_s``). Nothing
    when they are missing."""
    if not host_samples_s or len(host_samples_s) != len(samples_s):
        return {}
    per_call = [h / calls_per_sample for h in host_samples_s]
    return {"host_samples_s": per_call, "host_s_per_call": statistics.median(per_call)}


def sleep_cycles_per_s(cuda: Any, sleep: Callable[[int], object]) -> float:
    """The rate of the clock ``sleep`` (``torch.cuda._sleep``) counts, from events around
    a 1-million-cycle sleep (~0.5 ms at 2 GHz)."""
    cycles = 1_000_000
    sleep(1000)
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(start.elapsed_time(end) * 1e-3, 1e-9)


def blocked_s_per_call(
    loop: Callable[[int], object],
    calls: int,
    host_s_per_call: float,
    cuda: Any,
    sleep: Callable[[int], object],
    cycles_per_s: float,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> float:
    """Device seconds per call of ``loop`` with the launch gaps hidden: each block of
    calls queued behind a blocking ``sleep`` kernel that outlasts its launches (the
    median of :data:`BLOCKED_SAMPLES` blocks). The sleep kernel runs before the start
    event, outside the timed span."""
    calls = max(1, min(calls, BLOCKED_CALLS))
    cover_s = BLOCK_COVER * host_s_per_call * calls + BLOCK_MARGIN_S
    pairs = []
    for _ in range(BLOCKED_SAMPLES):
        sleep(int(cover_s * cycles_per_s))
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        loop(calls)
        end.record()
        pairs.append((start, end))
    cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e-3 for s, e in pairs) / calls


def untimed_share(
    loop: Callable[[int], object],
    calls: int,
    cuda: Any,
    clock: Callable[[], int] = time.perf_counter_ns,
    repeats: int = 3,
) -> float:
    """The share of a block's event time by which a device-wide synchronize outlasts
    it: the median over ``repeats`` blocks of ``calls`` calls of (wall - max(events,
    launches)) / events, 0 where the wall is within :data:`UNTIMED_FLOOR_S` of them."""
    shares = []
    cuda.synchronize()
    for _ in range(repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        t0 = clock()
        start.record()
        loop(calls)
        end.record()
        launched_s = (clock() - t0) * 1e-9
        cuda.synchronize()
        wall_s = (clock() - t0) * 1e-9
        event_s = start.elapsed_time(end) * 1e-3
        beyond_s = wall_s - max(event_s, launched_s)
        shares.append(beyond_s / event_s if beyond_s > UNTIMED_FLOOR_S and event_s > 0 else 0.0)
    return statistics.median(shares)


def untimed_facts(share: float) -> tuple[dict[str, Any], list[str]]:
    """``untimed_share`` and its warning."""
    warnings = []
    if share > UNTIMED_SHARE:
        warnings.append(
            f"untimed work: the GPU stayed busy {share:.0%} longer than the timed stream's "
            "events (kernels on another stream?); the time does not include that work"
        )
    return {"untimed_share": share}, warnings


def launch_share(unblocked_s: float, blocked_s: float) -> float:
    """The share of an unblocked call's time that is launch gap, in [0, 1]."""
    if unblocked_s <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - blocked_s / unblocked_s))


def launch_facts(share: float | None) -> tuple[dict[str, Any], list[str]]:
    """``launch_overhead``, ``launch_bound`` and its warning, from the launch share."""
    if share is None:
        return {"launch_overhead": None, "launch_bound": False}, []
    bound = share >= LAUNCH_BOUND_SHARE
    warnings = []
    if bound:
        warnings.append(
            f"{LAUNCH_BOUND}: {share:.0%} of each call's time is the GPU waiting for the "
            "host to launch it; the time is launch overhead (try --cuda-graph)"
        )
    return {"launch_overhead": share, "launch_bound": bound}, warnings


def merge_extra(
    extra: Mapping[str, Any],
    warnings: Sequence[str],
    per_process: Sequence[Mapping[str, Any]],
    device_s_per_call: float,
) -> tuple[dict[str, Any], list[str]]:
    """(``extra``, warnings) of a point merged from its processes' ``extra`` s (in
    sample order): host samples concatenated, the launch share the median of the
    processes' (their launch-bound warnings give way to the merged one), discarded
    samples summed, throttle reasons united, the SM clock the median of the processes'
    and the cycles per call that clock times the merged time. Keys no process recorded
    stay as they were."""
    out, kept = dict(extra), list(warnings)
    host = [h for e in per_process for h in e.get("host_samples_s") or ()]
    if host and all(e.get("host_samples_s") for e in per_process):
        out.update({"host_samples_s": host, "host_s_per_call": statistics.median(host)})
    if any("launch_overhead" in e for e in per_process):
        shares = [e["launch_overhead"] for e in per_process if e.get("launch_overhead") is not None]
        facts, launch = launch_facts(statistics.median(shares) if shares else None)
        out.update(facts)
        kept = [w for w in kept if not w.startswith(LAUNCH_BOUND)] + launch
    clocks = [float(e["sm_clock_mhz"]) for e in per_process if e.get("sm_clock_mhz")]
    if clocks:
        out["sm_clock_mhz"] = statistics.median(clocks)
        out["cycles_per_call"] = cycles_per_call(out["sm_clock_mhz"], device_s_per_call)
    if any("discarded_samples" in e for e in per_process):
        out["discarded_samples"] = sum(int(e.get("discarded_samples") or 0) for e in per_process)
        reasons = (r for e in per_process for r in e.get("throttle_reasons") or ())
        out["throttle_reasons"] = list(dict.fromkeys(reasons))
    return out, kept
