"""Minor page faults: counted around the engine's timed blocks, and the warning for calls
whose faults are a large share of their time (:func:`benchbench.measure.policy.warnings_for`).
"""

from __future__ import annotations

import resource


def minor_faults() -> int:
    """Minor page faults of this process so far (``ru_minflt``; one syscall, ~0.5 µs)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


#: Kernel time of one minor fault that maps and zeroes a fresh 4 KiB page: 2.5-4.9 µs
#: measured here in two runs (2 cores, load 1.7-2.4, one thread): ``x + 1`` at 2^16
#: float32 took 0.177-0.185 ms with 65 faults per call against 0.014-0.016 ms from
#: reused heap, at 2^22 13.3-23.2 ms with 4097 faults against 1.4-3.1 ms. The lower
#: figure keeps the warning from firing on calls the faults do not dominate.
FAULT_COST_S = 2.5e-6

#: Warn when the calls' page faults account for at least this share of a call's time:
#: at a quarter the figure is as much the kernel's as the operator's. Fewer than 16
#: faults per call (64 KiB) never warn: lazy first touches of a cache, not a mapping.
FAULT_SHARE_WARNING = 0.25
FAULT_MIN_WARNING = 16


def fault_warning(faults_per_call: float | None, median_s: float) -> str | None:
    """The warning for calls whose page faults are a large share of their time, or None."""
    if faults_per_call is None or faults_per_call < FAULT_MIN_WARNING or median_s <= 0:
        return None
    if faults_per_call * FAULT_COST_S < FAULT_SHARE_WARNING * median_s:
        return None
    mapped = faults_per_call * resource.getpagesize()
    size = f"{mapped / 2**20:.3g} MiB" if mapped >= 2**20 else f"{mapped / 2**10:.3g} KiB"
    return (
        f"each call maps ~{size} ({faults_per_call:.0f} page faults per call): "
        "much of the time is the kernel zeroing fresh pages; see --allocator"
    )
