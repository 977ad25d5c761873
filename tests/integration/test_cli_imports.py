"""A CLI that answers at once: help imports no torch, matplotlib or scipy, and the
commands that only read a store import no torch (issue 22; the times: BENCHMARKS.md,
"A CLI that answers at once", and benchmarks/cli_bench.py).

Each check runs in a fresh interpreter (a test process has imported everything) and
reads ``sys.modules`` after the command: a heavy import anywhere below a command's
module, at its top or in its helpers, shows there.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchbench.cli import COMMANDS
from benchbench.store import open_store
from tests.integration.cli import ROOT, benchbench, env
from tests.storedata import T0, add_run, point, result

HEAVY = ("torch", "matplotlib", "scipy")

#: Runs each argv through the CLI's main in this order, in one interpreter, and prints
#: the heavy modules loaded after each (a module stays loaded, so the first command
#: that brought one in is the one to blame).
_PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from benchbench.cli import main
    heavy, argvs, loaded = {heavy!r}, {argvs!r}, {{}}
    for argv in argvs:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:  # --help exits 0 through argparse
                code = exc.code
        loaded[" ".join(argv)] = {{"code": code, "heavy": [m for m in heavy if m in sys.modules]}}
    print(json.dumps(loaded))
    """
)


def _probe(argvs: list[list[str]], heavy: tuple[str, ...] = HEAVY) -> dict[str, dict]:
    code = _PROBE.format(heavy=heavy, argvs=argvs)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_help_and_every_subcommands_help_import_no_torch_matplotlib_or_scipy() -> None:
    argvs = [["--help"], *([name, "--help"] for name in COMMANDS)]
    argvs += [["dashboard", "build", "--help"], ["dashboard", "serve", "--help"]]
    loaded = _probe(argvs)
    assert list(loaded) == [" ".join(a) for a in argvs]
    assert {argv: seen for argv, seen in loaded.items() if seen != {"code": 0, "heavy": []}} == {}


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """Two runs of two points each (enough for compare, show's fits need none)."""
    path = tmp_path_factory.mktemp("store") / "small.db"
    store = open_store(str(path), create=True)
    for i, label in enumerate(("base", "head")):
        results = [result(point(size=n), seed=i) for n in (1024, 4096, 16384)]
        add_run(store, results, label=label, started_at=T0 + dt.timedelta(hours=i))
    return path


def test_commands_that_only_read_a_store_import_no_torch(small_store, tmp_path) -> None:
    store = ["--store", str(small_store)]
    argvs = [
        ["runs", *store],
        ["show", "latest", *store],
        ["show", "latest", "--json", *store],
        ["compare", "base", "head", "--no-fail-on-regression", *store],
        ["regressions", *store],
        *(
            ["export", "base", "--format", fmt, "-o", str(tmp_path / f"out.{fmt}"), *store]
            for fmt in ("bundle", "pyperf", "pytest-benchmark", "csv")
        ),
        ["dashboard", "build", "-o", str(tmp_path / "site"), *store],
    ]
    loaded = _probe(argvs, heavy=("torch",))
    assert {argv: seen["code"] for argv, seen in loaded.items()} == {" ".join(a): 0 for a in argvs}
    assert {argv: seen["heavy"] for argv, seen in loaded.items() if seen["heavy"]} == {}


def test_claims_import_no_torch(small_store) -> None:
    # The claims are read from suites/claims/, not from the suite files (which import torch).
    loaded = _probe([["claims", "base", "--store", str(small_store)]], heavy=("torch",))
    assert loaded[f"claims base --store {small_store}"] == {"code": 0, "heavy": []}


def test_run_loads_its_suites_in_a_worker_and_imports_no_torch(tmp_path) -> None:
    # The runner plans by what its first worker lists: the suites (and torch, ~3 s a
    # process) load in the zygote's workers only.
    tiny = str(ROOT / "tests" / "integration" / "suites" / "tiny.py")
    argv = ["run", tiny, "--filter", "sum", "--rounds", "1", "--budget", "0.01"]
    argv += ["--store", str(tmp_path / "s.db")]
    loaded = _probe([argv], heavy=("torch",))
    assert loaded[" ".join(argv)] == {"code": 0, "heavy": []}
    runs = open_store(str(tmp_path / "s.db"), create=False).runs()
    assert [r["suites"][0]["name"] for r in runs] == ["tiny"]


def test_time_imports_no_torch_in_the_runner(tmp_path) -> None:
    # Its statements are compiled and run in the workers.
    argv = ["time", "torch.sqrt(x)", "--setup", "x = torch.rand(64)", "--rounds", "1"]
    argv += ["--budget", "0.01", "--store", str(tmp_path / "t.db")]
    loaded = _probe([argv], heavy=("torch",))
    assert loaded[" ".join(argv)] == {"code": 0, "heavy": []}


def _copy(store: Path, to: Path) -> Path:
    """``store`` copied to ``to`` with its write-ahead log: the fixture's own connection
    keeps its log open."""
    for suffix in ("", "-wal", "-shm"):
        source = store.with_name(store.name + suffix)
        if source.exists():
            to.with_name(to.name + suffix).write_bytes(source.read_bytes())
    return to


def test_a_command_ends_without_teardown_and_leaves_the_store_whole(small_store, tmp_path):
    # `entry` skips the modules' teardown (os._exit) after joining threads and running
    # the atexit handlers: the store's engine is closed there, so SQLite folds its
    # write-ahead log back and leaves no -wal or -shm file, and the exit code stays.
    store = _copy(small_store, tmp_path / "copy.db")
    read = subprocess.run(
        [sys.executable, "-m", "benchbench", "runs", "--store", str(store)],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert "head" in read.stdout and read.stdout.endswith("\n")  # flushed before the exit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db"]
    wrong = subprocess.run(
        [sys.executable, "-m", "benchbench", "show", "nosuchrun", "--store", str(store)],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert wrong.returncode == 1 and "nosuchrun" in wrong.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db"]


def test_the_tests_in_process_command_says_what_a_new_process_says(small_store, tmp_path):
    # tests/integration/cli.benchbench runs commands in the test's process unless asked
    # for a new one: both give the same exit code, stdout and stderr, and both end with
    # the store's log folded back.
    store = _copy(small_store, tmp_path / "copy.db")
    argvs = [
        ("runs", "--store", str(store)),
        ("compare", "base", "head", "--store", str(store)),
        ("show", "nosuchrun", "--store", str(store)),
        ("show", "latest", "--top", "-1", "--store", str(store)),
        ("run", str(tmp_path / "missing.py"), "--store", str(store)),
    ]
    for argv in argvs:
        fresh = benchbench(*argv, cwd=tmp_path, fresh=True)
        here = benchbench(*argv, cwd=tmp_path)
        said = (here.returncode, here.stdout, here.stderr)
        assert said == (fresh.returncode, fresh.stdout, fresh.stderr), argv
        assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db"], argv
    assert {benchbench(*a, cwd=tmp_path).returncode for a in argvs} == {0, 1, 2}
