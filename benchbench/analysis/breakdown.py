"""Where a captured callable's time goes: its calls ranked by count x median time.

A captured suite (:mod:`benchbench.suite.captured`) stores each distinct aten call as
a workload with the parameters ``capture`` (the callable) and ``count`` (calls per run
of the callable), and the callable itself as a workload with ``capture`` and no
``count`` (``whole``). For one capture on one device, a call's time in the callable
is ``count x median``; the calls are ranked by it, each with its share of their sum,
and the sum is put beside the whole callable's median measured in the same run:
``coverage = sum / whole``. Below 1, the rest of the callable's time is Python, the
dispatcher and autograd bookkeeping around the ops (and the views left out); above 1,
the callable runs its ops faster together than alone (fusion when compiled, caches
warm from the previous op), or the replayed inputs took slower paths.

A capture declared with ``compile=True`` also has a ``whole-compiled`` row (variant
:data:`~benchbench.core.values.COMPILED_VARIANT`, its compile time in
``extra.compile_s``): the breakdown puts it beside the eager whole, with the number of
calls after which compiling has paid for itself (``compile_s / (whole_s -
compiled_s)``).

Pure functions over stored rows (:meth:`Store.measurements`), which may carry
``percent_of_peak`` from :func:`benchbench.views.results.with_roofline`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.core.values import COMPILED_VARIANT

__all__ = ["Breakdown", "CallTime", "breakdowns"]


@dataclass(frozen=True)
class CallTime:
    """One captured call in a breakdown (``total_s = count * median_s``)."""

    workload: str
    op: str
    dtype: str
    count: int
    median_s: float
    total_s: float
    share: float
    bytes_per_s: float | None = None
    flop_per_s: float | None = None
    percent_of_peak: float | None = None


@dataclass(frozen=True)
class Breakdown:
    """One captured callable on one device, as measured in one run.

    ``calls`` are ranked by ``total_s``, largest first; ``not_measured`` lists the
    calls (and the whole) that were skipped or failed, with their reasons: their time
    is missing from ``sum_s``. ``whole_s`` is None when the whole was not measured.
    """

    suite: str
    capture: str
    device: str
    calls: tuple[CallTime, ...]
    sum_s: float
    whole_s: float | None
    not_measured: tuple[tuple[str, str], ...] = ()
    compiled_s: float | None = None
    compile_s: float | None = None

    @property
    def compile_pays_after(self) -> float | None:
        """Calls of the callable after which compiling has paid for itself:
        ``compile_s / (whole_s - compiled_s)``; None when either whole or the compile
        time is missing, or when the compiled callable is not faster (it never pays)."""
        if self.whole_s is None or self.compiled_s is None or self.compile_s is None:
            return None
        saved = self.whole_s - self.compiled_s
        return self.compile_s / saved if saved > 0 else None

    @property
    def coverage(self) -> float | None:
        """``sum_s / whole_s``: the share of the callable's time its timed calls explain."""
        if self.whole_s is None or not self.whole_s > 0:
            return None
        return self.sum_s / self.whole_s

    @property
    def remainder_s(self) -> float | None:
        """``whole_s - sum_s``: Python, dispatch and views around the calls (negative
        when the calls measured alone add up to more than the whole)."""
        return None if self.whole_s is None else self.whole_s - self.sum_s


def _params(row: Mapping[str, Any]) -> Mapping[str, Any]:
    params = row.get("params") or {}
    return params if isinstance(params, Mapping) else dict(params)


def breakdowns(rows: Sequence[Mapping[str, Any]]) -> list[Breakdown]:
    """One :class:`Breakdown` per (suite, capture, device) found in ``rows``, in the
    order their first row appears; rows of other workloads are ignored."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        params = _params(row)
        if "capture" not in params:
            continue
        key = (str(row["suite"]), str(params["capture"]), str(row["device"]))
        groups.setdefault(key, []).append(row)
    return [_breakdown(key, members) for key, members in groups.items()]


def _breakdown(key: tuple[str, str, str], rows: Sequence[Mapping[str, Any]]) -> Breakdown:
    suite, capture, device = key
    measured: list[tuple[Mapping[str, Any], int, float]] = []
    missing: list[tuple[str, str]] = []
    whole_s: float | None = None
    compiled_s: float | None = None
    compile_s: float | None = None
    for row in rows:
        params = _params(row)
        ok = row.get("status") == "ok" and row.get("median_s") is not None
        if not ok:
            missing.append((str(row["workload"]), str(row.get("reason") or row.get("status"))))
            continue
        if "count" not in params and row.get("variant") == COMPILED_VARIANT:
            compiled_s = float(row["median_s"])
            extra = row.get("extra") or {}
            spent = extra.get("compile_s") if isinstance(extra, Mapping) else None
            compile_s = float(spent) if spent is not None else None
            continue
        if "count" not in params:
            whole_s = float(row["median_s"])
            continue
        count = int(params["count"])
        measured.append((row, count, count * float(row["median_s"])))
    total = sum(t for _, _, t in measured)
    calls = [
        CallTime(
            workload=str(row["workload"]),
            op=str(row["variant"]),
            dtype=str(row["dtype"]),
            count=count,
            median_s=float(row["median_s"]),
            total_s=t,
            share=t / total if total > 0 else 0.0,
            bytes_per_s=row.get("bytes_per_s"),
            flop_per_s=row.get("flop_per_s"),
            percent_of_peak=row.get("percent_of_peak"),
        )
        for row, count, t in measured
    ]
    calls.sort(key=lambda c: (-c.total_s, c.workload))
    return Breakdown(
        suite=suite,
        capture=capture,
        device=device,
        calls=tuple(calls),
        sum_s=total,
        whole_s=whole_s,
        not_measured=tuple(missing),
        compiled_s=compiled_s,
        compile_s=compile_s,
    )
