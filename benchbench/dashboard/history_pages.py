"""The pages drawn from every run: the history pages' lines and the overview's sparklines.

Both read :class:`HistoryRows`: one row per (benchmark, environment, run) with its
status, median, CI and instructions per call, as arrays in the site's keys, sorted by
benchmark, environment and run. They come from the store's series read
(:class:`~benchbench.store.series.SeriesRows`: a fleet's year is ~14 million rows,
~40,000 series) or, for data given as a DataFrame of every row, from that. Nothing
here makes a Python object per row: the history files are written as text by
:func:`~benchbench.dashboard.json_numbers.json_numbers`, and the loops are per line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from benchbench.dashboard.json_numbers import compact, json_for_script, json_numbers
from benchbench.dashboard.payload import ChangepointFn, Keys, to_ms
from benchbench.store.series import SeriesRows


@dataclass(frozen=True)
class HistoryRows:
    """Every row of the history, in the site's keys (``b`` benchmark, ``e`` environment,
    -1 for none, ``r`` run, ``s`` status code 0 ok / 1 skipped / 2 error), sorted by
    ``b``, ``e``, ``r``; ``reasons`` maps a row's position to its reason (rows not ok)."""

    b: np.ndarray
    e: np.ndarray
    r: np.ndarray
    s: np.ndarray
    median_s: np.ndarray
    ci_low_s: np.ndarray
    ci_high_s: np.ndarray
    instructions_per_call: np.ndarray
    reasons: dict[int, str]

    @classmethod
    def from_frame(cls, m: pd.DataFrame) -> HistoryRows:
        """From keyed measurements (columns ``b``, ``e``, ``r``, ``sc`` and the values)."""
        m = m.sort_values(["b", "e", "r"], kind="stable")
        s = m["sc"].to_numpy(dtype=np.int8)
        reasons = m["reason"].to_numpy(dtype=object)
        failed = np.flatnonzero(s != 0)
        return cls(
            b=m["b"].to_numpy(dtype=np.int64),
            e=m["e"].to_numpy(dtype=np.int64),
            r=m["r"].to_numpy(dtype=np.int64),
            s=s,
            median_s=_floats(m["median_s"]),
            ci_low_s=_floats(m["ci_low_s"]),
            ci_high_s=_floats(m["ci_high_s"]),
            instructions_per_call=_floats(m["instructions_per_call"]),
            reasons={int(k): reasons[k] for k in failed if isinstance(reasons[k], str)},
        )

    @classmethod
    def from_series(cls, series: SeriesRows, keys: Keys) -> HistoryRows:
        """From the store's series, put in the site's keys and order.

        The series are reordered as whole blocks (by their benchmark and environment
        keys: 40,000 of them sorted, not 14 million rows); within a series the store's
        run order is the site's (both by start time, then id) unless two runs started in
        the same millisecond, which one more sort then settles.
        """
        b_of = pd.Index(list(keys.bench)).get_indexer([b for b, _ in series.keys])
        e_of = pd.Index(list(keys.env)).get_indexer(
            pd.Series([e for _, e in series.keys], dtype=object)
        )
        run_key = pd.Index(list(keys.run)).get_indexer(series.run_ids)
        lengths = np.diff(series.offsets)
        blocks = np.lexsort((e_of, b_of))
        length = lengths[blocks]
        total = int(length.sum())
        shift = series.offsets[:-1][blocks] - np.concatenate(([0], np.cumsum(length)[:-1]))
        rows = np.repeat(shift, length) + np.arange(total)
        block = np.repeat(np.arange(blocks.size), length)
        r = run_key[series.run[rows]]
        keep = (r >= 0) & np.repeat(b_of[blocks] >= 0, length)
        if not keep.all():  # runs or benchmarks the site does not list
            rows, block, r = rows[keep], block[keep], r[keep]
        late = (np.diff(r) < 0) & (np.diff(block) == 0)
        if late.any():
            order = np.lexsort((r, block))
            rows, block, r = rows[order], block[order], r[order]
        position = np.full(series.run.size, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        return cls(
            b=b_of[blocks][block],
            e=e_of[blocks][block],
            r=r,
            s=series.status[rows],
            median_s=series.values["median_s"][rows],
            ci_low_s=series.values["ci_low_s"][rows],
            ci_high_s=series.values["ci_high_s"][rows],
            instructions_per_call=series.values["instructions_per_call"][rows],
            reasons={
                int(position[k]): text for k, text in series.reasons.items() if position[k] >= 0
            },
        )

    def counts(self, runs: int) -> np.ndarray:
        """Points per run (``runs`` of them) and status: an array of shape (runs, 3)."""
        return np.bincount(self.r * 3 + self.s, minlength=3 * runs).reshape(runs, 3)

    def workload_bounds(self, bench_workload: np.ndarray, workloads: int) -> np.ndarray:
        """Where each workload's rows start (``workloads + 1`` bounds): a workload's
        benchmarks are numbered together, so its rows are one stretch."""
        w = bench_workload[self.b] if self.b.size else self.b
        if np.any(np.diff(w) < 0):
            raise ValueError("history rows: benchmarks are not numbered workload by workload")
        return np.searchsorted(w, np.arange(workloads + 1), side="left")


def _floats(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)


def overview_payload(h: HistoryRows, keys: Keys) -> dict[str, Any]:
    """Sparklines per (workload, environment, device, dtype).

    Each value is the mean over the workload's ok points of log(that point's usual
    median time / this run's median time), its usual being its median over its whole
    history on that environment: 0 is "as usual", -0.22 is 20 % slower. A point's work
    per call is the same in every run, so this is the log of its throughput over its
    usual throughput, read from times alone (which the series hold). Normalising per
    point first keeps a missing or failed size from moving the line, which a plain
    geometric mean of throughputs would (the largest size of a sweep can be 1000x the
    smallest). The page averages rows weighted by ``c`` (points counted) when a device
    or dtype filter merges them.
    """
    ok = np.flatnonzero((h.s == 0) & np.isfinite(h.median_s) & (h.median_s > 0))
    if not ok.size:
        return {"lines": []}
    log_time = np.log(h.median_s[ok])
    b, e, r = h.b[ok], h.e[ok], h.r[ok]
    series = np.cumsum(np.concatenate(([0], (np.diff(b) != 0) | (np.diff(e) != 0))))
    usual = pd.Series(log_time).groupby(series).transform("median").to_numpy()
    rows = keys.bench_rows
    devices, device_of = np.unique(rows["device"].astype(str).to_numpy(), return_inverse=True)
    dtypes, dtype_of = np.unique(rows["dtype"].astype(str).to_numpy(), return_inverse=True)
    n_env, n_run = len(keys.env) + 1, max(len(keys.runs), 1)
    line = ((keys.bench_workload[b] * n_env + e + 1) * devices.size + device_of[b]) * dtypes.size
    line = line + dtype_of[b]
    # Mean per (line, run): one hash factorisation of the keys and two bincounts (a
    # pandas groupby of 14 million keys took ~2 s).
    codes, key = pd.factorize(line * n_run + r, sort=True)
    counts = np.bincount(codes, minlength=key.size)
    means = np.bincount(codes, weights=usual - log_time, minlength=key.size) / counts
    key = np.asarray(key, dtype=np.int64)
    line_of, run_of = key // n_run, key % n_run
    cut = np.flatnonzero(np.diff(line_of)) + 1
    lines = []
    for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), key.size], strict=True):
        code = int(line_of[lo])
        code, dt = divmod(code, dtypes.size)
        code, dev = divmod(code, devices.size)
        w, env = divmod(code, n_env)
        lines.append(
            {
                "w": w,
                "e": env - 1,
                "device": str(devices[dev]),
                "dtype": str(dtypes[dt]),
                "r": run_of[lo:hi].tolist(),
                "v": compact(means[lo:hi], 4),
                "c": counts[lo:hi].tolist(),
            }
        )
    return {"lines": lines}


def history_text(
    h: HistoryRows,
    lo: int,
    hi: int,
    annotations: pd.DataFrame,
    keys: Keys,
    changepoints: ChangepointFn | None = None,
    marks: Mapping[tuple[int, int], np.ndarray] | None = None,
) -> str:
    """The history document of rows ``lo`` to ``hi`` (one workload's), as JSON text.

    Per benchmark and environment (a line): ``r`` the runs, ``m`` the median time (None
    where the run did not succeed), ``lo`` / ``hi`` its CI, ``s`` the status codes,
    ``reason`` the reasons of the failed runs by position, ``cp`` the positions of
    change points, and ``ins`` the instructions per call on lines where some run counted
    them. Change points are ``marks[(b, e)]`` (the runs where the detector found one)
    when given, else ``changepoints(values)`` of the line's ok medians.
    """
    b, e, r, s = h.b[lo:hi], h.e[lo:hi], h.r[lo:hi], h.s[lo:hi]
    median = h.median_s[lo:hi]
    texts = {
        "r": json_numbers(r, None),
        "m": json_numbers(np.where(s == 0, median, np.nan)),
        "lo": json_numbers(h.ci_low_s[lo:hi]),
        "hi": json_numbers(h.ci_high_s[lo:hi]),
        "s": json_numbers(s, None),
    }
    ins = h.instructions_per_call[lo:hi]
    counted = np.isfinite(ins)
    if counted.any():
        texts["ins"] = json_numbers(ins, 8)
    failed = np.array(sorted(k - lo for k in h.reasons if lo <= k < hi), dtype=np.int64)
    cut = np.flatnonzero((np.diff(b) != 0) | (np.diff(e) != 0)) + 1
    lines = []
    for a, z in zip([0, *cut.tolist()], [*cut.tolist(), hi - lo], strict=True):
        if a == z:
            continue
        key = (int(b[a]), int(e[a]))
        parts = [f'"b":{key[0]},"e":{key[1]}']
        parts += [f'"{name}":{texts[name].array(a, z)}' for name in ("r", "m", "lo", "hi", "s")]
        at = failed[np.searchsorted(failed, a) : np.searchsorted(failed, z)]
        reason = {str(k - a): h.reasons[lo + k] for k in at.tolist()}
        parts.append(f'"reason":{json_for_script(reason)}' if reason else '"reason":{}')
        if marks is not None:
            runs = np.asarray(marks.get(key, ()), dtype=np.int64)
            where = np.searchsorted(r[a:z], runs)
            found = where[(where < z - a) & (r[a:z][np.minimum(where, z - a - 1)] == runs)]
            cp = sorted(set(found.tolist()))
        else:
            cp = _callback_marks(s[a:z], median[a:z], changepoints)
        parts.append(f'"cp":{json_for_script(cp)}' if cp else '"cp":[]')
        if "ins" in texts and counted[a:z].any():
            parts.append(f'"ins":{texts["ins"].array(a, z)}')
        lines.append("{" + ",".join(parts) + "}")
    notes = _notes(annotations, keys, set(np.unique(b).tolist()))
    return '{"lines":[' + ",".join(lines) + '],"annotations":' + json_for_script(notes) + "}"


def _callback_marks(
    status: np.ndarray, median: np.ndarray, changepoints: ChangepointFn | None
) -> list[int]:
    """Positions of ``changepoints``' change points among a line's ok medians."""
    if changepoints is None:
        return []
    ok_at = np.flatnonzero((status == 0) & np.isfinite(median))
    if ok_at.size < 3:
        return []
    found = changepoints([float(v) for v in median[ok_at]])
    return [int(ok_at[c]) for c in found if 0 <= c < ok_at.size]


def _notes(annotations: pd.DataFrame, keys: Keys, benches: set[int]) -> list[dict[str, Any]]:
    notes = []
    for a in annotations.to_dict("records"):
        bid, eid = a.get("benchmark_id"), a.get("environment_id")
        b = keys.bench.get(str(bid), -2) if bid is not None else -1
        if b == -2 or (b >= 0 and b not in benches):
            continue
        e = keys.env.get(str(eid), -2) if eid is not None else -1
        if e != -2:
            notes.append({"b": b, "e": e, "t": to_ms([a.get("at")])[0], "text": str(a.get("text"))})
    return notes


def change_marks(
    change_points: Mapping[tuple[str, str], Sequence[str]], keys: Keys
) -> dict[tuple[int, int], np.ndarray]:
    """The detector's change points (runs by (benchmark_id, environment_id)) in the
    site's keys: the run keys of each (benchmark, environment) line, sorted."""
    out: dict[tuple[int, int], np.ndarray] = {}
    for (bench, env), runs in change_points.items():
        b, e = keys.bench.get(str(bench)), keys.env.get(str(env))
        at = sorted(keys.run[str(run)] for run in runs if str(run) in keys.run)
        if b is not None and e is not None and at:
            out[(b, e)] = np.asarray(at, dtype=np.int64)
    return out
