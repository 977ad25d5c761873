"""What a CUDA point records beside its event times: host time, launch-bound, clocks.

- **Host time.** :class:`~benchbench.measure.timers.CudaTimer` notes the host seconds
  each sample took to enqueue its calls. :func:`host_extra` stores them per call
  (``host_samples_s``, same length as ``samples_s``), their median
  (``host_s_per_call``), and calls the point **launch-bound** when the host needs
  at least :data:`LAUNCH_BOUND_RATIO` of the device's time per call: the GPU then
  waits on Python and the dispatcher between kernels, so the event times measure
  launches, not the kernel (a CUDA graph, ``run --cuda-graph``, removes them).
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

None of this has run on a real GPU yet: it is written from the PyTorch and NVML
documentation and its logic is unit-tested with fakes (tests/unit/test_gpu_measure.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchbench.machine.nvml import ClockReading
from benchbench.machine.sensors import decode_throttle_reasons, throttling_reasons

#: Launch-bound when host seconds per call >= this share of device seconds per call.
#: When the host is the bottleneck the GPU runs each kernel as it arrives, so the
#: events span the host's launches plus the last kernel: host/device comes out just
#: under 1 (the two event records and the tail kernel), never reliably >= 1. A device
#: -bound stream with a queue that never fills shows host/device well under 1; one
#: whose launch queue (~1024 entries) fills makes the host wait on the device, which
#: also reads near 1, and then launches cost nearly as much as kernels anyway.
LAUNCH_BOUND_RATIO = 0.9

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
) -> tuple[dict[str, Any], list[str]]:
    """(``extra`` keys, warnings) of a CUDA point's host time beside its event time.

    ``host_samples_s`` are the host seconds per sample as the timer noted them (same
    length as ``samples_s``); stored per call. Nothing when they are missing.
    """
    if not host_samples_s or len(host_samples_s) != len(samples_s):
        return {}, []
    per_call = [h / calls_per_sample for h in host_samples_s]
    device = statistics.median(samples_s) / calls_per_sample
    return launch_facts(per_call, device)


def launch_facts(
    host_per_call: Sequence[float], device_s_per_call: float
) -> tuple[dict[str, Any], list[str]]:
    """``host_samples_s``, ``host_s_per_call``, ``launch_bound`` and its warning."""
    host = statistics.median(host_per_call)
    bound = device_s_per_call > 0 and host >= LAUNCH_BOUND_RATIO * device_s_per_call
    extra: dict[str, Any] = {
        "host_samples_s": list(host_per_call),
        "host_s_per_call": host,
        "launch_bound": bound,
    }
    warnings = []
    if bound:
        warnings.append(
            f"{LAUNCH_BOUND}: the host spends {host * 1e6:.3g} µs per call launching, the GPU "
            f"{device_s_per_call * 1e6:.3g} µs running; the time is launch overhead "
            "(try --cuda-graph)"
        )
    return extra, warnings


def merge_extra(
    extra: Mapping[str, Any],
    warnings: Sequence[str],
    per_process: Sequence[Mapping[str, Any]],
    device_s_per_call: float,
) -> tuple[dict[str, Any], list[str]]:
    """(``extra``, warnings) of a point merged from its processes' ``extra`` s (in
    sample order): host samples concatenated and judged again (the processes'
    launch-bound warnings give way to the merged one), discarded samples summed,
    throttle reasons united, the SM clock the median of the processes' and the cycles
    per call that clock times the merged time. Keys no process recorded stay as they were."""
    out, kept = dict(extra), list(warnings)
    host = [h for e in per_process for h in e.get("host_samples_s") or ()]
    if host and all(e.get("host_samples_s") for e in per_process):
        facts, launch = launch_facts(host, device_s_per_call)
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
