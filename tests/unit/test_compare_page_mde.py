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
from benchbench.analysis.detectable import factor_table, format_effect, side_variance
from tests.unit.test_detectable import _run

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
def test_the_compare_page_prints_the_mde_compare_prints():
    rng = np.random.default_rng(4)
    spreads = np.array([0.02, 0.05, 0.1, 0.2])
    first, second = (_run(rng, spreads, np.ones(4))[:4] for _ in range(2))
    cli = compare_rows(first, second)
    docs = {}
    for k, rows in enumerate((first, second)):
        sides = [
            side_variance(np.median(np.reshape(r["samples_s"], (3, -1)), axis=1)) for r in rows
        ]
        docs[f"runs/r{k}"] = {
            "b": list(range(4)), "s": [0] * 4, "reason": {}, "warn": {},
            "m": [r["median_s"] for r in rows], "lo": [None] * 4, "hi": [None] * 4,
            "lv": [s[0] for s in sides], "pk": [s[1] for s in sides],
        }  # fmt: skip
    index = {
        "runs": [{"id": x, "i": k, "data": True, "env": 0, "t": k, "label": x} for k, x in
                 enumerate("AB")],
        "envs": [{"machine": "m"}],
        "verdict": {"min_effect": 0.05, "instructions_min_effect": 0.02, "mde": factor_table()},
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
    cells = {row.split("|")[0].strip(): row.split("|")[5] for row in done.stdout.split("ROW ")[1:]}
    for k, point in enumerate(cli.points):
        assert cells[f"p{k}"] == format_effect(point.mde, 0.05), (k, point.mde, cells)
    assert "smallest detectable change" in done.stdout or "could not have seen" in done.stdout
