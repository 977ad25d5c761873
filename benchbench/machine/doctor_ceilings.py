"""`doctor`'s checks of the ceilings: is the stored hardware profile one to trust?

Two questions, both answered from stored data (no measuring):

- :func:`check_profile` looks at a profile's shape. A cache is faster than main memory,
  so a bandwidth at a working set well inside L1/L2 that is *below* the main-memory
  plateau means the probe timed something else there: torch's per-call overhead, which
  is what every probe before version 2 measured at small sizes (4 KiB in 5 µs is
  0.8 GB/s). A version 1 profile is flagged for the same reason, and so is one without
  the in-place ``update`` curve: its in-place points are held to the copy curves, which
  a read-modify-write beats by up to 1.5x (a copy moves 12 bytes for the 8 it is
  credited, an update the 8).
- :func:`check_run` looks at the latest run's results held to that profile: a point above
  its measured ceiling (the flag :func:`benchbench.analysis.roofline.above_ceiling` sets,
  carried by the views in ``row["ceiling"]["above_measured"]``) means the probe
  underestimates the machine at that size.

Either way the fix is to probe again, with the run's thread count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchbench.core.units import format_bytes, format_rate
from benchbench.machine.doctor_sources import Check
from benchbench.machine.hardware import Profile

__all__ = ["check_profile", "check_run", "probe_advice"]

# The curves measured with torch's default threads, as the roofline reads them.
_DEFAULT_OPS = ("read", "write", "copy", "update")
# Working sets this small sit in the L1 or L2 of any CPU we run on (32 KiB-2 MiB per core).
_SURELY_CACHED_BYTES = 32 << 10


def probe_advice(profile: Profile | None) -> str:
    """The command that makes a new profile like ``profile`` (its device and threads)."""
    if profile is None:
        return "benchbench probe --threads N  # N: the --threads of your runs"
    device = "" if profile.device == "cpu" else f" --device {profile.device}"
    return f"benchbench probe{device} --threads {profile.threads}"


def check_profile(profile: Profile) -> list[Check]:
    """The shape of ``profile``'s bandwidth curves (see the module docstring)."""
    name = f"ceilings: {profile.device} profile"
    fix = probe_advice(profile)
    if profile.min_call_bytes <= 0:
        return [
            Check(
                name,
                "warn",
                "measured one pass per call (a version 1 profile): its in-cache ceilings "
                "are torch's call overhead, so small points read over 100 % of them",
                fix,
            )
        ]
    if not profile.has_update_curve:
        return [
            Check(
                name,
                "warn",
                "no update (in-place read-modify-write) curve, probed before it was "
                "measured: in-place points are held to the copy curves and can read up to "
                "150 % of them",
                fix,
            )
        ]
    memory = profile.peak_memory_bytes_per_s
    best_at: dict[int, float] = {}
    for op in _DEFAULT_OPS:
        for ws, value in profile.bandwidth.get(op, ()):
            best_at[ws] = max(best_at.get(ws, 0.0), value)
    below = [
        (ws, v) for ws, v in sorted(best_at.items()) if ws <= _SURELY_CACHED_BYTES and v < memory
    ]
    if below:
        ws, value = below[0]
        return [
            Check(
                name,
                "warn",
                f"in-cache bandwidth below main memory's: {format_rate(value, 'B/s')} at "
                f"{format_bytes(ws)} against {format_rate(memory, 'B/s')} (the probe was "
                f"disturbed, or timed overhead rather than the cache at {len(below)} "
                "small working set(s))",
                fix,
            )
        ]
    return [
        Check(
            name,
            "ok",
            f"best in cache {format_rate(profile.peak_cache_bytes_per_s, 'B/s')}, main memory "
            f"{format_rate(memory, 'B/s')}; {profile.threads} thread(s), best of "
            f"{profile.repeats} repeat(s), {format_bytes(profile.min_call_bytes)} per call",
        )
    ]


def check_run(
    run_name: str, rows: Sequence[Mapping[str, Any]], profile: Profile | None
) -> list[Check]:
    """The points of run ``run_name`` (rows with ``percent_of_peak`` and ``ceiling``, as
    the views annotate them) that beat their measured ceiling."""
    name = "ceilings: latest run"
    held = [r for r in rows if r.get("ceiling")]
    if not held:
        return [
            Check(
                name,
                "info",
                f"run {run_name}: no point has a ceiling (no profile for its environment, "
                "or no work model)",
                probe_advice(profile) if profile is None else "",
            )
        ]
    above = [r for r in held if r["ceiling"].get("above_measured")]
    if not above:
        return [Check(name, "ok", f"run {run_name}: {len(held)} point(s) within their ceiling")]
    worst = sorted(above, key=lambda r: -float(r.get("percent_of_peak") or 0.0))[:3]
    named = ", ".join(
        f"{r.get('workload')} {r.get('variant')} n={r.get('size')} "
        f"{float(r.get('percent_of_peak') or 0.0):.0f} %"
        for r in worst
    )
    return [
        Check(
            name,
            "warn",
            f"run {run_name}: {len(above)} of {len(held)} point(s) above the measured ceiling "
            f"({named}): the probe underestimates this machine at their sizes",
            probe_advice(profile),
        )
    ]
