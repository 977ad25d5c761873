"""`--shard I/N --group ID`: shards cover the points once, and show/runs see one run;
`--shard auto` reads the shard from the scheduler."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from benchbench.cli import main
from benchbench.core.values import Result
from benchbench.run import runner, sharding
from benchbench.store import open_store
from benchbench.suite.load import resolve_suite
from tests.integration.cli import SUITES, benchbench, json_of

GRID = SUITES / "grid.py"
SIX = r"n=(64|128|192)\)"  # 6 of grid's 40 points


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    """The real CLI in this process (its JSON on stdout): list, show and runs need no
    worker, so a subprocess would only add a Python start (seconds on a busy 2-core box)."""
    code = main([*args, "--json"] if args[0] != "runs" else list(args))
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out) if args[0] != "runs" else {"stdout": out}


def test_two_shards_cover_every_point_once_and_show_as_one_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the runs table in one line per run, as in cli.env
    db = tmp_path / "store.db"
    listed = _cli(capsys, "list", str(GRID), "--filter", SIX)
    expected = sorted(p["label"] for p in listed["points"])
    assert len(expected) == 6
    shard_runs = []
    for index in (1, 2):
        done = benchbench(
            "run",
            str(GRID),
            "--filter",
            SIX,
            "--shard",
            f"{index}/2",
            "--group",
            "nightly-42",
            "--store",
            str(db),
            "--json",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        group_note = f"shard {index}/2 of group {sharding.group_id_for('nightly-42')}"
        assert group_note in " ".join(done.stderr.split())  # rich wraps long lines
        shard_runs.append(json_of(done))
    labels = [
        [
            f"{r['workload']}:{r['variant']}[{r['dtype']}, {r['device']}](n={r['size']})"
            for r in doc["results"]
        ]
        for doc in shard_runs
    ]
    assert not set(labels[0]) & set(labels[1])  # disjoint
    assert sorted(labels[0] + labels[1]) == expected  # covering
    assert abs(len(labels[0]) - len(labels[1])) <= 1  # no history yet: balanced by count

    # `list --shard` previews each shard's choice of the group from the same store.
    for index, measured in enumerate(labels, start=1):
        preview = _preview(capsys, index, "nightly-42", "--store", str(db))
        assert sorted(p["label"] for p in preview["points"]) == sorted(measured)
        assert preview["shard"]["balanced_by"] == "count"
    # A new group is priced by the history now stored: the preview is still the run's.
    preview = _preview(capsys, 1, "nightly-43", "--store", str(db))
    assert preview["shard"]["balanced_by"] == "cost"
    assert len(preview["shard"]["cost_runs"]) == 2
    done = benchbench(
        "run",
        str(GRID),
        "--filter",
        SIX,
        "--shard",
        "1/2",
        "--group",
        "nightly-43",
        "--store",
        str(db),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    measured = [
        f"{r['workload']}:{r['variant']}[{r['dtype']}, {r['device']}](n={r['size']})"
        for r in json_of(done)["results"]
    ]
    assert sorted(p["label"] for p in preview["points"]) == sorted(measured)

    group = _cli(capsys, "show", "nightly-42", "--store", str(db))
    assert group["run_id"] == sharding.group_id_for("nightly-42")
    assert len(group["results"]) == 6 and group["status"] == "finished"
    by_prefix = _cli(capsys, "show", group["run_id"][:8], "--store", str(db))
    assert len(by_prefix["results"]) == 6
    table = _cli(capsys, "runs", "--store", str(db))["stdout"]
    assert "(2 shards)" in table and group["run_id"][:8] in table
    assert shard_runs[0]["run_id"][:8] not in table  # one row for the group


def _preview(capsys: pytest.CaptureFixture[str], index: int, group: str, *args: str) -> dict:
    return _cli(capsys, "list", str(GRID), "--filter", SIX, "--shard", f"{index}/2",
                "--group", group, *args)  # fmt: skip


def test_list_shard_without_a_store_balances_by_count_and_says_so(tmp_path):
    both = []
    for index in (1, 2):
        done = benchbench("list", str(GRID), "--shard", f"{index}/2", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        note = " ".join(done.stderr.split())
        assert f"shard {index}/2: 20 of 40 points, balanced by count: no store at" in note
        both.append({line for line in done.stdout.splitlines() if "grid" in line})
    assert len(both[0]) == len(both[1]) == 20 and not both[0] & both[1]
    assert not (tmp_path / "results").exists()  # a preview creates no store
    named = benchbench("list", str(GRID), "--shard", "1/2", "--store", "nope.db", cwd=tmp_path)
    assert named.returncode == 1 and "nope.db" in named.stderr  # a named store must exist


def test_shard_without_a_group_is_a_usage_error(tmp_path, monkeypatch, capsys):
    for name in sharding.SCHEDULER_GROUP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    code = main(["run", str(GRID), "--shard", "1/2", "--store", str(tmp_path / "s.db")])
    assert code == 2
    err = capsys.readouterr().err
    assert "--shard 1/2 needs --group ID" in err and "Traceback" not in err
    assert main(["run", str(GRID), "--shard", "3/2", "--group", "g"]) == 2
    assert "--shard 3/2 is out of range" in capsys.readouterr().err


def _store_history(store, run_id: str, durations: dict[str, float]) -> None:
    """A finished earlier run whose points took ``durations`` (by label)."""
    config = runner.RunConfig(suites=(resolve_suite(str(GRID)),))
    store.create_run(
        {
            "id": run_id,
            "group_id": run_id,
            "kind": "nightly",
            "label": None,
            "status": "finished",
            "started_at": dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc),
            "finished_at": None,
            "suites": [],
            "harness_version": "0",
            "git_sha": None,
            "git_branch": None,
            "git_dirty": None,
            "tags": [],
            "config": {},
            "environment_id": None,
        }
    )
    for planned in runner.plan(config):
        point = planned.point
        store.write_result(
            run_id,
            Result(
                point=point,
                status="ok",
                samples_s=(1e-3,) * 10,
                duration_s=durations.get(point.label, 0.1),
                code_version=planned.version,
            ),
        )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_shards_balance_by_stored_durations_and_agree_within_a_group(tmp_path, backend, request):
    url = str(tmp_path / "s.db") if backend == "sqlite" else request.getfixturevalue("pg_database")
    store = open_store(url)
    heavy = "sqrt:sqrt[float32, cpu](n=64)"
    _store_history(store, str(uuid.uuid4()), {heavy: 3.9})  # 39 others at 0.1 s: 3.9 s
    plans = []
    for index in (1, 2):
        config = runner.RunConfig(
            suites=(Path(resolve_suite(str(GRID))),),
            shard=sharding.Shard(index, 2),
            group="g",
        )
        run_id, group_id, points, doc = runner._plan_run(config, store)
        assert group_id == sharding.group_id_for("g") and doc is not None
        assert doc["balanced_by"] == "cost"
        plans.append([p.point.label for p in points])
        # The first shard's run records where its costs came from; the second reuses it.
        store.create_run(
            {
                "id": run_id,
                "group_id": group_id,
                "kind": "ci",
                "label": None,
                "status": "running",
                "started_at": dt.datetime.now(dt.timezone.utc),
                "finished_at": None,
                "suites": [],
                "harness_version": "0",
                "git_sha": None,
                "git_branch": None,
                "git_dirty": None,
                "tags": [],
                "config": {"shard": doc},
                "environment_id": None,
            }
        )
    assert plans[0] == [heavy]  # 3.9 s alone on one shard ...
    assert len(plans[1]) == 39  # ... the 39 cheap points (3.9 s) on the other


def test_shard_auto_lists_the_slurm_tasks_shard_and_says_what_it_read(monkeypatch, capsys):
    for name in ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_TASK_MIN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    code = main(["list", str(GRID), "--shard", "auto", "--shard-by", "count", "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "--shard auto: shard 2/2 from the Slurm array job (SLURM_ARRAY_TASK_ID=1, " in out.err
    assert "shard 2/2: 20 of 40 points" in out.err
    explicit = main(["list", str(GRID), "--shard", "2/2", "--shard-by", "count", "--format",
                     "json"])  # fmt: skip
    assert explicit == 0 and capsys.readouterr().out == out.out  # the same 20 points


def test_shard_auto_without_a_scheduler_is_a_usage_error(tmp_path, monkeypatch, capsys):
    for name in ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"):
        monkeypatch.delenv(name, raising=False)
    code = main(["run", str(GRID), "--shard", "auto", "--store", str(tmp_path / "s.db")])
    assert code == 2
    err = capsys.readouterr().err
    assert "--shard auto found no scheduler's shard" in err and "Traceback" not in err
    assert "SLURM_ARRAY_TASK_ID" in err and "JOB_COMPLETION_INDEX" in err
