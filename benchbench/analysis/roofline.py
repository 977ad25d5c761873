"""Roofline: which ceiling a measured point is held to, for "% of peak".

A point moves ``bytes_per_call`` and computes ``flop_per_call`` over a working set of
``working_set_bytes``. Its arithmetic intensity is ``flop / bytes``; the attainable
FLOP/s is ``min(peak_flop_per_s, intensity * bandwidth(working_set))``, where the
bandwidth is read off the probe's curve at that working set, so a 256 KiB operand is
held to the L2 figure and a 1 GiB one to main memory. When the bandwidth term is the
smaller one the point is memory-bound and its "% of peak" is its bytes/s over that
bandwidth; otherwise it is compute-bound and the percentage is its FLOP/s over the peak.

**Each kind of traffic has its own ceiling.** Bytes are counted as STREAM and
likwid-bench count them, the loads and stores the code names. A copy's store first reads
the destination's line (write-allocate), so a copy credited 8 bytes moves 12; an in-place
read-modify-write (``x.sqrt_()``) moves what it is credited. Held to the copy curve, an
in-place point could read up to 150 % (``x.sqrt_()`` at 2^22 float32 did). So a row's
:func:`traffic_of` picks the curves:

- ``"update"``: the probe's in-place ``update`` curve alone. A row is an update when its
  ``extra.traffic`` says so (a ``Variant(traffic="update")``), or, with no
  ``extra.traffic``, when ``extra.inplace`` is present (the note every
  ``Variant(inplace=True)`` point stores). Its working set is half its bytes: each byte
  it names is read and written back, so ``x.sqrt_()`` of 16 MiB is credited 32 MiB and
  held to the curve at 16 MiB, inside a 32 MiB L3 as the operator itself is (read at
  32 MiB, the curves had fallen towards main memory: the issue's 150 %). An update that
  also reads another operand is read at less than its working set (``x.add_(y)`` of two
  16 MiB tensors: credited 48 MiB, working set 32 MiB, read at 24 MiB); where the curve
  falls with size (past the smallest working sets, whose sweep pays a per-pass cost)
  that errs towards a low percentage, not a false "above". A profile probed before the
  update curve existed holds it to the other curves, and the ceiling says so in its
  ``note``;
- ``"copy"`` (everything else): the best of the ``read``, ``write`` and ``copy``
  curves at a working set of its bytes.

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
from benchbench.core.values import TRAFFIC
from benchbench.machine.hardware import Profile

__all__ = [
    "ABOVE_CEILING_TOLERANCE",
    "NO_UPDATE_CURVE_NOTE",
    "TRAFFIC",
    "Ceiling",
    "Traffic",
    "above_ceiling",
    "bandwidth_at",
    "ceiling_for",
    "roofline_numbers",
    "traffic_of",
    "working_set_for",
]

#: What a point's bytes are: ``copy`` (reads some buffers, writes others) or ``update``
#: (reads and writes back the same bytes), as :data:`benchbench.core.values.TRAFFIC`
#: names them; see the module docstring.
Traffic = Literal["copy", "update"]

# The curves measured with torch's default threads, per kind of traffic: the ceilings a
# torch operator sees.
_CURVES: dict[str, tuple[str, ...]] = {"copy": ("read", "write", "copy"), "update": ("update",)}

#: The ``note`` of an update point's ceiling from a profile without the update curve.
NO_UPDATE_CURVE_NOTE = (
    "in-place point held to the copy curves: this profile has no update curve "
    "(probed before it was measured); re-run `benchbench probe`"
)

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
    bandwidth)`` (0.0 for a point with no flop). ``traffic`` is the kind of traffic the
    point was held as, and ``note`` says when its own curve was missing (``""`` else).
    """

    kind: Literal["memory", "compute"]
    value: float
    intensity_flop_per_byte: float
    attainable_flop_per_s: float
    traffic: Traffic = "copy"
    note: str = ""


def traffic_of(extra: Mapping[str, Any] | None) -> Traffic:
    """The kind of traffic of a stored row, from its ``extra`` (see the module docstring).

    ``extra["traffic"]`` wins when it is one of :data:`TRAFFIC` (a stored document is
    data: any other value is ignored); else a row with ``extra["inplace"]`` is an update.
    """
    extra = extra or {}
    declared = extra.get("traffic")
    if declared == "update" or declared == "copy":
        return declared
    return "update" if extra.get("inplace") else "copy"


def working_set_for(bytes_per_call: float, traffic: Traffic) -> float:
    """The working set a point's curve is read at: its bytes, or half of them for an
    update, whose every byte is read and written back (see the module docstring)."""
    return bytes_per_call / 2 if traffic == "update" else bytes_per_call


def bandwidth_at(profile: Profile, working_set_bytes: float, traffic: Traffic = "copy") -> float:
    """Best bandwidth over the default-thread curves of ``traffic`` at ``working_set_bytes``.

    Interpolated linearly in log-log between measured sizes, and held at the end values
    outside the measured range (beyond the largest size the curve is on its main-memory
    plateau; below the smallest, per-call overhead dominates anyway). ``"update"`` on a
    profile without the update curve reads the copy curves (:func:`ceiling_for` notes it).
    """
    if traffic not in _CURVES:
        raise MeasurementError(f"roofline: traffic must be one of {TRAFFIC}, got {traffic!r}")
    if traffic == "update" and not profile.has_update_curve:
        traffic = "copy"
    curves = [profile.bandwidth[op] for op in _CURVES[traffic] if profile.bandwidth.get(op)]
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
    traffic: Traffic = "copy",
) -> Ceiling:
    """The ceiling to compute a point's "% of peak" against (see the module docstring).

    ``dtype`` picks the peak FLOP/s; a dtype the probe did not measure falls back to the
    best measured one. ``traffic`` picks the bandwidth curves, read at
    ``working_set_bytes`` as given (an update's is half its bytes: the caller's to pass).
    A point with no bytes is compute-bound and one with no flop is memory-bound. Raises
    :class:`MeasurementError` for negative work, a point with neither bytes nor flop, or
    an unknown ``traffic``.
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
        return Ceiling("compute", peak, math.inf, peak, traffic)
    bandwidth = bandwidth_at(profile, working_set_bytes, traffic)
    note = NO_UPDATE_CURVE_NOTE if traffic == "update" and not profile.has_update_curve else ""
    intensity = flop_per_call / bytes_per_call
    memory_roof = intensity * bandwidth
    if flop_per_call == 0 or memory_roof < peak:
        return Ceiling("memory", bandwidth, intensity, memory_roof, traffic, note)
    return Ceiling("compute", peak, intensity, peak, traffic, note)


def roofline_numbers(
    row: Mapping[str, Any], profile: Profile | None
) -> tuple[float | None, dict[str, Any] | None]:
    """``(percent_of_peak, ceiling)`` of one measured row against its device's profile.

    The ceiling is :func:`benchbench.analysis.roofline.ceiling_for` with the bytes per call as the
    working set (the inputs and outputs a call touches; a workload that reuses a buffer
    would need its own figure), for the row's kind of traffic
    (:func:`~benchbench.analysis.roofline.traffic_of`: an in-place row is an update, held
    to the update curve at half its bytes). ``(None, None)`` without a profile, for a
    point that was not measured, or for one with no work model. The ceiling's ``traffic``
    says which curves held it, and ``note`` (present only then) why not its own.
    """
    if profile is None or row.get("status") != "ok":
        return None, None
    nbytes = row.get("bytes_per_call") or 0.0
    flop = row.get("flop_per_call") or 0.0
    if nbytes <= 0 and flop <= 0:
        return None, None
    traffic = traffic_of(row.get("extra"))
    try:
        ceiling = ceiling_for(
            profile,
            nbytes,
            flop,
            working_set_for(nbytes, traffic) if nbytes > 0 else 1.0,
            dtype=str(row.get("dtype")),
            traffic=traffic,
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
        "traffic": ceiling.traffic,
        "intensity_flop_per_byte": _finite_or_none(ceiling.intensity_flop_per_byte),
        "attainable_flop_per_s": _finite_or_none(ceiling.attainable_flop_per_s),
        "profile_device": profile.device,
        "above_measured": above_ceiling(achieved, ceiling.value),
        **({"note": ceiling.note} if ceiling.note else {}),
    }


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
