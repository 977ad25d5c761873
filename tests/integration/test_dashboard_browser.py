"""The dashboard as a person sees it: headless Chromium on the built files (file://).

Needs /usr/bin/chromium and the playwright package (the ``browser`` fixture of
``conftest.py``). Set BENCHBENCH_SCREENSHOTS=1 to refresh docs/screenshots/*.png.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchbench.analysis.compare import INSTRUCTIONS_MIN_EFFECT, compare_rows
from benchbench.dashboard import DashboardData, build_site
from benchbench.dashboard.from_store import load
from benchbench.dashboard.synthetic import synthetic_data
from benchbench.store import open_store
from tests.synthetic import point, write_history

pytestmark = pytest.mark.browser

EVIL = "<img src=x onerror=alert(1)>"
PAGES = ("index", "workload", "history", "compare", "environment", "breakdown")
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
NOW = datetime(2026, 1, 9, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = synthetic_data(
        n_workloads=3, n_variants=2, n_sizes=7, n_runs=8, n_envs=2, run_label=EVIL
    )
    notes = pd.DataFrame(
        [
            {
                "benchmark_id": None,
                "environment_id": None,
                "at": datetime(2026, 1, 3, 12, tzinfo=timezone.utc),
                "text": "torch upgraded </script>",
            }
        ]
    )
    data = dataclasses.replace(data, annotations=notes)
    out = tmp_path_factory.mktemp("site")

    def fit(sizes: list[float], times: list[float]) -> tuple[float, float]:
        # t = t0 + n / rate by least squares, weighted so small sizes count as much.
        slope, t0 = np.polyfit(sizes, times, 1, w=1 / np.asarray(times))
        return float(t0), float(1 / slope)

    build_site(data, out, fit=fit, changepoints=lambda v: [len(v) // 2], now=NOW)
    return out


class Page:
    """A page with its console errors, page errors and dialogs recorded."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_function("window.BB_READY !== undefined", timeout=15_000)
        return self.page


@pytest.fixture
def tab(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.page.close()


def inked_pixels(page: Any) -> list[int]:
    """Per chart canvas, how many pixels are not transparent (the chart drew something)."""
    return page.evaluate("""() => [...document.querySelectorAll('.chart canvas')].map((c) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; })""")


@pytest.mark.parametrize("name", PAGES)
def test_every_page_loads_cleanly_and_draws(
    site: Path, tab: Page, name: str, tmp_path: Path
) -> None:
    page = tab.open((site / f"{name}.html").as_uri())
    assert tab.errors == [] and tab.dialogs == []
    assert page.locator("p.error").count() == 0
    if name in ("workload", "history"):
        ink = inked_pixels(page)
        assert ink and all(n > 2000 for n in ink), ink
    if name == "index":
        lines = page.locator("svg.spark polyline")
        assert lines.count() == 6  # 3 workloads x 2 environments
        assert all(
            len(p.split()) == 8
            for p in lines.evaluate_all("l => l.map(x => x.getAttribute('points'))")
        )
    if name == "compare":
        assert re.match(r"^\d\.\d{3}$", page.locator(".geomean").inner_text())
    if name == "environment":
        assert page.locator("table.kv tr").count() > 4
    if name == "breakdown":
        assert "No run holds captured calls" in page.locator("main").inner_text()
    shots = SHOTS if os.environ.get("BENCHBENCH_SCREENSHOTS") == "1" else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def test_markup_in_a_run_label_is_shown_as_text(site: Path, tab: Page) -> None:
    page = tab.open((site / "index.html").as_uri())
    assert EVIL in page.locator(".run-label").all_inner_texts()
    assert page.locator("main img").count() == 0
    page = tab.open(
        (site / "compare.html").as_uri()
        + "#a="
        + page.evaluate("BB.index().runs.find(r => r.label.startsWith('<img')).id")
    )
    assert EVIL in page.locator("main").inner_text()
    page.wait_for_timeout(200)  # an onerror handler would have fired by now
    assert tab.dialogs == [] and tab.errors == []


def test_a_filter_changes_the_view_and_the_url_and_the_link_restores_it(
    site: Path, tab: Page
) -> None:
    page = tab.open((site / "index.html").as_uri())
    assert page.locator("table.grid tbody tr").count() == 3
    page.select_option("select[name=workload]", "sqrt")
    page.wait_for_function("document.querySelectorAll('table.grid tbody tr').length === 1")
    assert "workload=sqrt" in page.url
    shared = page.url
    page = tab.open((site / "workload.html").as_uri())
    before = page.locator(".u-legend .u-series").count()
    env = page.evaluate("BB.index().envs[0].id")
    page.select_option("select[name=env]", env)
    page.wait_for_function(f"document.querySelectorAll('.u-legend .u-series').length < {before}")
    assert f"env={env}" in page.url
    page = tab.open(shared)
    assert page.locator("table.grid tbody tr").count() == 1
    assert page.locator("select[name=workload]").input_value() == "sqrt"
    page.fill("input[name=from]", "2026-01-05")
    page.locator("input[name=from]").dispatch_event("change")
    page.wait_for_function("location.hash.includes('from=2026-01-05')")
    points = page.locator("svg.spark polyline").first.get_attribute("points") or ""
    assert len(points.split()) == 4  # runs of Jan 5..8 only


def test_hover_zoom_and_legend_toggle(site: Path, tab: Page) -> None:
    page = tab.open((site / "workload.html").as_uri())
    box = page.locator(".u-over").first.bounding_box()
    # Onto the last point of the first measured line (series 1; its fit is series 2).
    x, y = page.evaluate("""() => { const u = BB.charts[0], i = u.data[0].length - 1;
        return [u.valToPos(u.data[0][i], 'x'), u.valToPos(u.data[1][i], 'y')]; }""")
    page.mouse.move(box["x"] + x, box["y"] + y)
    tip = page.locator("#tooltip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    for word in ("throughput:", "CI:", "run:", "commit:", "date:"):
        assert word in text
    x_before = page.evaluate("BB.charts[0].scales.x.max")
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + 50)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 60, steps=5)
    page.mouse.up()
    assert page.evaluate("BB.charts[0].scales.x.max") < x_before
    entry = page.locator(".u-legend .u-series").nth(1)
    entry.click()
    assert "u-off" in (entry.get_attribute("class") or "")
    assert tab.errors == []


def test_failures_change_points_alerts_and_commit_links(site: Path, tab: Page) -> None:
    page = tab.open((site / "index.html").as_uri())
    assert "out of memory" in page.locator("ul.failures").inner_text()
    assert page.locator("table.alerts tbody tr").count() == 1
    href = page.locator("table.alerts a[href^='history.html']").first.get_attribute("href")
    page = tab.open(site.as_uri() + "/" + href)
    main = page.locator("main").inner_text()
    assert "Change points" in main and "Alerts" in main and "torch upgraded </script>" in main
    links = page.locator("main a[href^='https://example.org/benchbench/commit/']")
    assert links.count() >= 2
    # Both sides of the alert have their points here: a link compares them.
    (compare,) = page.locator("main a[href^='compare.html']").all()
    assert re.search(r"#a=[^&]+&b=", compare.get_attribute("href") or "")
    page.select_option("select[name=x]", "commit")
    page.wait_for_function("location.hash.includes('x=commit')")
    runs = page.evaluate("BB.index().runs.filter(r => r.env === 0).map(r => r.id)")
    page = tab.open((site / "compare.html").as_uri() + f"#a={runs[0]}&b={runs[-1]}")
    failing = page.locator("table.compare tr.failing")
    assert failing.count() == 1 and "out of memory" in failing.inner_text()
    # The CLI's words, with "not significant" kept apart from "same".
    summary = page.locator("p.summary").inner_text()
    assert "slower" in summary and "not significant" in summary and "worse" not in summary
    marks = set(page.locator("table.compare tr td:nth-child(7)").all_inner_texts())
    # A side of one process is judged by the medians' intervals, and says so.
    marks = {mark.removesuffix(" (CI overlap)") for mark in marks}
    assert marks <= {"slower", "faster", "same", "not significant", "failing", "new", "gone"}
    page = tab.open((site / "workload.html").as_uri() + "#workload=sum")
    assert "out of memory" in page.locator("main").inner_text()
    assert "Crossovers" in page.locator("main").inner_text()
    assert tab.errors == []


def test_environment_diff_marks_the_fields_that_differ(site: Path, tab: Page) -> None:
    page = tab.open((site / "environment.html").as_uri())
    ids = page.evaluate("BB.index().envs.map(e => e.id)")
    page = tab.open((site / "environment.html").as_uri() + f"#env={ids[0]}&env2={ids[1]}")
    assert page.locator("tr.differs").count() >= 4  # cpu, threads, hostname, ram, ceilings
    assert "torch" not in page.locator("tr.differs").all_inner_texts()
    if os.environ.get("BENCHBENCH_SCREENSHOTS") == "1":
        page.screenshot(path=str(SHOTS / "environment-diff.png"), full_page=True)


def test_an_empty_store_says_how_to_add_a_run(browser: Any, tmp_path: Path) -> None:
    build_site(DashboardData(), tmp_path, now=NOW)
    tab = Page(browser)
    for name in PAGES:
        tab.page.goto((tmp_path / f"{name}.html").as_uri())
        tab.page.wait_for_selector("section.empty")
        assert "benchbench run quick" in tab.page.locator("main").inner_text()
    assert tab.errors == []
    tab.page.close()


def test_pages_do_not_reach_the_network(site: Path, tab: Page) -> None:
    requests: list[str] = []
    tab.page.on("request", lambda r: requests.append(r.url))
    tab.open((site / "index.html").as_uri() + "#x=" + str(timedelta(days=1)))
    assert requests and all(u.startswith("file://") for u in requests), requests


def test_breakdown_and_timing_labels_as_drawn(browser: Any, tmp_path: Path) -> None:
    data = synthetic_data(n_workloads=1, n_variants=1, n_sizes=3, n_runs=2, n_envs=1)
    m = data.measurements
    last = m[m["run_id"] == m["run_id"].iloc[-1]]
    cuda = last.assign(
        benchmark_id=last["benchmark_id"] + "-bwd",
        device="cuda:0",
        params=[{**p, "mode": "bwd"} for p in last["params"]],
        timing="graph x100",
    )
    one = last.iloc[0]
    capture = [
        {**one, "benchmark_id": f"cap-{w}", "suite": "models", "workload": w,
         "variant": f"aten.{w}", "size": 1, "params": p, "median_s": t, "status": "ok"}
        for w, p, t in (
            ("mlp", {"capture": "mlp"}, 1e-5),
            ("addmm", {"capture": "mlp", "count": 2}, 3e-6),
            ("relu", {"capture": "mlp", "count": 1}, 1e-6),
        )
    ]  # fmt: skip
    data = dataclasses.replace(
        data, measurements=pd.concat([m, cuda, pd.DataFrame(capture)], ignore_index=True)
    )
    build_site(data, tmp_path, now=NOW)
    tab = Page(browser)
    tab.open((tmp_path / "breakdown.html").as_uri())
    main = tab.page.locator("main")
    rows = main.locator("table tbody tr").all_inner_texts()
    assert [r.split("\t")[1] for r in rows] == ["addmm", "relu"]
    assert "85.7 %" in rows[0]
    assert "coverage 0.70" in main.locator("p.coverage").inner_text()
    tab.open((tmp_path / "workload.html").as_uri() + "#suite=" + str(one["suite"]))
    legend = " ".join(tab.page.locator(".u-legend .u-series").all_inner_texts())
    assert "cuda:0, graph x100" in legend and "mode=bwd" in legend
    assert tab.errors == []
    tab.page.close()


def _counted_store(folder: Path, kinds: tuple[str, ...]) -> tuple[Path, dict[str, list[str]]]:
    """A real store with two runs per kind: ``timed`` runs timed and counted, ``counted``
    runs only counted (``--metric instructions``). Between each pair sqrt's count grows
    10 %, exp's 0.02 %, and log's counts moved 6 % within a process (over half the 5 %
    minimum effect). Returns the built site and the run ids per kind."""
    store = open_store(str(folder / "store.db"))
    sqrt, exp = point("torch.sqrt"), point("torch.exp", workload="exp")
    log = point("torch.log", workload="log")
    times = {sqrt: [1e-6, 1e-6], exp: [2e-6, 2e-6], log: [3e-6, 3e-6]}
    counts = {sqrt: [1000.0, 1100.0], exp: [5000.0, 5001.0], log: [2000.0, 2000.0]}
    runs = {
        kind: write_history(
            store, times, counts=counts, timed=kind == "timed", spread={log: 0.06},
            label=f"{kind} {EVIL}", seed=seed,
            start=datetime(2026, 1, 1 + 3 * seed, tzinfo=timezone.utc),
        )
        for seed, kind in enumerate(kinds)
    }  # fmt: skip
    build_site(load(store), folder / "site", now=NOW)
    return folder / "site", runs


@pytest.fixture(scope="module")
def counted_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    return _counted_store(tmp_path_factory.mktemp("counted"), ("timed", "counted"))


def _text_is_clean(page: Any) -> None:
    text = page.locator("main").inner_text()
    assert "NaN" not in text and "undefined" not in text and "null" not in text, text


def test_compare_page_marks_instruction_counts_as_the_cli_does(
    counted_site: tuple[Path, dict[str, list[str]]], tab: Page
) -> None:
    site, runs = counted_site
    a, b = runs["timed"]
    page = tab.open((site / "compare.html").as_uri() + f"#a={a}&b={b}")
    headers = page.locator("table.compare th").all_inner_texts()
    assert headers[5] == "MDE"  # the smallest change each point could have seen
    assert headers[7:11] == [
        "base instr/call",
        "head instr/call",
        "instr head/base",
        "instr verdict",
    ]
    rows = {
        r.split("\t")[0].split(":")[0]: r.split("\t")
        for r in page.locator("table.compare tbody tr").all_inner_texts()
    }
    assert rows["sqrt"][7:11] == ["1,000", "1,100", "1.1000", "slower"]
    assert rows["exp"][9:11] == ["1.0002", "same"]
    assert rows["log"][10] == "not significant"
    # The marks `benchbench compare` gives the same two runs, point by point.
    store = open_store(str(site.parent / "store.db"))
    cli = compare_rows(store.measurements(a), store.measurements(b))
    assert {p.workload: p.instructions_mark for p in cli.points} == {
        w: cells[10] for w, cells in rows.items()
    }
    # A count regression is a regression: its row is marked and listed first.
    first = page.locator("table.compare tbody tr").first
    assert "slower" in (first.get_attribute("class") or "") and "sqrt" in first.inner_text()
    summary = page.locator("p.summary.instructions").inner_text()
    effect = f"(minimum effect {100 * INSTRUCTIONS_MIN_EFFECT:.1f} %)"  # the CLI's default
    assert f"1 slower, 0 faster, 1 same, 1 not significant {effect}" in summary
    _text_is_clean(page)
    assert tab.errors == [] and tab.dialogs == []


def test_runs_that_only_counted_compare_and_list_without_times(
    counted_site: tuple[Path, dict[str, list[str]]], tab: Page
) -> None:
    site, runs = counted_site
    a, b = runs["counted"]
    page = tab.open((site / "compare.html").as_uri() + f"#a={a}&b={b}")
    assert set(page.locator("table.compare td:nth-child(7)").all_inner_texts()) == {"untimed"}
    assert page.locator(".geomean").inner_text() == "–"
    assert (
        page.locator(".geomean-instructions").inner_text() == "1.0323"
    )  # (1.1 x 1.0002 x 1)^(1/3)
    assert "3 untimed (counted only)" in page.locator("p.summary").first.inner_text()
    _text_is_clean(page)
    page = tab.open((site / "compare.html").as_uri() + f"#a={b}")
    assert "instr/call" in page.locator("table.single th").all_inner_texts()
    cells = page.locator("table.single tbody tr").first.inner_text().split("\t")
    assert cells[2:5] == ["–", "–", "5,001"]  # no median, no CI, the count
    _text_is_clean(page)
    assert tab.errors == [] and tab.dialogs == []


@pytest.mark.parametrize("kinds", [("timed", "counted"), ("counted",)])
def test_every_page_of_a_counted_store_loads_cleanly(
    browser: Any, tmp_path: Path, kinds: tuple[str, ...]
) -> None:
    site, _ = _counted_store(tmp_path, kinds)
    tab = Page(browser)
    for name in PAGES:
        page = tab.open((site / f"{name}.html").as_uri())
        assert page.locator("p.error").count() == 0, name
        _text_is_clean(page)
        if name == "history":  # the count history, and the time history where there is one
            titles = page.locator(".u-title").all_inner_texts()
            assert [t.split(" ")[0] for t in titles] == (
                ["Median", "Instructions"] if "timed" in kinds else ["Instructions"]
            )
            assert all(n > 2000 for n in inked_pixels(page))
    page = tab.open((site / "index.html").as_uri())
    assert any(EVIL in t for t in page.locator(".run-label").all_inner_texts())
    assert page.locator("main img").count() == 0
    assert tab.errors == [] and tab.dialogs == []
    tab.page.close()
