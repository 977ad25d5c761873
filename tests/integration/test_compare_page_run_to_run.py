"""The compare page judges a run against the run before it as `benchbench compare` does:
each point's run-to-run factor and, once the shared shift is judged, every point beyond it.

A real SQLite store of seven runs on one machine (twelve points, five processes each, a
run-level term per point and a shift per run); the last run is 50 % slower at a third of
the points and 8 % slower everywhere. The site is built from the store and compare.js
runs under node on its own data files; its marks, intervals and MDEs are compared with
`benchbench compare --format json` of the same two runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchbench.core.values import Result
from benchbench.dashboard.from_store import load
from benchbench.dashboard.site import build_site
from benchbench.store import open_store
from tests.storedata import T0, add_run, point
from tests.unit.test_compare_page_mde import COMPARE_JS, STUB

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

POINTS = 12
PROCESSES = 5


def _results(rng: random.Random, shift: float, slower: float = 1.0) -> list[Result]:
    out = []
    for p in range(POINTS):
        level = math.log(1e-4 * (1 + p)) + math.log(shift) + rng.gauss(0.0, 0.015)
        if p % 3 == 0:
            level += math.log(slower)
        samples = []
        for _ in range(PROCESSES):
            median = math.exp(level + rng.gauss(0.0, 0.03))
            samples += [median * 0.99, median, median * 1.01]
        out.append(
            dataclasses.replace(
                Result(point=point(size=1024 * (p + 1)), status="ok", calls_per_sample=1),
                samples_s=tuple(samples),
                process_samples=(3,) * PROCESSES,
            )
        )
    return out


def _page(site: Path, a: str, b: str) -> str:
    data = sorted((site / "data").rglob("*.js"))
    script = (
        "let INDEX, DOCS;\n"
        + STUB
        + "".join(path.read_text() for path in data)
        + "INDEX = window.BB_DATA.index; DOCS = window.BB_DATA;\n"
        + COMPARE_JS.read_text()
        + '\nconst main = el("main", {});'
        + f"\nspec.render(main, {{ a: {json.dumps(a)}, b: {json.dumps(b)} }})"
        + ".then(() => console.log(flat(main)));"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cli(url: str, a: str, b: str) -> dict:
    command = [sys.executable, "-m", "benchbench", "compare", a, b, "--store", url]
    command += ["--format", "json", "--no-fail-on-regression"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_page_applies_compare_s_run_to_run_term_and_shift(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url)
    rng = random.Random(7)
    runs = []
    for r in range(7):
        last = r == 6
        shift = 1.08 if last else math.exp(rng.gauss(0.0, 0.02))
        at = T0 + dt.timedelta(hours=r)
        runs.append(add_run(store, _results(rng, shift, 1.5 if last else 1.0), started_at=at))
    site = tmp_path / "site"
    build_site(load(store), site)
    base, head = runs[-2], runs[-1]
    cli = _cli(url, base, head)
    # The term the page must apply: a factor above one, the points judged after the shift.
    assert cli["after_shift"] and cli["run_to_run"]["factor"] > 1.0, cli["run_to_run"]
    marks = {p["mark"] for p in cli["points"]}
    assert "slower" in marks and "not significant" in marks, marks
    page = _page(site, base, head)
    index = json.loads((site / "data" / "index.js").read_text().split("=", 2)[2].rstrip(";\n"))
    label = {b["id"]: f"p{k}" for k, b in enumerate(index["benchmarks"])}
    cells = {row.split("|")[0].strip(): row.split("|") for row in page.split("ROW ")[1:]}
    for p in cli["points"]:
        row = cells[label[p["benchmark_id"]]]
        assert float(row[3]) == pytest.approx(p["ratio"], abs=6e-4), (p, row)
        low, high = (float(x) for x in row[4].split(" – "))
        assert (low, high) == pytest.approx((p["ratio_ci_low"], p["ratio_ci_high"]), abs=6e-4)
        printed = float(row[5].removesuffix(" %").removeprefix("< ")) / 100
        assert printed == pytest.approx(p["mde"], rel=0.02, abs=0.006), (p, row)
        assert row[6].strip() == p["mark"], (p, row)
    shift = cli["shift"]
    assert f"x{shift['ratio']:.3f} together" in page and "head/base ÷ shift" in page
    own = cli["run_to_run"]["own"]  # each point's own factor, applied by the page too
    assert len(set(own.values())) > 1 and set(own) <= {p["benchmark_id"] for p in cli["points"]}
    assert f"x{cli['run_to_run']['factor']:.2f}, each point x" in page and "by its own" in page
    # Another pair: within its two runs, and the command that adds the term.
    other = _page(site, runs[0], head)
    assert "within these runs only" in other and f"benchbench compare {runs[0]} {head}" in other
