"""The hardware profile's value types: what `benchbench probe` measured, as stored.

Kept apart from :mod:`benchbench.machine.probe` (which imports torch, ~3 s) so that views
and the store read a profile without importing torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.errors import StoreError

# History: 1 — first version; 2 — ``repeats`` and ``min_call_bytes``. Version 1 documents
# are still read (as one repeat of one pass per call): `doctor` says to probe again.
# The ``update`` op (in-place read-modify-write) joined ``bandwidth`` within version 2: it
# is one more key of a mapping every reader already iterates, so older readers still read
# new profiles; a profile without it holds in-place points to the copy curve, with a note
# (:func:`benchbench.analysis.roofline.ceiling_for`), and `doctor` says to probe again.
PROFILE_VERSION = 2
_READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class CacheLevel:
    """A cache boundary found where bandwidth drops with growing working set.

    ``size_bytes`` is where the bandwidth is halfway (in log) between the plateau before
    and after the drop; the drop spans ``drop_start_bytes`` (last point on the upper
    plateau) to ``drop_end_bytes`` (first point on the lower one).
    """

    size_bytes: int
    drop_start_bytes: int
    drop_end_bytes: int
    bytes_per_s_before: float
    bytes_per_s_after: float


@dataclass(frozen=True)
class OsCache:
    """A data or unified cache as the OS reports it, per instance (per core for L1/L2)."""

    level: int
    type: str
    size_bytes: int


@dataclass(frozen=True)
class Profile:
    """A device's measured ceilings; stored with the machine (see :meth:`to_dict`).

    ``bandwidth`` maps an op (``read``, ``write``, ``copy``, ``update``, and ``read@1t``
    ... for one thread) to ``((working_set_bytes, bytes_per_s), ...)`` ascending in size.
    Bytes are counted as STREAM does, the loads and stores the code names: a copy of a
    ``w``-byte working set is credited ``w`` per pass (half read, half written; the
    write-allocate read of the destination is not counted), an update of a ``w``-byte
    buffer ``2 w`` (read and written back). ``update`` is absent from profiles probed
    before it was measured (see :attr:`has_update_curve`).
    ``memory_bytes_per_s`` is, per op, the plateau beyond the last-level cache (main
    memory) and ``cache_bytes_per_s`` the best in-cache figure. ``extra`` holds
    device-specific figures (CUDA transfers and latencies). Each bandwidth point is the
    best of ``repeats`` sweeps, and each timed call of them moved at least
    ``min_call_bytes`` by sweeping its working set several times (0: one pass per call,
    as version 1 profiles did, so small working sets measured the call overhead).
    """

    device: str
    threads: int
    bandwidth: Mapping[str, tuple[tuple[int, float], ...]]
    cache_levels: tuple[CacheLevel, ...]
    os_caches: tuple[OsCache, ...]
    peak_flop_per_s: Mapping[str, float]
    memory_bytes_per_s: Mapping[str, float]
    cache_bytes_per_s: Mapping[str, float]
    timer_resolution_s: float
    timer_observed_resolution_s: float
    timer_overhead_s: float
    duration_s: float
    extra: Mapping[str, float] = field(default_factory=dict)
    repeats: int = 1
    min_call_bytes: int = 0

    @property
    def has_update_curve(self) -> bool:
        """Whether the probe measured the in-place ``update`` curve (older profiles did not)."""
        return bool(self.bandwidth.get("update"))

    @property
    def peak_memory_bytes_per_s(self) -> float:
        """Best main-memory bandwidth over the ops but ``update`` (0.0 when none was
        measured): the roof of points that read some buffers and write others. An
        update's own is ``memory_bytes_per_s["update"]``; it is not a roof for a copy,
        whose write-allocate moves 1.5x the bytes it is credited."""
        return max((v for k, v in self.memory_bytes_per_s.items() if k != "update"), default=0.0)

    @property
    def peak_cache_bytes_per_s(self) -> float:
        """Best in-cache bandwidth over the ops but ``update`` (0.0 when none was
        measured; see :attr:`peak_memory_bytes_per_s`)."""
        return max((v for k, v in self.cache_bytes_per_s.items() if k != "update"), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe document with a ``profile_version`` key."""
        return {
            "profile_version": PROFILE_VERSION,
            "device": self.device,
            "threads": self.threads,
            "bandwidth": {op: [[b, v] for b, v in pts] for op, pts in self.bandwidth.items()},
            "cache_levels": [vars(c).copy() for c in self.cache_levels],
            "os_caches": [vars(c).copy() for c in self.os_caches],
            "peak_flop_per_s": dict(self.peak_flop_per_s),
            "memory_bytes_per_s": dict(self.memory_bytes_per_s),
            "cache_bytes_per_s": dict(self.cache_bytes_per_s),
            "timer_resolution_s": self.timer_resolution_s,
            "timer_observed_resolution_s": self.timer_observed_resolution_s,
            "timer_overhead_s": self.timer_overhead_s,
            "duration_s": self.duration_s,
            "extra": dict(self.extra),
            "repeats": self.repeats,
            "min_call_bytes": self.min_call_bytes,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Profile:
        """Rebuild a profile from :meth:`to_dict` output; data, so every field is checked."""
        version = doc.get("profile_version") if isinstance(doc, Mapping) else None
        if version not in _READABLE_VERSIONS:
            raise StoreError(
                f"hardware profile: profile_version {version!r} is not supported (this "
                f"benchbench reads versions {', '.join(map(str, _READABLE_VERSIONS))}); "
                "run 'benchbench probe' again"
            )
        try:
            return cls(
                device=str(doc["device"]),
                threads=int(doc["threads"]),
                bandwidth={
                    str(op): tuple((int(b), float(v)) for b, v in pts)
                    for op, pts in doc["bandwidth"].items()
                },
                cache_levels=tuple(
                    CacheLevel(
                        size_bytes=int(c["size_bytes"]),
                        drop_start_bytes=int(c["drop_start_bytes"]),
                        drop_end_bytes=int(c["drop_end_bytes"]),
                        bytes_per_s_before=float(c["bytes_per_s_before"]),
                        bytes_per_s_after=float(c["bytes_per_s_after"]),
                    )
                    for c in doc["cache_levels"]
                ),
                os_caches=tuple(
                    OsCache(
                        level=int(c["level"]), type=str(c["type"]), size_bytes=int(c["size_bytes"])
                    )
                    for c in doc["os_caches"]
                ),
                peak_flop_per_s={str(k): float(v) for k, v in doc["peak_flop_per_s"].items()},
                memory_bytes_per_s={str(k): float(v) for k, v in doc["memory_bytes_per_s"].items()},
                cache_bytes_per_s={str(k): float(v) for k, v in doc["cache_bytes_per_s"].items()},
                timer_resolution_s=float(doc["timer_resolution_s"]),
                timer_observed_resolution_s=float(doc["timer_observed_resolution_s"]),
                timer_overhead_s=float(doc["timer_overhead_s"]),
                duration_s=float(doc["duration_s"]),
                extra={str(k): float(v) for k, v in doc.get("extra", {}).items()},
                repeats=int(doc["repeats"]) if version >= 2 else 1,
                min_call_bytes=int(doc["min_call_bytes"]) if version >= 2 else 0,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(
                f"hardware profile: malformed document ({type(exc).__name__}: {exc}); "
                "run 'benchbench probe' again"
            ) from exc


# --- cache sizes -----------------------------------------------------------------------
