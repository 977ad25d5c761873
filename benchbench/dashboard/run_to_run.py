"""The run-to-run term and the shared shift of a run against the run before it.

``benchbench compare`` judges two runs measured apart with the store's earlier runs
(:func:`benchbench.analysis.rerun.run_to_run`): every point's standard error multiplied by
the run-to-run factor, and, once the shift between the two runs is judged against the
earlier shifts, every point beyond it. The compare page applies the same term, read here
for the runs a nightly and an alert ask about (:func:`asked`): each environment's newest
run against the run before it (the page's first pair) and the first bad run of each open
alert against the run before it. The rows those runs' histories need are read once, in
one query (their process medians: the headline and interval of a several-process point
are derived from them on read). The term reads up to eleven runs for each run it judges,
so it is not read for every run the site holds: another pair on the page is judged within its two
runs only, and says so with the command that adds the term.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchbench.analysis.calibration import Calibration, calibration_of
from benchbench.analysis.compare import lockstep_pair
from benchbench.analysis.rerun import HISTORY, run_to_run
from benchbench.analysis.verdict import ALPHA, MIN_EFFECT
from benchbench.core.stats import process_intervals
from benchbench.store import Store


class _Rows:
    """A store's earlier runs and the few columns of their rows, read once."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._earlier: dict[str, list[dict[str, Any]]] = {}
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self._calibrations: dict[Any, Calibration | None] = {}

    def earlier_runs(self, run: Mapping[str, Any], count: int) -> list[dict[str, Any]]:
        key = str(run["id"])
        if key not in self._earlier:
            self._earlier[key] = self._store.earlier_runs(run, HISTORY + 1)
        return self._earlier[key][:count]

    def measurements(self, run_id: str) -> list[dict[str, Any]]:
        return self.rows.get(str(run_id), [])

    def calibration(self, run: Mapping[str, Any]) -> Calibration | None:
        """The machine's calibration for ``run`` (each environment's read once; none for
        a run with a point off the CPU)."""
        env = run.get("environment_id")
        if any(r["device"] != "cpu" for r in self.measurements(run["id"])):
            return None
        if env not in self._calibrations:
            self._calibrations[env] = calibration_of(self._store, run, self.measurements(run["id"]))
        return self._calibrations[env]

    def read(self, run_ids: Sequence[str]) -> None:
        """Read the rows of ``run_ids`` that the term reads: the points measured ok in
        several processes, each with the headline and interval the store derives from
        its process medians on read (:func:`~benchbench.store.rows.rederived`), from the
        process medians alone (one query), the points of each process count at once."""
        devices = {str(b["id"]): b["device"] for b in self._store.benchmarks()}
        by_count: dict[int, list[tuple[tuple[str, str], list[float]]]] = {}
        for key, medians in self._store.process_medians(run_ids, ok_only=True).items():
            if len(medians) >= 2 and min(medians) > 0:
                by_count.setdefault(len(medians), []).append((key, medians))
        for found in by_count.values():
            centres, lows, highs = process_intervals(np.array([m for _, m in found]))
            for ((run, bench), medians), centre, low, high in zip(
                found, centres.tolist(), lows.tolist(), highs.tolist(), strict=True
            ):
                row = {"benchmark_id": bench, "status": "ok", "process_medians_s": medians}
                row["device"] = devices.get(bench, "?")
                row.update(median_s=centre, ci_low_s=low, ci_high_s=high)
                self.rows.setdefault(run, []).append(row)


def asked(runs: pd.DataFrame, alerts: pd.DataFrame, shown: set[str]) -> set[str]:
    """Of the ``shown`` runs, each environment's newest (``runs``: ``run_id``,
    ``started_at``, ``environment_id``) and the first bad run of each open alert."""
    held = runs[runs["run_id"].astype(str).isin(shown) & runs["environment_id"].notna()]
    ordered = held.sort_values(["started_at", "run_id"], kind="stable")
    out = set(ordered.groupby("environment_id", sort=False).tail(1)["run_id"].astype(str))
    open_ = alerts[alerts["status"] == "open"]
    out |= {str(r) for r in open_["first_bad_run_id"] if isinstance(r, str) and r in shown}
    return out


def consecutive(
    store: Store, runs: Sequence[Mapping[str, Any]], alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """For each of ``runs`` (store run records) with a run before it, not its other side
    in one ``ab``: ``base`` (that run's id), ``run_to_run``
    (:func:`~benchbench.analysis.rerun.rerun_dict`, None: within these runs only) and
    ``scope`` (its words), ``shift`` (its dict and ``line``, None below ten matched
    points) and ``after_shift`` (the points judged beyond it), as ``benchbench compare
    BASE RUN`` gives them at ``alpha`` and ``min_effect``."""
    from benchbench.analysis.rerun import rerun_dict, scope

    reader = _Rows(store)
    needed: set[str] = set()
    for run in runs:
        needed.add(str(run["id"]))
        needed.update(str(r["id"]) for r in reader.earlier_runs(run, HISTORY + 1))
    if not needed:
        return {}
    reader.read(sorted(needed))
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        earlier = reader.earlier_runs(run, 1)
        if not earlier:
            continue
        base = earlier[0]
        if lockstep_pair(base, run) or lockstep_pair(run, base):
            continue  # two sides of one `ab`: paired, with no run-to-run term
        rerun, shift = run_to_run(
            reader,
            (base, reader.measurements(base["id"])),
            (run, reader.measurements(run["id"])),
            alpha,
            min_effect,
            reader.calibration(run),
        )
        out[str(run["id"])] = {
            "base": str(base["id"]),
            "run_to_run": rerun_dict(rerun),
            "scope": scope(rerun, "these runs"),
            "shift": None if shift is None else {**shift.to_dict(), "line": shift.line},
            "after_shift": shift is not None and shift.judged,
        }
    return out
