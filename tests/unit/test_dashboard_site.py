"""The dashboard's data splitting, escaping, overlays, empty store and server."""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchbench.analysis.compare import compare_rows
from benchbench.analysis.detectable import BEYOND_SHIFT, factor_table, side_variance
from benchbench.analysis.verdict import ALPHA, INSTRUCTIONS_MIN_EFFECT, MIN_EFFECT
from benchbench.core.errors import StoreError, UsageError
from benchbench.core.values import Result
from benchbench.dashboard import MEASUREMENT_COLUMNS, DashboardData, build_site
from benchbench.dashboard.from_store import load
from benchbench.dashboard.payload import add_throughput, compact, safe_repo_url
from benchbench.dashboard.serve import Rebuilder, make_server
from benchbench.dashboard.site import json_for_script
from benchbench.dashboard.synthetic import synthetic_data
from benchbench.store import open_store
from tests.synthetic import point, write_history

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
NOW = datetime(2026, 3, 9, tzinfo=timezone.utc)


def read_data(path: Path) -> Any:
    """The JSON document a data script assigns (the inverse of data_script)."""
    text = path.read_text()
    return json.loads(text[text.index("]=") + 2 : text.rindex(";")])


def hand_data(medians: list[float | None], reason: str = "device lost") -> DashboardData:
    """One point, one environment, one run per median; None is a failed run."""
    runs, rows = [], []
    for k, med in enumerate(medians):
        rid = f"run{k}"
        runs.append(
            {
                "run_id": rid,
                "label": f"r{k}",
                "kind": "nightly",
                "status": "finished",
                "started_at": T0 + timedelta(days=k),
                "finished_at": None,
                "git_sha": f"{k:040x}",
                "git_branch": "main",
                "git_dirty": False,
                "environment_id": "envA",
                "suites": ["quick"],
                "tags": [],
            }
        )
        ok = med is not None
        rows.append(
            {
                "run_id": rid,
                "benchmark_id": "b1",
                "suite": "s",
                "workload": "sqrt",
                "variant": "torch",
                "device": "cpu",
                "dtype": "float32",
                "size": 1024,
                "params": {"size": 1024},
                "status": "ok" if ok else "error",
                "reason": None if ok else reason,
                "median_s": med,
                "ci_low_s": med,
                "ci_high_s": med,
                "q1_s": med,
                "q3_s": med,
                "bytes_per_s": 8192 / med if ok else None,
                "flop_per_s": None,
                "items_per_s": None,
                "max_rel_error": 0.0,
                "warnings": [],
                "environment_id": "envA",
                "started_at": T0 + timedelta(days=k),
                "git_sha": f"{k:040x}",
            }
        )
    env = pd.DataFrame(
        [{"environment_id": "envA", "machine": "box", "fields": {"cpu": "x"}, "info": {}}]
    )
    return DashboardData(
        runs=pd.DataFrame(runs),
        environments=env,
        measurements=pd.DataFrame(rows, columns=list(MEASUREMENT_COLUMNS)),
    )


def test_json_for_script_cannot_close_the_script_element() -> None:
    evil = "</script><script>alert(1)</script>&<!--"
    text = json_for_script({"label": evil})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"label": evil}


def test_compact_keeps_five_significant_digits_and_nulls_non_finite() -> None:
    assert compact([123456789.0, 1.23456789e-9, 0.0, np.nan, np.inf]) == [
        123460000.0,
        1.2346e-09,
        0.0,
        None,
        None,
    ]


def test_throughput_prefers_bytes_then_flop_then_items_then_calls() -> None:
    m = pd.DataFrame(
        {
            "status": ["ok", "ok", "skipped", "weird"],
            "median_s": [0.5, 0.5, 0.5, 0.5],
            "bytes_per_s": [10.0, None, None, None],
            "flop_per_s": [20.0, 30.0, None, None],
            "items_per_s": [40.0, 50.0, 60.0, None],
            "ci_low_s": 0.4,
            "ci_high_s": 0.6,
            "q1_s": 0.45,
            "q3_s": 0.55,
            "size": 1,
        }
    )
    out = add_throughput(m)
    assert list(out["unit"]) == ["B/s", "FLOP/s", "items/s", "calls/s"]
    assert list(out["thr"]) == [10.0, 30.0, 60.0, 2.0]
    assert list(out["sc"]) == [0, 0, 1, 2]  # an unknown status counts as an error


def test_repo_url_must_be_http_and_commit_links_need_hex_shas(tmp_path: Path) -> None:
    assert safe_repo_url("javascript:alert(1)") is None
    assert safe_repo_url("https://git.example/x/") == "https://git.example/x"
    data = hand_data([1e-3])
    runs = data.runs.assign(git_sha=['not-a-sha"><b>'])
    build_site(
        DashboardData(
            runs=runs,
            environments=data.environments,
            measurements=data.measurements,
            repo_url="javascript:x",
        ),
        tmp_path,
        now=NOW,
    )
    index = read_data(tmp_path / "data" / "index.js")
    assert index["repo_url"] is None
    assert index["runs"][0]["sha"] == 'not-a-sha"><b>' and index["runs"][0]["link_sha"] is None


def test_each_page_gets_only_its_slice_of_the_data(tmp_path: Path) -> None:
    data = synthetic_data(n_workloads=2, n_variants=2, n_sizes=3, n_runs=4, n_envs=2)
    build_site(data, tmp_path, now=NOW)
    index = read_data(tmp_path / "data" / "index.js")
    assert len(index["runs"]) == 8 and len(index["benchmarks"]) == 12
    assert [r["t"] for r in index["runs"]] == sorted(r["t"] for r in index["runs"])
    for run in index["runs"]:
        doc = read_data(tmp_path / "data" / "runs" / f"r{run['i']}.js")
        assert len(doc["b"]) == 12  # that run's points, not the history
    latest = {e: max(r["i"] for r in index["runs"] if r["env"] == e) for e in (0, 1)}
    for w in (0, 1):
        wl = read_data(tmp_path / "data" / "workload" / f"w{w}.js")
        assert {s["r"] for s in wl["series"]} == set(latest.values())
        hist = read_data(tmp_path / "data" / "history" / f"w{w}.js")
        assert {index["benchmarks"][line["b"]]["w"] for line in hist["lines"]} == {w}
        assert all(len(line["r"]) == 4 for line in hist["lines"])
    assert (tmp_path / "assets" / "uPlot.LICENSE").is_file()
    assert "cdn" not in (tmp_path / "index.html").read_text().lower()


def test_overview_value_is_log_ratio_to_the_points_usual_throughput(tmp_path: Path) -> None:
    build_site(hand_data([1e-3, 1e-3, 2e-3]), tmp_path, now=NOW)
    (line,) = read_data(tmp_path / "data" / "overview.js")["lines"]
    assert line["r"] == [0, 1, 2]
    assert line["v"] == compact([0.0, 0.0, np.log(0.5)], 4)


def test_failed_points_keep_their_reason_everywhere(tmp_path: Path) -> None:
    build_site(hand_data([1e-3, None, 1e-3], reason="CUDA out of memory"), tmp_path, now=NOW)
    index = read_data(tmp_path / "data" / "index.js")
    assert [r["error"] for r in index["runs"]] == [0, 1, 0]
    assert read_data(tmp_path / "data" / "runs" / "r1.js")["reason"] == {"0": "CUDA out of memory"}
    (line,) = read_data(tmp_path / "data" / "history" / "w0.js")["lines"]
    assert line["s"] == [0, 2, 0] and line["m"][1] is None
    assert line["reason"] == {"1": "CUDA out of memory"}


def test_changepoints_are_mapped_past_failed_runs(tmp_path: Path) -> None:
    seen: list[list[float]] = []

    def changepoints(values: list[float]) -> list[int]:
        seen.append(list(values))
        return [1]

    build_site(hand_data([1e-3, None, 2e-3, 2e-3]), tmp_path, changepoints=changepoints, now=NOW)
    assert seen == [[1e-3, 2e-3, 2e-3]]  # the failed run is not a value
    (line,) = read_data(tmp_path / "data" / "history" / "w0.js")["lines"]
    assert line["cp"] == [2]  # second ok value is the third run


def test_fits_give_model_lines_and_the_crossover_size(tmp_path: Path) -> None:
    data = synthetic_data(n_workloads=1, n_variants=2, n_sizes=7, n_runs=1, n_envs=1)
    fits = iter([(1e-6, 1e9), (1e-5, 1e10)])  # v0: cheap call, slow; v1: costly call, fast
    build_site(data, tmp_path, fit=lambda sizes, times: next(fits), now=NOW)
    wl = read_data(tmp_path / "data" / "workload" / "w0.js")
    v0, v1 = wl["series"]
    assert (v0["variant"], v1["variant"]) == ("v0", "v1")
    assert v0["fit"]["t0_s"] == 1e-6 and len(v0["fit"]["y"]) == 7
    # 1e-6 + n/1e9 = 1e-5 + n/1e10  <=>  n = 9e-6 / 9e-10 = 10000; v1 wins above it.
    assert wl["crossovers"] == [{"a": 0, "b": 1, "size": 10000.0, "faster_above": 1}]
    assert {c["label"] for c in wl["ceilings"]} == {"peak bandwidth", "L2", "L3"}


def test_without_callables_the_overlays_are_left_out(tmp_path: Path) -> None:
    build_site(synthetic_data(n_runs=3), tmp_path, now=NOW)
    wl = read_data(tmp_path / "data" / "workload" / "w0.js")
    assert all(s["fit"] is None for s in wl["series"]) and wl["crossovers"] == []
    hist = read_data(tmp_path / "data" / "history" / "w0.js")
    assert all(line["cp"] == [] for line in hist["lines"])


def test_empty_store_builds_a_site_that_says_how_to_add_a_run(tmp_path: Path) -> None:
    index_html = build_site(DashboardData(), tmp_path, now=NOW)
    assert index_html == tmp_path / "index.html" and index_html.is_file()
    index = read_data(tmp_path / "data" / "index.js")
    assert index["runs"] == [] and index["workloads"] == []
    assert "benchbench run quick" in (tmp_path / "assets" / "dashboard.js").read_text()


def test_missing_columns_are_named(tmp_path: Path) -> None:
    data = hand_data([1e-3])
    with pytest.raises(StoreError, match=r"measurements lacks columns \['size'\]"):
        build_site(
            DashboardData(runs=data.runs, measurements=data.measurements.drop(columns=["size"])),
            tmp_path,
        )


def test_rebuild_is_throttled_by_the_clock() -> None:
    now = [100.0]
    calls: list[float] = []
    r = Rebuilder(lambda: calls.append(now[0]), min_interval_s=5.0, clock=lambda: now[0])
    assert r.maybe_rebuild() and not r.maybe_rebuild()
    now[0] = 104.9
    assert not r.maybe_rebuild() and r.maybe_rebuild(force=True)
    now[0] = 110.0
    assert r.maybe_rebuild()
    assert calls == [100.0, 104.9, 110.0]


def test_server_rebuilds_on_request_and_refuses_a_port_in_use(tmp_path: Path) -> None:
    builds: list[int] = []

    def rebuild() -> None:
        builds.append(1)
        build_site(hand_data([1e-3]), tmp_path, now=NOW)

    server = make_server(tmp_path, port=0, rebuild=rebuild)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/__rebuild") as resp:
            assert resp.status == 200 and b"data/index.js" in resp.read()
        assert builds  # /__rebuild, then maybe the index it redirected to (throttled)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/index.js") as resp:
            assert resp.headers["Cache-Control"] == "no-store"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nope.html")
        with pytest.raises(UsageError, match=rf"127\.0\.0\.1:{port}.*in use.*--port"):
            make_server(tmp_path, port=port)
    finally:
        server.shutdown()
        server.server_close()


def test_serving_nothing_says_to_build_first(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="benchbench dashboard build"):
        make_server(tmp_path / "absent", port=0)


def test_runs_without_points_and_points_without_size_still_build(tmp_path: Path) -> None:
    data = hand_data([1e-3, 1e-3])
    m = data.measurements.copy()
    m.loc[1, "size"] = None  # second run's point has no numeric size
    build_site(
        DashboardData(runs=data.runs, environments=data.environments, measurements=m),
        tmp_path,
        now=NOW,
    )
    wl = read_data(tmp_path / "data" / "workload" / "w0.js")
    assert wl["series"] == []  # the latest run's only point cannot be placed on a log axis
    assert "log axis" in wl["failures"][0]["reason"]
    build_site(DashboardData(runs=data.runs, environments=data.environments), tmp_path, now=NOW)
    assert read_data(tmp_path / "data" / "runs" / "r1.js")["b"] == []


def test_points_of_runs_the_store_does_not_list_are_left_out(tmp_path: Path) -> None:
    data = hand_data([1e-3])
    ghost = data.measurements.assign(run_id="ghost", benchmark_id="b2", size=2048)
    m = pd.concat([data.measurements, ghost], ignore_index=True)
    build_site(
        DashboardData(runs=data.runs, environments=data.environments, measurements=m),
        tmp_path,
        now=NOW,
    )
    assert sorted(p.name for p in (tmp_path / "data" / "runs").iterdir()) == ["r0.js"]
    assert read_data(tmp_path / "data" / "runs" / "r0.js")["b"] == [0]
    assert [b["id"] for b in read_data(tmp_path / "data" / "index.js")["benchmarks"]] == ["b1"]


def test_workload_lines_tell_timing_methods_and_named_axes_apart(tmp_path: Path) -> None:
    data = synthetic_data(n_workloads=1, n_variants=1, n_sizes=3, n_runs=1, n_envs=1)
    m = data.measurements
    cuda = [
        m.assign(
            benchmark_id=m["benchmark_id"] + f"-{mode}",
            device="cuda:0",
            params=[{**p, "mode": mode} for p in m["params"]],
            timing=how,
        )
        for mode, how in (("fwd", "graph x100"), ("bwd", "events, launch-bound"))
    ]
    data = DashboardData(
        runs=data.runs,
        environments=data.environments,
        measurements=pd.concat([m, *cuda], ignore_index=True),
        profiles=data.profiles,
    )
    build_site(data, tmp_path, now=NOW)
    wl = read_data(tmp_path / "data" / "workload" / "w0.js")
    lines = {(s["device"], s["params"], s["timing"]) for s in wl["series"]}
    assert lines == {
        ("cpu", "", None),
        ("cuda:0", "mode=fwd", "graph x100"),
        ("cuda:0", "mode=bwd", "events, launch-bound"),
    }
    assert len({tuple(s["x"]) for s in wl["series"]}) == 1  # same sizes, three lines
    assert "s.timing" in (tmp_path / "assets" / "workload.js").read_text()


def test_data_without_a_timing_column_builds_with_no_timing(tmp_path: Path) -> None:
    data = hand_data([1e-3])
    data = DashboardData(
        runs=data.runs,
        environments=data.environments,
        measurements=data.measurements.drop(columns=["timing"]),
    )
    build_site(data, tmp_path, now=NOW)
    (line,) = read_data(tmp_path / "data" / "workload" / "w0.js")["series"]
    assert line["timing"] is None


def test_data_without_instruction_columns_builds_with_no_counts(tmp_path: Path) -> None:
    data = hand_data([1e-3, 2e-3])
    old = data.measurements.drop(columns=["instructions_per_call", "instructions_noise"])
    build_site(dataclasses.replace(data, measurements=old), tmp_path, now=NOW)
    doc = read_data(tmp_path / "data" / "runs" / "r1.js")
    assert doc["m"] == [2e-3] and "ins" not in doc and "ins_noise" not in doc
    assert all("ins" not in line for line in read_data(tmp_path / "data/history/w0.js")["lines"])


def test_counted_runs_carry_counts_and_the_noise_the_cli_reads(tmp_path: Path) -> None:
    """From a real store: per run, the counts per call and each point's noise (the
    larger of the spread within a process and between processes, as
    ``estimate_counts`` reads a side); the index carries the instruction min effect."""
    store = open_store(str(tmp_path / "s.db"))
    sqrt, exp = point("torch.sqrt"), point("torch.exp", workload="exp")
    write_history(store, {sqrt: [1e-6], exp: [2e-6]}, label="timed only")
    (counted,) = write_history(
        store,
        {sqrt: [1e-6], exp: [2e-6]},
        counts={sqrt: [1234.5678901]},
        spread=0.003,
        timed=False,
        seed=1,
        start=T0,
    )
    two = Result(  # two instrumented processes 1 % apart: between beats within
        point=exp, status="ok", instructions_per_call=1005.0,
        instruction_counts=(1000.0, 1010.0), extra={"instructions": {"spread": 0.002}},
    )  # fmt: skip
    store.write_result(counted, two)
    build_site(load(store), tmp_path / "site", now=NOW)
    data = tmp_path / "site" / "data"
    index = read_data(data / "index.js")
    assert index["verdict"] == {
        "alpha": ALPHA,
        "min_effect": MIN_EFFECT,
        "instructions_min_effect": INSTRUCTIONS_MIN_EFFECT,
        "mde": factor_table(),
        "mde_beyond_shift": factor_table(share=BEYOND_SHIFT),
    }
    runs = {r["label"]: r["i"] for r in index["runs"]}
    assert "ins" not in read_data(data / "runs" / f"r{runs['timed only']}.js")
    doc = read_data(data / "runs" / f"r{runs['night-0']}.js")
    by_workload = {index["workloads"][index["benchmarks"][b]["w"]]["workload"]: k
                   for k, b in enumerate(doc["b"])}  # fmt: skip
    sqrt_k, exp_k = by_workload["sqrt"], by_workload["exp"]
    # Eight significant digits: the page's ratio is the CLI's to 1e-7.
    assert doc["ins"][sqrt_k] == 1234.5679 and doc["ins"][exp_k] == 1005.0
    assert doc["ins_noise"][sqrt_k] == 0.003
    assert doc["ins_noise"][exp_k] == pytest.approx(10 / 1005, rel=1e-3)
    # Counted, not timed: ok with no median, no throughput, nothing shown as a number.
    assert doc["s"] == [0, 0] and doc["m"] == [None, None] and doc["thr"] == [None, None]
    lines = read_data(data / "history" / f"w{index['benchmarks'][doc['b'][sqrt_k]]['w']}.js")
    (line,) = lines["lines"]  # the timed run (January), then the counted one (March)
    assert line["m"][0] is not None and line["m"][1] is None
    assert line["ins"] == [None, 1234.5679]
    # The workload page's throughput is the latest run that timed, not one that only counted.
    series = read_data(data / "workload" / "w0.js")["series"]
    assert series and {s["r"] for s in series} == {runs["timed only"]}


def _captured(run: str, workload: str, params: dict, median: float | None) -> dict[str, Any]:
    row = dict(hand_data([1e-3]).measurements.iloc[0])
    ok = median is not None
    return {
        **row,
        "run_id": run,
        "benchmark_id": f"{workload}-{sorted(params.items())}",
        "suite": "models",
        "workload": workload,
        "variant": f"aten.{workload}",
        "params": params,
        "status": "ok" if ok else "error",
        "reason": None if ok else "boom",
        "median_s": median,
        "bytes_per_s": None,
        "started_at": T0 + timedelta(days=int(run[-1])),
        "git_sha": f"{int(run[-1]):040x}",
    }


def test_breakdown_page_ranks_the_latest_captured_runs_calls(tmp_path: Path) -> None:
    base = hand_data([1e-3, 1e-3, 1e-3])  # runs run0..run2; run2 holds no captured calls
    mlp = {"capture": "mlp"}
    rows = [
        _captured("run0", "addmm", {**mlp, "count": 1}, 9e-6),  # older run: not shown
        _captured("run1", "mlp", mlp, 1e-5),  # the whole callable
        _captured("run1", "relu", {**mlp, "count": 1}, 1e-6),
        _captured("run1", "addmm", {**mlp, "count": 2}, 3e-6),
        _captured("run1", "gelu", {**mlp, "count": 4}, None),
    ]
    measurements = pd.concat([base.measurements, pd.DataFrame(rows)], ignore_index=True)
    data = DashboardData(runs=base.runs, environments=base.environments, measurements=measurements)
    build_site(data, tmp_path, now=NOW)
    doc = read_data(tmp_path / "data" / "breakdown.js")
    assert doc["run"] == 1
    (b,) = doc["breakdowns"]
    assert (b["suite"], b["capture"], b["device"]) == ("models", "mlp", "cpu")
    calls = [(c["workload"], c["op"], c["count"], c["total_s"], c["share"]) for c in b["calls"]]
    assert calls == [
        ("addmm", "aten.addmm", 2, 6e-6, compact([6 / 7], 4)[0]),
        ("relu", "aten.relu", 1, 1e-6, compact([1 / 7], 4)[0]),
    ]
    assert (b["sum_s"], b["whole_s"], b["coverage"]) == (7e-6, 1e-5, 0.7)
    assert b["not_measured"] == [["gelu", "boom"]]
    assert 'href="breakdown.html"' in (tmp_path / "index.html").read_text()
    assert "coverage" in (tmp_path / "assets" / "breakdown.js").read_text()


def test_breakdown_page_shows_rates_percent_of_ceiling_and_the_compiled_whole(
    tmp_path: Path,
) -> None:
    base = hand_data([1e-3])
    mlp = {"capture": "mlp"}
    addmm = _captured("run0", "addmm", {**mlp, "count": 2}, 3e-6)
    addmm.update(flop_per_s=2e9, percent_of_peak=41.0)
    compiled = _captured("run0", "mlp-compiled", mlp, 4e-6)
    compiled.update(variant="torch.compile", compile_s=0.3)
    rows = [_captured("run0", "mlp", mlp, 1e-5), addmm, compiled]
    measurements = pd.concat([base.measurements, pd.DataFrame(rows)], ignore_index=True)
    data = DashboardData(runs=base.runs, environments=base.environments, measurements=measurements)
    build_site(data, tmp_path, now=NOW)
    (b,) = read_data(tmp_path / "data" / "breakdown.js")["breakdowns"]
    (call,) = b["calls"]
    assert (call["flop_per_s"], call["percent_of_peak"], call["bytes_per_s"]) == (2e9, 41.0, None)
    # the eager whole is the coverage's denominator; the compiled one stands beside it
    assert (b["whole_s"], b["compiled_s"], b["compile_s"]) == (1e-5, 4e-6, 0.3)
    assert b["compile_pays_after"] == compact([0.3 / 6e-6], 4)[0]
    script = (tmp_path / "assets" / "breakdown.js").read_text()
    assert "% of ceiling" in script and "paid back after" in script


def test_breakdown_page_without_captured_runs_says_so(tmp_path: Path) -> None:
    build_site(hand_data([1e-3]), tmp_path, now=NOW)
    assert read_data(tmp_path / "data" / "breakdown.js") == {"run": None, "breakdowns": []}
    assert "benchbench run models" in (tmp_path / "assets" / "breakdown.js").read_text()


def test_run_documents_carry_what_the_compare_page_reads_compares_mde_from(tmp_path: Path):
    """The page's MDE is ``compare``'s: each run's per-process log variance (lv, pk) and
    the factor table, combined as Welch's test combines them (compare.js ``detectable``)."""
    store = open_store(str(tmp_path / "s.db"))
    sqrt = point()
    a, b = write_history(
        store, {sqrt: [1e-3, 1e-3]}, processes=4, process_noise=0.05, start=T0, seed=3
    )
    build_site(load(store), tmp_path / "site", now=NOW)
    data = tmp_path / "site" / "data"
    index = read_data(data / "index.js")
    docs = {r["id"]: read_data(data / "runs" / f"r{r['i']}.js") for r in index["runs"]}
    sides = []
    for run in (a, b):
        (row,) = store.measurements(run)
        expected = side_variance(row["process_medians_s"])
        assert expected is not None
        assert docs[run]["lv"] == [pytest.approx(expected[0], rel=1e-3)]
        assert docs[run]["pk"] == [4]
        sides.append((docs[run]["lv"][0], docs[run]["pk"][0]))
    (va, ka), (vb, kb) = sides
    df = (va + vb) ** 2 / (va**2 / (ka - 1) + vb**2 / (kb - 1))
    table, se = index["verdict"]["mde"], np.sqrt(va + vb)
    floor = np.log1p(table["min_effect"]) / se  # compare.js factorAt: floor within df rows
    by_df = [np.interp(floor, table["floor"], row) for row in table["factor"]]
    page = np.expm1(np.interp(df, table["df"], by_df) * se)
    (cli,) = compare_rows(store.measurements(a), store.measurements(b)).points
    assert cli.mde is not None and page == pytest.approx(cli.mde, rel=0.02)
