"""The run-to-run term and the shared shift of a run against the run before it.

``benchbench compare`` judges two runs measured apart with the store's earlier runs
(:func:`benchbench.analysis.rerun.run_to_run`): every point's standard error multiplied by
the run-to-run factor, and, once the shift between the two runs is judged against the
earlier shifts, every point beyond it. The compare page applies the same term, read here
for the runs a nightly and an alert ask about (:func:`asked`): each environment's newest
run against the run before it (the page's first pair) and the first bad run of each open
alert against the run before it. The rows those runs' histories need are read once, in
two queries. The term reads up to eleven runs a run (~0.1-0.3 ms a point), so it is not
read for every run the site holds: another pair on the page is judged within its two
runs only, and says so with the command that adds the term.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from benchbench.analysis.compare import lockstep_pair
from benchbench.analysis.rerun import HISTORY, run_to_run
from benchbench.analysis.verdict import ALPHA, MIN_EFFECT
from benchbench.store import Store

#: The columns of a row the term reads (:func:`benchbench.analysis.rerun.pair_scores`).
_COLUMNS = ("run_id", "benchmark_id", "status", "median_s", "ci_low_s", "ci_high_s")


class _Rows:
    """A store's earlier runs and the few columns of their rows, read once."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._earlier: dict[str, list[dict[str, Any]]] = {}
        self.rows: dict[str, list[dict[str, Any]]] = {}

    def earlier_runs(self, run: Mapping[str, Any], count: int) -> list[dict[str, Any]]:
        key = str(run["id"])
        if key not in self._earlier:
            self._earlier[key] = self._store.earlier_runs(run, HISTORY + 1)
        return self._earlier[key][:count]

    def measurements(self, run_id: str) -> list[dict[str, Any]]:
        return self.rows.get(str(run_id), [])

    def read(self, run_ids: Sequence[str]) -> None:
        """Read the rows of ``run_ids``: the columns the term needs and the process
        medians (only their number matters)."""
        frame = self._store.dataframe(run_ids=list(run_ids), columns=_COLUMNS)
        medians = self._store.process_medians(run_ids)
        for found in frame.to_dict("records"):
            record = {str(k): v for k, v in found.items()}
            key = (str(record["run_id"]), str(record["benchmark_id"]))
            record["process_medians_s"] = medians.get(key, [])
            self.rows.setdefault(key[0], []).append(record)


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
        )
        out[str(run["id"])] = {
            "base": str(base["id"]),
            "run_to_run": rerun_dict(rerun),
            "scope": scope(rerun, "these runs"),
            "shift": None if shift is None else {**shift.to_dict(), "line": shift.line},
            "after_shift": shift is not None and shift.judged,
        }
    return out
