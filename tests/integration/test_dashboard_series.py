"""A dashboard built from the store's series: the same history as from every row, the
detector run once, full rows for the shown runs only, and a compare page that offers
only the runs whose points the site holds."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchbench.analysis import regressions
from benchbench.analysis.regressions import detect
from benchbench.cli.dashboard import build
from benchbench.core.values import Result
from benchbench.dashboard import build_site, from_store, site
from benchbench.dashboard.from_store import changepoints, load
from benchbench.dashboard.shown_runs import ALERT_RUNS, NEWEST_RUNS
from benchbench.dashboard.synthetic import synthetic_data
from benchbench.store import open_store
from benchbench.store import series as store_series
from benchbench.store.history import list_alerts
from benchbench.store.series import series_rows
from tests.integration.test_dashboard_browser import Page
from tests.synthetic import environment, point, write_history

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


def read_data(path: Path) -> Any:
    text = path.read_text()
    return json.loads(text[text.index("]=") + 2 : text.rindex(";")])


def _history(url: str) -> Any:
    """Two machines; a 20 % step, failures, a counted point, a skipped one."""
    store = open_store(url)
    rng = random.Random(3)
    step = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(14)] + [1.2e-3] * 8
    flaky = [2e-3, None, 2e-3, 2e-3, None] * 4
    sqrt, inplace, exp = point("torch.sqrt"), point("x.sqrt_()"), point("torch.exp", workload="exp")
    runs = write_history(store, {sqrt: step, inplace: flaky, exp: [3e-6] * 22},
                         counts={exp: [1000.0 + k for k in range(22)]})  # fmt: skip
    skipped = Result(point=point("torch.sqrt", size=2048), status="skipped", reason="no GPU here")
    store.write_result(runs[-1], skipped)
    write_history(store, {sqrt: [5e-4] * 9}, env=environment("box-b"), seed=1)
    return store


def test_history_from_series_is_the_history_from_every_row(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _history(store_url)
    series = series_rows(store)
    # Reasons looked up by (run, benchmark), or read with every row of their statuses.
    monkeypatch.setattr(store_series, "LOOKUP_UP_TO", 0)
    assert series_rows(store).reasons == series.reasons and len(series.reasons) == 9
    reports, _ = detect(store, table=series.table())
    assert any(r.change_runs for r in reports)  # the step: a change point to place
    new = load(store, series=series, reports=reports)
    build_site(new, tmp_path / "new", now=NOW)
    # The old way: every row of every run as measurements, change points per line.
    monkeypatch.setattr(from_store, "shown_runs", lambda runs, *a, **k: list(runs["run_id"]))
    every = load(store, series=series)
    old = dataclasses.replace(every, series=None, benchmarks=None, change_points=None)
    assert len(old.measurements) == series.run.size > len(new.measurements)
    build_site(old, tmp_path / "old", changepoints=changepoints, now=NOW)
    names = sorted(p.name for p in (tmp_path / "old" / "data" / "history").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "new" / "data" / "history").iterdir())
    for name in names:
        a, b = (read_data(tmp_path / s / "data" / "history" / name) for s in ("old", "new"))
        assert a == b, name
    lines = [line for n in names for line in read_data(tmp_path / "new/data/history" / n)["lines"]]
    assert any(line["cp"] for line in lines) and any(line["reason"] for line in lines)
    assert any("ins" in line for line in lines) and any(2 in line["s"] for line in lines)
    assert any(1 in line["s"] for line in lines)  # the skipped point, with its reason
    a, b = (read_data(tmp_path / s / "data" / "overview.js") for s in ("old", "new"))
    assert a == b and a["lines"]
    a, b = (read_data(tmp_path / s / "data" / "index.js")["runs"] for s in ("old", "new"))
    counts = ("ok", "skipped", "error")
    assert [[r[c] for c in counts] for r in a] == [[r[c] for c in counts] for r in b]


def test_dashboard_build_runs_the_detector_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _history(str(tmp_path / "s.db"))
    calls: dict[str, int] = {"analyze_all": 0, "analyze": 0, "changepoints": 0}

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(regressions, "analyze_all", counted("analyze_all", regressions.analyze_all))
    monkeypatch.setattr(regressions, "analyze", counted("analyze", regressions.analyze))
    monkeypatch.setattr(from_store, "analyze", counted("changepoints", from_store.analyze))
    build(store, tmp_path / "site", None)
    series = series_rows(store).table()
    assert calls == {"analyze_all": 1, "analyze": len(series), "changepoints": 0}
    # ... and its change points are the history pages' marks.
    index = read_data(tmp_path / "site" / "data" / "index.js")
    marked = [
        (index["benchmarks"][line["b"]]["id"], index["envs"][line["e"]]["id"], line["r"][k])
        for w in range(len(index["workloads"]))
        for line in read_data(tmp_path / "site" / "data" / "history" / f"w{w}.js")["lines"]
        for k in line["cp"]
    ]
    reports, _ = detect(store)
    found = [(r.benchmark_id, r.environment_id, run) for r in reports for run in r.change_runs]
    assert found and sorted((b, e, index["runs"][r]["id"]) for b, e, r in marked) == sorted(found)


def test_the_site_holds_the_newest_runs_and_those_pages_and_alerts_need(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    rng = random.Random(5)
    # Twenty nights; the regression at night 10 raises an alert naming nights 9 and 10.
    step = [1e-3 * (1 + rng.gauss(0, 0.005)) for _ in range(10)] + [1.3e-3] * 10
    nightly = write_history(store, {point(): step})
    once = write_history(store, {point(workload="exp"): [1e-3]}, seed=9,
                         start=dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc))  # fmt: skip
    build(store, tmp_path / "site", None)
    index = read_data(tmp_path / "site" / "data" / "index.js")
    held = {r["id"] for r in index["runs"] if r["data"]}
    assert index["newest_runs"] == NEWEST_RUNS and ALERT_RUNS >= 2
    # The newest ten nights, the night before the step, and the only run of "exp".
    assert held == {*nightly[-NEWEST_RUNS:], nightly[9], *once}
    files = {p.name for p in (tmp_path / "site" / "data" / "runs").iterdir()}
    assert files == {f"r{r['i']}.js" for r in index["runs"] if r["data"]}
    # Every run is in the history all the same.
    (line,) = read_data(tmp_path / "site" / "data" / "history" / "w1.js")["lines"]
    assert len(line["r"]) == 20 and line["cp"] == [10]


@pytest.mark.browser
def test_compare_offers_only_the_runs_whose_points_the_site_holds(
    browser: Any, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "s.db"))
    runs = write_history(store, {point(): [1e-3] * 14, point(workload="exp"): [2e-3] * 14})
    build(store, tmp_path / "site", None)
    site = tmp_path / "site"
    tab = Page(browser)
    page = tab.open((site / "compare.html").as_uri())
    offered = page.locator("select[name=a] option").evaluate_all("os => os.map(o => o.value)")
    assert set(offered) == {"", *runs[-NEWEST_RUNS:]}
    held = page.locator("p.held").inner_text()
    assert f"{NEWEST_RUNS} of 14 runs" in held and "benchbench compare RUN_A RUN_B" in held
    assert page.locator("table.compare tbody tr").count() == 2  # the newest two, compared
    # A run older than those: where its points are, no error.
    page = tab.open((site / "compare.html").as_uri() + f"#a={runs[0]}&b={runs[-1]}")
    text = page.locator("main").inner_text()
    assert f"benchbench compare {runs[0]} {runs[-1]}" in text
    assert page.locator("table.compare").count() == 0
    # Every run is on the history page, which loads no run's points.
    page = tab.open((site / "history.html").as_uri())
    assert page.evaluate("BB.DATA()['history/w0'].lines[0].r.length") == 14
    page = tab.open((site / "index.html").as_uri())
    assert page.locator("main a[href^='compare.html']").count() == 1  # the newest run's
    assert tab.errors == [] and tab.dialogs == []
    tab.page.close()


def test_pages_written_by_forked_workers_are_the_pages_written_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = synthetic_data(n_workloads=4, n_variants=2, n_sizes=5, n_runs=6, n_envs=2)
    build_site(data, tmp_path / "here", fit=from_store.fit, changepoints=changepoints, now=NOW)
    monkeypatch.setattr(site, "PARALLEL_FROM_ROWS", 0)
    monkeypatch.setattr(site.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    pids = tmp_path / "pids"
    write = site._Pages.write

    def recorded(self: Any, task: Any) -> None:
        with pids.open("a") as out:
            out.write(f"{os.getpid()}\n")
        write(self, task)

    monkeypatch.setattr(site._Pages, "write", recorded)
    build_site(data, tmp_path / "forked", fit=from_store.fit, changepoints=changepoints, now=NOW)
    workers = set(pids.read_text().split())
    assert (
        len(pids.read_text().split()) == 6 and str(os.getpid()) not in workers
    )  # 4 workloads, overview, runs
    here = sorted(p.relative_to(tmp_path / "here") for p in (tmp_path / "here").rglob("*.js"))
    assert len([p for p in here if p.parts[1] == "history"]) == 4
    for path in here:
        assert (tmp_path / "forked" / path).read_text() == (tmp_path / "here" / path).read_text()


@pytest.mark.browser
def test_overview_lists_the_first_open_regressions_of_many(browser: Any, tmp_path: Path) -> None:
    data = synthetic_data(n_workloads=1, n_variants=1, n_sizes=3, n_runs=8, n_envs=1)
    (alert,) = data.alerts.to_dict("records")
    many = [{**alert, "alert_id": f"a{k}", "created_at": NOW - dt.timedelta(minutes=k)}
            for k in range(260)]  # fmt: skip
    build_site(dataclasses.replace(data, alerts=pd.DataFrame(many)), tmp_path, now=NOW)
    tab = Page(browser)
    page = tab.open((tmp_path / "index.html").as_uri())
    assert page.locator("table.alerts tbody tr").count() == 200
    assert "60 more match the filters" in page.locator("p.more-alerts").inner_text()
    assert tab.errors == [] and tab.dialogs == []
    tab.page.close()


def test_a_build_without_detection_keeps_the_alerts_and_marks_their_first_bad_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(str(tmp_path / "s.db"))
    rng = random.Random(6)
    step = [1e-3 * (1 + rng.gauss(0, 0.005)) for _ in range(10)] + [1.3e-3] * 10
    nightly = write_history(store, {point(): step})
    _, new = detect(store)  # what a nightly's `benchbench regressions` has done
    assert new == 1
    stored = list_alerts(store)
    monkeypatch.setattr(regressions, "analyze_all", lambda *a, **k: pytest.fail("detected"))
    build(store, tmp_path / "site", None, detect=False)
    assert list_alerts(store) == stored
    index = read_data(tmp_path / "site" / "data" / "index.js")
    (line,) = read_data(tmp_path / "site" / "data" / "history" / "w0.js")["lines"]
    assert [index["runs"][line["r"][k]]["id"] for k in line["cp"]] == [nightly[10]]
