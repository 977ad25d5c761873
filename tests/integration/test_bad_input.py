"""The bad-input catalogue: every subcommand, one bad thing per command line.

Each row is a command line with one mistake in it and the words its error must hold:
the flag or thing it names, the bad value it echoes and the fix it suggests. Every row
asserts the exit code, a single line on stderr with those words and no traceback, and
that the folder the command ran in is exactly as it was: no store created (not even
``results/``), no store changed (its rows, read through SQLite, not its bytes, since
opening a store switches it to WAL), no output written.

The CLI runs in this process (``benchbench.cli.main``): a subprocess per row would
import torch ~100 times, 1-2 s each on a 2-core machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchbench.cli import EXIT_ERROR, EXIT_USAGE, main
from benchbench.store import open_store
from tests.integration.cli import SUITES
from tests.storedata import STORE_V1

U, E = EXIT_USAGE, EXIT_ERROR


@dataclass(frozen=True)
class Row:
    """``argv`` (split on spaces; ``{tiny}`` and the like name files of the workspace),
    the exit code and the words the one-line error must hold."""

    argv: str
    code: int
    words: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


CATALOGUE: dict[str, Row] = {
    # -- run: every flag, the suites and their points before any store -----------------
    "run/no-suite": Row("run", U, ("SUITE", "--resume RUN_ID")),
    "run/unknown-suite": Row("run nosuchsuite", U, ("unknown suite", "'nosuchsuite'", "built-in")),
    "run/missing-suite-file": Row("run gone/x.py", U, ("gone/x.py",)),
    "run/broken-suite-file": Row("run broken.py", E, ("broken.py", "line 1")),
    "run/device": Row("run {tiny} --device gpu", U, ("--device", "'gpu'", "use cpu, cuda")),
    "run/dtype": Row("run {tiny} --dtype float77", U, ("--dtype", "'float77'", "known: float64")),
    "run/filter-regex": Row("run {tiny} --filter (", U, ("--filter", "'('", "regex")),
    "run/filter-empty": Row("run {tiny} --filter zzz", U, ("no points to run", "benchbench list")),
    "run/shard-range": Row("run {tiny} --shard 3/2", U, ("--shard 3/2", "1 <= I <= N")),
    "run/shard-form": Row("run {tiny} --shard half", U, ("--shard", "'half'", "I/N")),
    "run/shard-group": Row("run {tiny} --shard 2/4", U, ("--shard 2/4", "--group ID")),
    "run/shard-auto": Row("run {tiny} --shard auto", U, ("--shard auto", "give --shard I/N")),
    "run/metric": Row("run {tiny} --metric cycles", U, ("--metric", "'cycles'", "time,instr")),
    "run/counter": Row(
        "run {tiny} --metric instructions --counter cycles", U, ("--counter", "'cycles'", "pmu")
    ),
    "run/counter-alone": Row("run {tiny} --counter pmu", U, ("--counter pmu", "--metric instr")),
    "run/memory-unit": Row("run {tiny} --memory-limit 8GB", U, ("--memory-limit", "'8GB'", "8G")),
    "run/memory-neg": Row("run {tiny} --memory-limit -1", U, ("--memory-limit", "'-1'", "8G")),
    "run/repo": Row("run {tiny} --repo /nonexistent", U, ("--repo", "'/nonexistent'", "git")),
    "run/budget": Row("run {tiny} --budget -1", U, ("--budget", "-1.0", "e.g. --budget")),
    "run/budget-zero": Row("run {tiny} --budget 0", U, ("--budget", "0.0", "e.g. --budget")),
    "run/budget-type": Row("run {tiny} --budget abc", U, ("--budget", "'abc'", "float")),
    "run/target": Row("run {tiny} --target 2", U, ("--target", "2.0", "e.g. --target")),
    "run/timeout": Row("run {tiny} --timeout 0", U, ("--timeout", "0.0", "e.g. --timeout")),
    "run/threads": Row("run {tiny} --threads 0", U, ("--threads", "got 0", "e.g. --threads")),
    "run/rounds": Row("run {tiny} --rounds 0", U, ("--rounds", "got 0", "e.g. --rounds")),
    "run/max-rounds": Row("run {tiny} --max-rounds 0", U, ("--max-rounds", "got 0", "e.g.")),
    "run/rounds-order": Row("run {tiny} --rounds 3 --max-rounds 2", U, ("--max-rounds", "2")),
    "run/per-process": Row("run {tiny} --points-per-process 0", U, ("--points-per-process",)),
    "run/seed": Row("run {tiny} --seed -1", U, ("--seed", "got -1", "e.g. --seed")),
    "run/deadline": Row("run {tiny} --deadline 90", U, ("--deadline", "'90'", "25m, 1h30m")),
    "run/deadline-clock": Row("run {tiny} --deadline 25:00", U, ("--deadline", "'25:00'", "HH:MM")),
    "run/cpus": Row("run {tiny} --cpus 999", U, ("--cpus", "999")),
    "run/cpus-form": Row("run {tiny} --cpus a-b", U, ("--cpus", "a-b")),
    "run/cache": Row("run {tiny} --cache hot", U, ("--cache", "'hot'", "warm")),
    "run/kind": Row("run {tiny} --kind weekly", U, ("--kind", "'weekly'", "nightly")),
    "run/outputs": Row("run {tiny} --outputs maybe", U, ("--outputs", "'maybe'", "keep")),
    "run/allocator": Row("run {tiny} --allocator foo", U, ("--allocator", "'foo'", "jemalloc")),
    "run/rounds-env": Row(
        "run {tiny}", U, ("$BENCHBENCH_ROUNDS", "'many'", "unset it"), {"BENCHBENCH_ROUNDS": "many"}
    ),
    "run/store-engine": Row("run {tiny} --store mysql://u@h/db", U, ("mysql", "postgresql://")),
    "run/force-alone": Row("run {tiny} --force", U, ("--force", "--resume RUN_ID")),
    "run/resume-unknown": Row("run --resume nope --store good.db", E, ("'nope'", "recent runs")),
    "run/resume-no-store": Row("run --resume abc --store missing.db", E, ("missing.db", "no such")),
    "run/resume-suites-gone": Row(
        "run --resume base --store good.db", U, ("cannot resume", "no longer exist", "new run")
    ),
    "run/store-damaged": Row("run {tiny} --store damaged.db", E, ("damaged.db", "damaged")),
    "run/store-newer": Row("run {tiny} --store newer.db", E, ("newer.db", "upgrade benchbench")),
    # -- list ------------------------------------------------------------------------
    "list/no-suite": Row("list", U, ("SUITE", "required")),
    "list/unknown-suite": Row("list nosuch", U, ("unknown suite", "'nosuch'", "built-in")),
    "list/device": Row("list {tiny} --device tpu", U, ("--device", "'tpu'", "use cpu")),
    "list/dtype": Row("list {tiny} --dtype half", U, ("--dtype", "'half'", "known:")),
    "list/shard": Row("list {tiny} --shard 0/2", U, ("--shard 0/2", "1 <= I <= N")),
    "list/filter": Row("list {tiny} --filter [", U, ("--filter", "'['", "regex")),
    # -- runs ------------------------------------------------------------------------
    "runs/no-store": Row("runs --store missing.db", E, ("missing.db", "no such file", "--store")),
    "runs/default-store": Row("runs", E, ("results/benchbench.db", "benchbench run")),
    "runs/folder": Row("runs --store afolder", E, ("afolder", "folder", "--store")),
    "runs/not-a-db": Row("runs --store notes.txt", E, ("notes.txt", "damaged")),
    "runs/engine": Row("runs --store mysql://u@h/db", U, ("'mysql'", "not supported", "give")),
    "runs/limit": Row("runs --limit -1 --store good.db", U, ("--limit", "got -1", "e.g.")),
    "runs/format": Row("runs --format xml --store good.db", U, ("--format", "'xml'", "table")),
    "runs/postgres-down": Row(
        "runs --store postgresql://u@127.0.0.1:1/x", E, ("127.0.0.1:1", "the server runs")
    ),
    "runs/newer": Row("runs --store newer.db", E, ("newer.db", "schema version 99", "upgrade")),
    # -- show ------------------------------------------------------------------------
    "show/unknown-run": Row("show nope --store good.db", E, ("'nope'", "recent runs")),
    "show/damaged": Row("show latest --store damaged.db", E, ("damaged.db", "damaged", ".recover")),
    "show/newer": Row("show latest --store newer.db", E, ("newer.db", "upgrade benchbench")),
    "show/no-store": Row("show latest --store missing.db", E, ("missing.db", "no such file")),
    "show/no-run-arg": Row("show --store good.db", U, ("RUN", "required")),
    # -- compare ---------------------------------------------------------------------
    "compare/unknown-run": Row("compare base nope --store good.db", E, ("'nope'", "recent runs")),
    "compare/min-effect": Row(
        "compare base contender --min-effect 2 --store good.db", U, ("--min-effect", "2.0", "[0")
    ),
    "compare/alpha": Row(
        "compare base contender --alpha 0 --store good.db", U, ("--alpha", "0.0", "(0, 1)")
    ),
    "compare/instr-effect": Row(
        "compare base contender --instructions-min-effect -1 --store good.db",
        U,
        ("--instructions-min-effect", "-1.0"),
    ),
    "compare/environment": Row(
        "compare base contender --environment nowhere --store good.db",
        E,
        ("'nowhere'", "known machines"),
    ),
    "compare/damaged": Row(
        "compare base contender --store damaged.db", E, ("damaged.db", "damaged", "backup")
    ),
    "compare/no-store": Row("compare a b --store missing.db", E, ("missing.db", "no such")),
    # -- plot ------------------------------------------------------------------------
    "plot/extension": Row("plot base -o x.gif --store good.db", U, ("-o", "'x.gif'", ".png")),
    "plot/folder": Row("plot base -o nodir/x.png --store good.db", U, ("-o", "'nodir'", "create")),
    "plot/is-folder": Row("plot base -o afolder --store good.db", U, ("-o", "afolder", ".png")),
    "plot/unknown-run": Row("plot nope -o x.png --store good.db", E, ("'nope'", "recent runs")),
    "plot/no-store": Row("plot base -o x.png --store missing.db", E, ("missing.db", "no such")),
    "plot/by": Row("plot base -o x.png --by colour --store good.db", U, ("--by", "'colour'")),
    # -- export ----------------------------------------------------------------------
    "export/folder": Row(
        "export base --format csv -o nodir/x.csv --store good.db", U, ("-o", "'nodir'", "create")
    ),
    "export/is-folder": Row(
        "export base --format csv -o afolder --store good.db", U, ("-o", "afolder", "file name")
    ),
    "export/format": Row("export base --format yaml -o x --store good.db", U, ("'yaml'", "csv")),
    "export/unknown-run": Row(
        "export nope --format csv -o x.csv --store good.db", E, ("'nope'", "recent runs")
    ),
    "export/damaged": Row(
        "export base --format csv -o x.csv --store damaged.db", E, ("damaged.db", "damaged")
    ),
    "export/pyperf-stdout": Row(
        "export base --format pyperf -o - --store good.db", U, ("pyperf", "-o FILE")
    ),
    # -- import ----------------------------------------------------------------------
    "import/missing": Row("import gone.json", E, ("gone.json", "cannot read")),
    "import/not-json": Row("import notes.txt", E, ("notes.txt",)),
    "import/bad-gzip": Row("import fake.json.gz", E, ("fake.json.gz",)),
    "import/newer-bundle": Row("import future.json", E, ("future.json", "schema_version")),
    "import/not-a-bundle": Row("import list.json", E, ("list.json",)),
    "import/newer-store": Row("import good.json --store newer.db", E, ("newer.db", "upgrade")),
    "import/engine": Row("import good.json --store mysql://u@h/db", U, ("'mysql'", "give")),
    # -- regressions -----------------------------------------------------------------
    "regressions/jobs": Row("regressions --jobs 0 --store good.db", U, ("--jobs", "got 0")),
    "regressions/min-effect": Row(
        "regressions --min-effect 5 --store good.db", U, ("--min-effect", "5.0", "between 0 and 1")
    ),
    "regressions/since": Row(
        "regressions --since yesterday --store good.db", U, ("--since", "'yesterday'", "YYYY-MM")
    ),
    "regressions/metric": Row("regressions --metric cycles --store good.db", U, ("'cycles'",)),
    "regressions/no-store": Row("regressions --store missing.db", E, ("missing.db", "no such")),
    "regressions/damaged": Row("regressions --store damaged.db", E, ("damaged.db", "damaged")),
    # -- dashboard -------------------------------------------------------------------
    "dashboard/not-a-dashboard": Row(
        "dashboard build -o project --store good.db",
        U,
        ("'project'", "not a dashboard", "data", "new or empty folder"),
    ),
    "dashboard/current-folder": Row(
        "dashboard build -o . --store good.db", U, ("'.'", "current folder", "-o dashboards/")
    ),
    "dashboard/a-file": Row("dashboard build -o notes.txt --store good.db", U, ("is a file",)),
    "dashboard/no-store": Row("dashboard build -o site --store missing.db", E, ("missing.db",)),
    "dashboard/damaged": Row("dashboard build -o site --store damaged.db", E, ("damaged.db",)),
    "dashboard/repo-url": Row(
        "dashboard build -o site --repo-url ftp://x --store good.db", U, ("--repo-url", "'ftp")
    ),
    "dashboard/port": Row(
        "dashboard serve -d site --port 70000 --store good.db", U, ("--port", "70000", "8000")
    ),
    "dashboard/serve-folder": Row(
        "dashboard serve -d project --store good.db", U, ("'project'", "not a dashboard")
    ),
    "dashboard/no-action": Row("dashboard", U, ("ACTION", "required")),
    # -- claims, breakdown, annotate, doctor -----------------------------------------
    "claims/unknown-run": Row("claims nope --store good.db", E, ("'nope'", "recent runs")),
    "claims/no-store": Row("claims base --store missing.db", E, ("missing.db", "no such")),
    "breakdown/unknown-run": Row("breakdown nope --store good.db", E, ("'nope'", "recent runs")),
    "breakdown/plot": Row(
        "breakdown base --plot x.gif --store good.db", U, ("--plot", "'x.gif'", ".png")
    ),
    "annotate/unknown-alert": Row(
        "annotate 999 --ignore --store good.db", E, ("alert 999", "benchbench regressions")
    ),
    "annotate/no-kind": Row("annotate 1 --store good.db", U, ("--acknowledge", "required")),
    "annotate/alert-type": Row("annotate one --ignore --store good.db", U, ("ALERT", "'one'")),
    "doctor/no-store": Row("doctor --store missing.db", E, ("missing.db", "no such file")),
    # -- measuring commands that may create a store ----------------------------------
    "probe/threads": Row("probe --threads 0", U, ("--threads", "got 0", "e.g.")),
    "probe/device": Row("probe --device gpu", U, ("--device", "'gpu'", "use cpu")),
    "probe/run-to-run": Row("probe --run-to-run 2", U, ("--run-to-run 2", "at least 3", "e.g.")),
    "probe/run-to-run-device": Row(
        "probe --run-to-run --device cuda", U, ("--device 'cuda'", "leave --device out")
    ),
    "accuracy/extension": Row("accuracy sqrt -o x.gif", U, ("-o", "'x.gif'", ".png")),
    "accuracy/range": Row("accuracy sqrt -o x.png --low 5 --high 1", U, ("--low 5", "low < high")),
    "accuracy/points": Row("accuracy sqrt -o x.png --points 1", U, ("--points", "got 1")),
    "accuracy/dtype": Row("accuracy sqrt -o x.png --dtype ,", U, ("--dtype", "float16")),
    "capture/suffix": Row("capture m:f -o x.txt", U, ("-o", "'x.txt'", ".py")),
    "capture/module": Row("capture nosuchmod:fn -o x.py", U, ("'nosuchmod'", "PYTHONPATH")),
    "time/plot-extension": Row("time x+1 --plot x.gif --no-store", U, ("--plot", "'x.gif'")),
    "time/plot-folder": Row("time x+1 --plot nodir/x.png --no-store", U, ("--plot", "'nodir'")),
    "time/size-huge": Row("time x+1 --size 10**100 --no-store", U, ("'10**100'", "2**62")),
    "time/size-form": Row("time x+1 --size ten --no-store", U, ("'ten'", "accepted forms")),
    "time/size-shape": Row(
        "time x+1 --size (2**40,2**40) --no-store", U, ("--size", "2**62", "accepted forms")
    ),
    "time/device": Row("time x+1 --device tpu --no-store", U, ("--device", "'tpu'", "known")),
    "time/dtype": Row("time x+1 --dtype half --no-store", U, ("--dtype", "'half'", "known")),
    "time/reference": Row("time x+1 --reference 3 --no-store", U, ("--base 3", "give 1")),
    "time/budget": Row("time x+1 --budget 0 --no-store", U, ("--budget", "0.0")),
    "time/min-effect": Row("time x+1 --min-effect 1 --no-store", U, ("--min-effect", "1.0")),
    "time/statement": Row("time x+ --no-store", U, ("'x+'",)),
    "time/store-engine": Row("time x+1 --store mysql://u@h/db", U, ("'mysql'", "give")),
    "ab/rounds": Row(
        "ab {tiny} --base python3 --head python3 --rounds 1", U, ("--rounds", "got 1", ">= 2")
    ),
    "ab/interpreter": Row("ab {tiny} --base /no/python --head python3", U, ("/no/python",)),
    "ab/budget": Row("ab {tiny} --base python3 --head python3 --budget 0", U, ("--budget", "0.0")),
    "bisect/not-a-repo": Row(
        "bisect {tiny} --good main --bad HEAD --repo .", U, ("--repo", "not a git repository")
    ),
    "bisect/no-good": Row("bisect {tiny} --bad HEAD", U, ("--good",)),
    "top/unknown-command": Row("frobnicate", U, ("'frobnicate'", "choose from")),
}


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by content; a store by its rows (its bytes change
    when a reader switches it to WAL), with its -wal and -shm files left out."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_dir():
            out[name] = "folder"
        elif name.endswith(("-wal", "-shm")):
            continue
        elif path.suffix == ".db":
            out[name] = _rows(path)
        else:
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _rows(path: Path) -> str:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
        finally:
            conn.close()
    except sqlite3.Error:
        return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder holding one of each thing the rows need."""
    root = tmp_path_factory.mktemp("bad-input")
    good = root / "good.db"
    shutil.copy(STORE_V1, good)
    open_store(str(good)).engine.dispose()  # migrated to this schema once, here
    shutil.copy(SUITES / "tiny.py", root / "tiny.py")
    (root / "broken.py").write_text("this is not python(\n")
    (root / "notes.txt").write_text("not a store, not a bundle\n")
    (root / "fake.json.gz").write_bytes(b"not gzip at all")
    future = {"format": "benchbench-bundle", "schema_version": 99, "run": {}, "results": []}
    (root / "future.json").write_text(json.dumps(future))
    (root / "list.json").write_text("[1, 2, 3]")
    (root / "afolder").mkdir()
    (root / "project" / "data").mkdir(parents=True)
    (root / "project" / "data" / "measurements.csv").write_text("a,b\n1,2\n")
    damaged = root / "damaged.db"
    shutil.copy(good, damaged)
    size = damaged.stat().st_size
    start = size // 2 // 4096 * 4096  # pages past the header: the schema still reads
    with damaged.open("r+b") as f:
        f.seek(start)
        f.write(bytes((i * 7 + 13) % 256 for i in range(size - start)))
    newer = root / "newer.db"
    shutil.copy(good, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with sqlite3.connect(good) as conn:
        run_id = conn.execute("SELECT id FROM run LIMIT 1").fetchone()[0]
    from benchbench.interchange.bundle import export_bundle, write_bundle

    write_bundle(export_bundle(open_store(str(good)), run_id), root / "good.json")
    return root


def _argv(row: Row, root: Path) -> list[str]:
    return [part.format(tiny=root / "tiny.py") for part in row.argv.split()]


def test_the_catalogue_covers_every_subcommand_with_at_least_80_rows() -> None:
    from benchbench.cli import COMMANDS

    assert len(CATALOGUE) >= 80
    covered = {name.split("/")[0] for name in CATALOGUE}
    assert set(COMMANDS) <= covered, set(COMMANDS) - covered


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_bad_input(
    name: str, workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    row = CATALOGUE[name]
    monkeypatch.chdir(workspace)
    for variable in ("BENCHBENCH_STORE", "SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("BENCHBENCH_GROUP", "GITHUB_RUN_ID", "SLURM_ARRAY_JOB_ID"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("BENCHBENCH_ROUNDS", "1")
    for variable, value in row.env.items():
        monkeypatch.setenv(variable, value)
    before = _snapshot(workspace)
    with _no_exit():
        code = main(_argv(row, workspace))
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == row.code, f"exit {code}, stderr:\n{captured.err}"
    assert "Traceback" not in captured.err
    assert len(err.splitlines()) == 1, f"not one line:\n{captured.err}"
    assert err.startswith("benchbench: error: "), err
    missing = [w for w in row.words if w not in err]
    assert not missing, f"{missing} not in: {err}"
    assert captured.out == ""
    assert _snapshot(workspace) == before, "the command changed the folder"
    assert not (workspace / "results").exists()


class _no_exit:
    """argparse's --help and --version exit; no row may, so an exit fails the row."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, _tb: object) -> bool:
        if isinstance(value, SystemExit):
            raise AssertionError(f"the command exited with SystemExit({value.code})")
        return False
