"""The dashboard's compare page prints `compare`'s MDE: compare.js run under node with
a stub of the site's helpers (the browser tests need chromium; this needs only node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchbench.analysis.compare import compare_rows
from benchbench.analysis.detectable import factor_table, side_variance
from benchbench.core.stats import Stats
from tests.unit.test_detectable import PROCESSES, _run

COMPARE_JS = Path(__file__).parents[2] / "benchbench" / "dashboard" / "assets" / "compare.js"
STUB = """
function el(tag, attrs, ...kids) {
  return { tag, attrs, kids, appendChild(k) { this.kids.push(k); } };
}
function flat(n) {
  if (n === null || n === undefined) return "";
  if (typeof n !== "object") return String(n);
  return Array.isArray(n) ? n.map(flat).join(" ") : (n.kids || []).map(flat).join(" ");
}
let spec;
global.window = { BB: { el, index: () => INDEX, start: (s) => { spec = s; },
  findRun: (id) => INDEX.runs.find((r) => r.id === id), passEnv: () => true,
  passTime: () => true, passBench: () => true, section: (t, ...k) => el("section", {}, t, ...k),
  load: async (p) => DOCS[p], envName: () => "m", date: () => "d", commit: () => "c",
  seconds: (s) => String(s), benchLabel: (k) => "p" + k, setState: () => {},
  count: (x) => String(x), si: (x) => String(x),
  table: (h, rows) => el("table", {}, ...rows.map((r) => "ROW " + r.cells.join("|") + "\\n")) } };
global.performance = { now: () => 0 };
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_compare_page_prints_the_mde_and_the_marks_compare_prints():
    rng = np.random.default_rng(4)
    spreads = np.array([0.02, 0.05, 0.1, 0.2, 0.01, 0.01])
    first = _run(rng, spreads, np.ones(6))
    second = _run(rng, spreads, np.array([1, 1, 1, 1, 1.3, 1.0]))
    for row in (*first, *second):  # the headline as stored: the process medians' centre
        row["median_s"] = Stats.from_samples(row["samples_s"], 1, row["process_samples"]).median_s
    cli = compare_rows(first, second)
    assert {p.mark for p in cli.points} >= {"slower", "not significant"}
    docs = {}
    for k, rows in enumerate((first, second)):
        sides = [
            side_variance(np.median(np.reshape(r["samples_s"], (PROCESSES, -1)), axis=1))
            for r in rows
        ]
        docs[f"runs/r{k}"] = {
            "b": list(range(6)), "s": [0] * 6, "reason": {}, "warn": {},
            "m": [r["median_s"] for r in rows], "lo": [None] * 6, "hi": [None] * 6,
            "lv": [s[0] for s in sides], "pk": [s[1] for s in sides],
        }  # fmt: skip
    index = {
        "runs": [{"id": x, "i": k, "data": True, "env": 0, "t": k, "label": x} for k, x in
                 enumerate("AB")],
        "envs": [{"machine": "m"}],
        "verdict": {"alpha": 0.05, "min_effect": 0.05, "instructions_min_effect": 0.02,
                    "mde": factor_table()},
    }  # fmt: skip
    script = (
        f"const INDEX = {json.dumps(index)}; const DOCS = {json.dumps(docs)};\n"
        + STUB
        + COMPARE_JS.read_text()
        + '\nconst main = el("main", {});'
        + '\nspec.render(main, { a: "A", b: "B" }).then(() => console.log(flat(main)));'
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    cells = {row.split("|")[0].strip(): row.split("|") for row in done.stdout.split("ROW ")[1:]}
    for k, point in enumerate(cli.points):
        row = cells[f"p{k}"]
        # The page interpolates compare's factor on a grid: within 2 % of it.
        printed = float(row[5].removesuffix(" %")) / 100
        assert printed == pytest.approx(point.mde, rel=0.02, abs=0.006), (k, point.mde, row)
        assert row[6].strip() == point.mark, (k, point, row)
        assert row[4] == f"{point.ratio_ci_low:.3f} – {point.ratio_ci_high:.3f}", (k, row)
    assert "smallest detectable change" in done.stdout or "could not have seen" in done.stdout
