"""`benchbench export --format github-action-benchmark | bmf` through the real CLI."""

from __future__ import annotations

import json
import shutil

from benchbench.store import open_store
from tests.integration.cli import benchbench
from tests.storedata import STORE_V1, add_run, point, result


def test_both_ci_formats_export_every_measured_point_of_a_stored_run(tmp_path):
    db = tmp_path / "v1.db"
    shutil.copy(STORE_V1, db)
    done = benchbench("export", "base", "--format", "github-action-benchmark",
                      "-o", "gab.json", "--store", str(db), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "5 points written to gab.json (github-action-benchmark)" in done.stderr
    entries = json.loads((tmp_path / "gab.json").read_text())
    name = "sqrt:torch.sqrt[float32, cpu](n=4096)"
    assert len(entries) == 5 and name in {e["name"] for e in entries}
    done = benchbench("export", "base", "--format", "bmf", "-o", "-", "--store", str(db),
                      cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    bmf = json.loads(done.stdout)
    gab = {e["name"]: e for e in entries}
    assert set(bmf) == set(gab)
    # The same median, in the same unit, in both files.
    assert bmf[name]["latency"]["value"] == gab[name]["value"] and gab[name]["unit"] == "ns"
    stored = next(
        r
        for r in open_store(str(db)).measurements(open_store(str(db)).resolve_run("base")["id"])
        if r["variant"] == "torch.sqrt" and r["size"] == 4096
    )
    assert bmf[name]["latency"]["lower_value"] == stored["ci_low_s"] * 1e9


def test_a_run_with_nothing_measured_is_an_error_naming_the_format(tmp_path):
    db = tmp_path / "s.db"
    add_run(open_store(str(db)), [result(point(), status="skipped", reason="no device")],
            label="empty")  # fmt: skip
    done = benchbench("export", "empty", "--format", "bmf", "-o", "out.json", "--store", str(db),
                      cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "has no measured point: a bmf file needs one" in done.stderr
    assert not (tmp_path / "out.json").exists()
