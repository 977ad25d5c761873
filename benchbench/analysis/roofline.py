"""Roofline: which ceiling a measured point is held to, for "% of peak".

A point moves ``bytes_per_call`` and computes ``flop_per_call`` over a working set of
``working_set_bytes``. Its arithmetic intensity is ``flop / bytes``; the attainable
FLOP/s is ``min(peak_flop_per_s, intensity * bandwidth(working_set))``, where the
bandwidth is read off the probe's curve at that working set, so a 256 KiB operand is
held to the L2 figure and a 1 GiB one to main memory. When the bandwidth term is the
smaller one the point is memory-bound and its "% of peak" is its bytes/s over that
bandwidth; otherwise it is compute-bound and the percentage is its FLOP/s over the peak.

A ceiling is measured, so a point can beat it: :func:`above_ceiling` says when one beats
it by more than :data:`ABOVE_CEILING_TOLERANCE`, and then the figure is the probe's error
(it underestimated the machine at that size), not a fraction of peak to report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from benchbench.core.errors import MeasurementError
from benchbench.machine.hardware import Profile

__all__ = [
    "ABOVE_CEILING_TOLERANCE",
    "Ceiling",
    "above_ceiling",
    "bandwidth_at",
    "ceiling_for",
    "roofline_numbers",
]

# The curves measured with torch's default threads: the ceilings a torch operator sees.
_DEFAULT_OPS = ("read", "write", "copy")

#: How far past 100 % of its ceiling a point may go before it is reported as above the
#: measured ceiling. Up to 10 % is within what a ceiling can honestly be off by: the
#: probe runs in one process and the run's median over several, the curve is
#: interpolated between sizes a third of an octave apart, and at a cache edge it falls by
#: 1.5x within about an octave. Beyond it, the probe missed something (before it swept
#: small working sets many times per call, it reported 124-178 % at 8-768 KiB).
ABOVE_CEILING_TOLERANCE = 0.10


def above_ceiling(achieved: float, ceiling: float) -> bool:
    """Whether ``achieved`` beats the measured ``ceiling`` (same unit) by more than
    :data:`ABOVE_CEILING_TOLERANCE`: then the ceiling, not the point, is wrong."""
    return ceiling > 0 and achieved > ceiling * (1.0 + ABOVE_CEILING_TOLERANCE)


@dataclass(frozen=True)
class Ceiling:
    """The roofline ceiling of one point.

    ``kind`` is ``"memory"`` (``value`` in bytes/s) or ``"compute"`` (``value`` in
    flop/s): divide the point's own bytes/s or flop/s by ``value`` for its fraction of
    peak. ``attainable_flop_per_s`` is the roofline itself, ``min(peak, intensity *
    bandwidth)`` (0.0 for a point with no flop).
    """

    kind: Literal["memory", "compute"]
    value: float
    intensity_flop_per_byte: float
    attainable_flop_per_s: float


def bandwidth_at(profile: Profile, working_set_bytes: float) -> float:
    """Best bandwidth over the default-thread curves at ``working_set_bytes``.

    Interpolated linearly in log-log between measured sizes, and held at the end values
    outside the measured range (beyond the largest size the curve is on its main-memory
    plateau; below the smallest, per-call overhead dominates anyway).
    """
    curves = [profile.bandwidth[op] for op in _DEFAULT_OPS if profile.bandwidth.get(op)]
    if not curves:
        raise MeasurementError(
            f"roofline: profile for {profile.device!r} has no bandwidth curve "
            f"(ops {sorted(profile.bandwidth)}); run 'benchbench probe' again"
        )
    if not working_set_bytes > 0:
        raise MeasurementError(
            f"roofline: working_set_bytes must be > 0, got {working_set_bytes!r}"
        )
    x = math.log(working_set_bytes)
    best = 0.0
    for curve in curves:
        sizes = np.log([b for b, _ in curve])
        values = np.log([v for _, v in curve])
        best = max(best, float(np.exp(np.interp(x, sizes, values))))
    return best


def ceiling_for(
    profile: Profile,
    bytes_per_call: float,
    flop_per_call: float,
    working_set_bytes: float,
    *,
    dtype: str = "float32",
) -> Ceiling:
    """The ceiling to compute a point's "% of peak" against (see the module docstring).

    ``dtype`` picks the peak FLOP/s; a dtype the probe did not measure falls back to the
    best measured one. A point with no bytes is compute-bound and one with no flop is
    memory-bound. Raises :class:`MeasurementError` for negative work or a point with
    neither bytes nor flop.
    """
    if bytes_per_call < 0 or flop_per_call < 0 or bytes_per_call == flop_per_call == 0:
        raise MeasurementError(
            f"roofline: need bytes_per_call >= 0 and flop_per_call >= 0, not both 0; got "
            f"{bytes_per_call!r} bytes and {flop_per_call!r} flop (fix the work model)"
        )
    peak = profile.peak_flop_per_s.get(dtype) or max(
        profile.peak_flop_per_s.values(), default=math.inf
    )
    if bytes_per_call == 0:
        return Ceiling("compute", peak, math.inf, peak)
    bandwidth = bandwidth_at(profile, working_set_bytes)
    intensity = flop_per_call / bytes_per_call
    memory_roof = intensity * bandwidth
    if flop_per_call == 0 or memory_roof < peak:
        return Ceiling("memory", bandwidth, intensity, memory_roof)
    return Ceiling("compute", peak, intensity, peak)


def roofline_numbers(
    row: Mapping[str, Any], profile: Profile | None
) -> tuple[float | None, dict[str, Any] | None]:
    """``(percent_of_peak, ceiling)`` of one measured row against its device's profile.

    The ceiling is :func:`benchbench.analysis.roofline.ceiling_for` with the bytes per call as the
    working set (the inputs and outputs a call touches; a workload that reuses a buffer
    would need its own figure). ``(None, None)`` without a profile, for a point that was
    not measured, or for one with no work model.
    """
    if profile is None or row.get("status") != "ok":
        return None, None
    nbytes = row.get("bytes_per_call") or 0.0
    flop = row.get("flop_per_call") or 0.0
    if nbytes <= 0 and flop <= 0:
        return None, None
    try:
        ceiling = ceiling_for(
            profile, nbytes, flop, nbytes if nbytes > 0 else 1.0, dtype=str(row.get("dtype"))
        )
    except MeasurementError:
        return None, None
    achieved = row.get("bytes_per_s") if ceiling.kind == "memory" else row.get("flop_per_s")
    if achieved is None or not ceiling.value > 0 or not math.isfinite(ceiling.value):
        return None, None
    return 100.0 * achieved / ceiling.value, {
        "kind": ceiling.kind,
        "value": ceiling.value,
        "unit": "bytes/s" if ceiling.kind == "memory" else "flop/s",
        "intensity_flop_per_byte": _finite_or_none(ceiling.intensity_flop_per_byte),
        "attainable_flop_per_s": _finite_or_none(ceiling.attainable_flop_per_s),
        "profile_device": profile.device,
        "above_measured": above_ceiling(achieved, ceiling.value),
    }


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
