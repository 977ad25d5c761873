"""What a CUDA point records beside its event times: host time, launch-bound, clocks.

- **Host time.** :class:`~benchbench.measure.timers.CudaTimer` notes the host seconds
  each sample took to enqueue its calls. :func:`host_extra` stores them per call
  (``host_samples_s``, same length as ``samples_s``), their median
  (``host_s_per_call``), and calls the point **launch-bound** when the host needs
  at least :data:`LAUNCH_BOUND_RATIO` of the device's time per call: the GPU then
  waits on Python and the dispatcher between kernels, so the event times measure
  launches, not the kernel (a CUDA graph, ``run --cuda-graph``, removes them).
- **Clocks.** :class:`ClockGuard` reads the GPU's SM clock through NVML after every
  batch (outside the timed region): a batch read below :data:`CLOCK_FLOOR` of the
  application clock is discarded and retaken after a back-off, a bounded number of
  times; then kept, with a warning. The throttle reasons seen are recorded.

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
        self.reasons: dict[str, None] = {}  # every reason seen, in first-seen order
        self.kept_low: list[ClockReading] = []

    def retake(self) -> bool:
        """True: the batch just measured ran on a low clock and must be retaken."""
        reading = self._read()
        if reading is None:
            return False
        if reading.reasons_mask:
            self.reasons.update(dict.fromkeys(decode_throttle_reasons(reading.reasons_mask)))
        reference = reading.reference_mhz
        if not reference or reading.sm_mhz >= self._floor * reference:
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
        """``discarded_samples`` and ``throttle_reasons`` for ``Result.extra``."""
        return {"discarded_samples": discarded_samples, "throttle_reasons": list(self.reasons)}

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
    throttle reasons united. Keys no process recorded stay as they were."""
    out, kept = dict(extra), list(warnings)
    host = [h for e in per_process for h in e.get("host_samples_s") or ()]
    if host and all(e.get("host_samples_s") for e in per_process):
        facts, launch = launch_facts(host, device_s_per_call)
        out.update(facts)
        kept = [w for w in kept if not w.startswith(LAUNCH_BOUND)] + launch
    if any("discarded_samples" in e for e in per_process):
        out["discarded_samples"] = sum(int(e.get("discarded_samples") or 0) for e in per_process)
        reasons = (r for e in per_process for r in e.get("throttle_reasons") or ())
        out["throttle_reasons"] = list(dict.fromkeys(reasons))
    return out, kept
