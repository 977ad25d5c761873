"""Per-page documents: one workload, one run, the environments, the breakdown of the
latest captured run (the pages drawn from every run are :mod:`.history_pages`).

Each function takes the measurements already enriched by
:func:`benchbench.dashboard.payload.add_throughput` and keyed (columns ``r``, ``e``,
``w``, ``b``), and returns plain dicts and lists ready for JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from benchbench.analysis.breakdown import breakdowns
from benchbench.analysis.crossover import model_crossover
from benchbench.analysis.fit import Fit
from benchbench.dashboard.payload import (
    FitFn,
    Keys,
    compact,
    params_text,
)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) and value > 0 else None


def _failures(rows: pd.DataFrame, plottable: pd.Series) -> list[dict[str, Any]]:
    bad = rows[(rows["status"] != "ok") | ~plottable]
    out = []
    for b, r, s, rs, size in zip(
        bad["b"], bad["r"], bad["status"], bad["reason"], bad["size"], strict=True
    ):
        reason = rs if isinstance(rs, str) else None
        if s == "ok":
            reason = f"size {size} cannot be placed on a log axis (needs a positive number)"
        out.append({"b": int(b), "r": int(r), "status": str(s), "reason": reason})
    return out


def workload_payload(
    rows: pd.DataFrame, profiles: dict[str, dict], env_ids: list[str], fit: FitFn | None
) -> dict[str, Any]:
    """Throughput versus size for the latest run per environment of one workload.

    One line per environment, variant, dtype, device, named axes (``params``:
    ``mode=bwd``) and timing method (``timing``: ``graph x100``; None off CUDA). A run
    that only counted instructions (ok, no median) has no throughput: the latest run
    that timed the workload (or failed in it) is shown instead.
    """
    rows = rows[(rows["status"] != "ok") | rows["median_s"].notna()]
    latest = rows.groupby("e")["r"].transform("max")
    rows = rows[rows["r"] == latest]
    series: list[dict[str, Any]] = []
    # A log axis cannot place a size that is missing or <= 0; such points are listed
    # with the failures instead of silently vanishing.
    plottable = np.isfinite(rows["size"]) & (rows["size"] > 0)
    ok = rows[(rows["status"] == "ok") & np.isfinite(rows["thr"]) & plottable].copy()
    ok["ptext"] = [params_text(p) for p in ok["params"]]
    # A CUDA graph line and an events line of one point are two lines, told apart.
    ok["how"] = [h if isinstance(h, str) else "" for h in ok["timing"]]
    keys = ["e", "variant", "dtype", "device", "ptext", "how", "unit"]
    for (e, variant, dtype, device, ptext, how, unit), s in ok.groupby(keys, sort=True):
        s = s.sort_values("size")
        x = s["size"].to_numpy(dtype=float)
        work = s["work"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            item: dict[str, Any] = {
                "e": int(e),
                "r": int(s["r"].iloc[0]),
                "variant": str(variant),
                "dtype": str(dtype),
                "device": str(device),
                "params": str(ptext),
                "timing": str(how) or None,
                "unit": str(unit),
                "x": compact(x, 8),
                "y": compact(s["thr"]),
                "q1": compact(work / s["q3_s"].to_numpy(dtype=float)),
                "q3": compact(work / s["q1_s"].to_numpy(dtype=float)),
                "lo": compact(work / s["ci_high_s"].to_numpy(dtype=float)),
                "hi": compact(work / s["ci_low_s"].to_numpy(dtype=float)),
                "fit": None,
                # Bytes moved per element: places the cache sizes on the size axis.
                "bytes_per_item": _finite(np.nanmedian(work / x)) if unit == "B/s" else None,
            }
        if fit is not None and len(x) >= 2:
            params = fit(list(x), list(s["median_s"].to_numpy(dtype=float)))
            if params is not None and params[1] > 0:
                t0, rate = float(params[0]), float(params[1])
                with np.errstate(divide="ignore", invalid="ignore"):
                    y_fit = work / (t0 + x / rate)
                item["fit"] = {"t0_s": t0, "rate": rate, "y": compact(y_fit)}
        series.append(item)
    return {
        "series": series,
        "failures": _failures(rows, plottable),
        "crossovers": crossovers(series),
        "ceilings": ceilings(series, profiles, env_ids),
    }


def crossovers(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sizes where one fitted line overtakes another (same environment and unit, one axis apart).

    The model crossover of :func:`benchbench.analysis.crossover.model_crossover` on the
    ``t = t0 + n / rate`` fits over size, kept only inside the measured size range, as
    beyond it the model is extrapolating.
    """
    out = []
    for i, a in enumerate(series):
        for j in range(i + 1, len(series)):
            b = series[j]
            if a["fit"] is None or b["fit"] is None or (a["e"], a["unit"]) != (b["e"], b["unit"]):
                continue
            # Only lines that differ in one axis answer a question ("which variant",
            # "which device", "which dtype"); all pairs of 12 lines would be 66 markers.
            if sum(a[k] != b[k] for k in ("variant", "dtype", "device", "params")) != 1:
                continue
            xs = [v for v in a["x"] + b["x"] if v is not None]
            if not xs:
                continue
            n = model_crossover(_size_fit(a), _size_fit(b), (min(xs), max(xs)))
            if n is not None:
                # Beyond n the line with the higher rate is faster.
                faster = i if a["fit"]["rate"] > b["fit"]["rate"] else j
                out.append({"a": i, "b": j, "size": compact([n])[0], "faster_above": faster})
    return out


def _size_fit(line: dict[str, Any]) -> Fit:
    """A series' fit over size (elements) as a :class:`Fit`."""
    fit = line["fit"]
    return Fit(
        t0_s=fit["t0_s"],
        rate_per_s=fit["rate"],
        r2=math.nan,
        n_points=len(line["x"]),
        work_unit="items",
    )


def ceilings(
    series: list[dict[str, Any]], profiles: dict[str, dict], env_ids: list[str]
) -> list[dict[str, Any]]:
    """Machine ceilings (peak bandwidth, peak FLOP/s per dtype) and cache sizes as sizes."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for s in series:
        profile = (profiles.get(env_ids[s["e"]]) if s["e"] >= 0 else None) or {}
        if s["unit"] == "B/s" and profile.get("peak_bytes_per_s"):
            key = (s["e"], "bw")
            if key not in seen:
                seen.add(key)
                out.append(
                    {
                        "e": s["e"],
                        "kind": "peak",
                        "unit": "B/s",
                        "label": "peak bandwidth",
                        "value": float(profile["peak_bytes_per_s"]),
                    }
                )
                # Bytes moved per element turns a cache size into an x position.
                per = s.get("bytes_per_item")
                if per:
                    for c in profile.get("caches") or []:
                        if c.get("size_bytes"):
                            out.append(
                                {
                                    "e": s["e"],
                                    "kind": "cache",
                                    "unit": "B/s",
                                    "label": f"L{c.get('level', '?')}",
                                    "size": float(c["size_bytes"]) / per,
                                }
                            )
        peaks = profile.get("peak_flop_per_s") or {}
        if s["unit"] == "FLOP/s" and peaks.get(s["dtype"]):
            key = (s["e"], "flop:" + s["dtype"])
            if key not in seen:
                seen.add(key)
                out.append(
                    {
                        "e": s["e"],
                        "kind": "peak",
                        "unit": "FLOP/s",
                        "label": f"peak {s['dtype']}",
                        "value": float(peaks[s["dtype"]]),
                    }
                )
    return out


def run_payloads(m: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    """One column-oriented document per run: every point with its status and reason.

    A run that counted instructions also has ``ins`` (per call, 8 significant digits:
    the compare page's ratio is then the CLI's to 1e-7, far inside a 1 % minimum
    effect) and ``ins_noise`` (``instructions_noise``); a point not counted has None.
    A run measured in several processes has ``lv`` and ``pk`` (``log_var``, ``processes``):
    the compare page's MDE is made of them (None for a point of one process).
    """
    m = m.sort_values(["r", "b"], kind="stable").reset_index(drop=True)
    cols = {
        "m": compact(m["median_s"]),
        "lo": compact(m["ci_low_s"]),
        "hi": compact(m["ci_high_s"]),
        "thr": compact(m["thr"]),
        "err": compact(pd.to_numeric(m["max_rel_error"], errors="coerce"), 3),
    }
    counted = pd.to_numeric(m["instructions_per_call"], errors="coerce")
    ins = compact(counted, 8)
    ins_noise = compact(pd.to_numeric(m["instructions_noise"], errors="coerce"), 4)
    absent = pd.Series(np.nan, index=m.index)
    spread = pd.to_numeric(m.get("log_var", absent), errors="coerce")
    log_var = compact(spread, 4)
    procs = compact(pd.to_numeric(m.get("processes", absent), errors="coerce"))
    status = m["sc"].tolist()
    bench = m["b"].tolist()
    units = m["unit"].tolist()
    reasons = m["reason"].to_numpy(dtype=object).tolist()
    warnings = m["warnings"].tolist()
    bounds = np.flatnonzero(np.diff(m["r"].to_numpy())) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(m)]
    for lo, hi in zip(starts, ends, strict=True):
        if lo == hi:
            continue
        doc: dict[str, Any] = {"b": bench[lo:hi], "s": status[lo:hi], "unit": units[lo:hi]}
        for name, values in cols.items():
            doc[name] = values[lo:hi]
        doc["reason"] = {
            str(k - lo): str(reasons[k]) for k in range(lo, hi) if isinstance(reasons[k], str)
        }
        doc["warn"] = {
            str(k - lo): [str(w) for w in warnings[k]]
            for k in range(lo, hi)
            if isinstance(warnings[k], (list, tuple, np.ndarray)) and len(warnings[k])
        }
        if counted.iloc[lo:hi].notna().any():
            doc["ins"], doc["ins_noise"] = ins[lo:hi], ins_noise[lo:hi]
        if spread.iloc[lo:hi].notna().any():
            doc["lv"], doc["pk"] = log_var[lo:hi], procs[lo:hi]
        yield int(m["r"].to_numpy()[lo]), doc


def environments_payload(
    environments: pd.DataFrame, profiles: dict[str, dict], keys: Keys
) -> list[dict[str, Any]]:
    """Fingerprint (comparability fields), info and measured ceilings per environment."""
    by_id = {str(r["environment_id"]): r for r in environments.to_dict("records")}
    out = []
    for env_id in keys.env:
        r = by_id.get(env_id, {})
        out.append(
            {
                "id": env_id,
                "machine": None if r.get("machine") is None else str(r.get("machine")),
                "fields": _flat(r.get("fields")),
                "info": _flat(r.get("info")),
                "profile": _flat(profiles.get(env_id)),
            }
        )
    return out


def _flat(doc: object, prefix: str = "") -> dict[str, str]:
    """Nested dicts and lists as ``a.b[0].c -> text``, so two environments diff key by key."""
    out: dict[str, str] = {}
    if isinstance(doc, dict):
        for k in sorted(doc, key=str):
            out.update(_flat(doc[k], f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            out.update(_flat(v, f"{prefix}[{i}]"))
    elif prefix:
        out[prefix] = "" if doc is None else str(doc)
    return out


def _none_if_nan(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else compact([value], digits)[0]


def breakdown_payload(m: pd.DataFrame) -> dict[str, Any]:
    """``benchbench breakdown`` of the latest run (``r``) holding captured calls.

    Per capture and device: the calls ranked by count x median with their shares,
    throughput (``bytes_per_s``, ``flop_per_s``) and % of the roofline ceiling (None
    without a hardware profile), the sum beside the whole callable (``coverage =
    sum_s / whole_s``, None when the whole was not measured), the compiled whole
    (``compiled_s``, ``compile_s``, ``compile_pays_after``; None when not measured)
    and the calls that were not measured, with their reasons.
    ``run`` is None when no run holds captured calls.
    """
    captured = m[[isinstance(p, dict) and "capture" in p for p in m["params"]]]
    if not len(captured):
        return {"run": None, "breakdowns": []}
    r = int(captured["r"].max())
    columns = ["suite", "workload", "variant", "dtype", "device", "params", "status", "reason"]
    columns += ["median_s", "bytes_per_s", "flop_per_s", "percent_of_peak", "compile_s"]
    latest = captured[captured["r"] == r].reindex(columns=columns)
    records = [{k: _none_if_nan(v) for k, v in row.items()} for row in latest.to_dict("records")]
    for record in records:  # analysis.breakdown reads a compiled whole's compile time here
        record["extra"] = {"compile_s": record.pop("compile_s")}
    docs = []
    for b in breakdowns(records):
        docs.append(
            {
                "suite": b.suite,
                "capture": b.capture,
                "device": b.device,
                "calls": [
                    {
                        "workload": c.workload,
                        "op": c.op,
                        "dtype": c.dtype,
                        "count": c.count,
                        "median_s": compact([c.median_s])[0],
                        "total_s": compact([c.total_s])[0],
                        "share": compact([c.share], 4)[0],
                        "bytes_per_s": _rounded(c.bytes_per_s),
                        "flop_per_s": _rounded(c.flop_per_s),
                        "percent_of_peak": _rounded(c.percent_of_peak, 3),
                    }
                    for c in b.calls
                ],
                "sum_s": compact([b.sum_s])[0],
                "whole_s": None if b.whole_s is None else compact([b.whole_s])[0],
                "coverage": None if b.coverage is None else compact([b.coverage], 4)[0],
                "compiled_s": _rounded(b.compiled_s),
                "compile_s": _rounded(b.compile_s),
                "compile_pays_after": _rounded(b.compile_pays_after),
                "not_measured": [list(x) for x in b.not_measured],
            }
        )
    return {"run": r, "breakdowns": docs}
