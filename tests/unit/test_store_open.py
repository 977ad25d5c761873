"""Opening a store: unsupported and undriven URLs, stores that must exist, SQLite advice."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing

import pytest

from benchbench.cli import build_parser, main
from benchbench.core.errors import StoreError, UsageError
from benchbench.store import open_store
from tests.storedata import add_run, point, result


@pytest.mark.parametrize(
    "url", ["mysql://user:hunter2@db/bench", "postgresql+asyncpg://db/bench", "oracle://x@db/b"]
)
def test_an_unsupported_engine_is_a_usage_error_naming_the_supported_ones(url):
    with pytest.raises(UsageError) as info:
        open_store(url)
    message = str(info.value)
    assert url.split("://")[0] in message and "not supported" in message
    assert "sqlite:///" in message and "postgresql://" in message
    assert "hunter2" not in message


def test_postgresql_without_its_driver_names_the_package_to_install(monkeypatch):
    # None in sys.modules makes `import psycopg` raise ModuleNotFoundError, as when the
    # package is not installed; SQLAlchemy imports the driver when the engine is made.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError) as info:
        open_store("postgresql://bench:hunter2@127.0.0.1:1/bench")
    message = str(info.value)
    assert "driver 'psycopg'" in message and "pip install 'psycopg[binary]'" in message
    assert "hunter2" not in message and "***" in message


def test_create_false_refuses_a_missing_file_and_creates_nothing(tmp_path):
    path = tmp_path / "typo" / "results.db"
    with pytest.raises(StoreError) as info:
        open_store(str(path), create=False)
    assert str(info.value).startswith(f"no store at {path}: no such file")
    assert "--store PATH of an existing store" in str(info.value)
    assert "benchbench run" in str(info.value)
    assert not path.parent.exists()


def test_create_false_refuses_a_folder_and_an_empty_file(tmp_path):
    with pytest.raises(StoreError, match="it is a folder"):
        open_store(str(tmp_path), create=False)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreError, match="the file has no benchbench tables"):
        open_store(str(empty), create=False)
    assert empty.stat().st_size == 0


def test_create_false_leaves_another_programs_database_untouched(tmp_path):
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.commit()
    with pytest.raises(StoreError, match="no benchbench tables"):
        open_store(str(other), create=False)
    with closing(sqlite3.connect(other)) as conn:
        # The engine's first connection would have switched it to WAL for good.
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == [("t",)]


def test_create_false_opens_an_existing_store_and_create_true_makes_one(tmp_path):
    path = tmp_path / "new" / "store.db"
    run_id = add_run(open_store(str(path)), [result(point())])
    assert path.is_file()
    store = open_store(str(path), create=False)
    assert [r["id"] for r in store.runs()] == [run_id]
    assert open_store(f"sqlite:///{path}", create=False).runs()[0]["id"] == run_id


def test_an_sqlite_failure_gives_file_advice_not_server_advice(tmp_path):
    # A folder where the file should be: SQLite says "unable to open database file".
    with pytest.raises(StoreError) as info:
        open_store(str(tmp_path))
    message = str(info.value)
    assert "unable to open database file" in message
    assert f"store {tmp_path}: it is a folder, not an SQLite file" in message
    assert "credentials" not in message and "server" not in message
    garbage = tmp_path / "notes.db"
    garbage.write_text("not a database, just text that is long enough to have a header\n" * 4)
    with pytest.raises(StoreError) as info:
        open_store(str(garbage), create=False)
    assert "file is not a database" in str(info.value) and "the file is damaged" in str(info.value)
    assert "credentials" not in str(info.value)


#: Every command that only reads the store, with the arguments it needs to get that far.
READING_COMMANDS = [
    ["runs"],
    ["show", "latest"],
    ["compare", "latest~1", "latest"],
    ["plot", "latest", "-o", "plot.png"],
    ["export", "latest", "-o", "run.json"],
    ["regressions"],
    ["claims"],
    ["dashboard", "build", "-o", "site"],
    ["annotate", "1", "--acknowledge"],
]


@pytest.mark.parametrize("argv", READING_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_reading_commands_name_a_missing_store_and_create_nothing(
    argv, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BENCHBENCH_STORE", raising=False)
    assert main([*argv, "--store", "typo/results.db"]) == 1
    err = capsys.readouterr().err
    assert "no store at typo/results.db: no such file" in err
    assert not (tmp_path / "typo").exists()
    # Without --store the default, results/benchbench.db, must not appear either.
    assert main(argv) == 1
    assert "no store at results/benchbench.db" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_only_the_commands_that_write_results_may_create_a_store():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    creating = set()
    for name, command in commands.items():
        if name == "dashboard":
            for action in command._subparsers._group_actions[0].choices.values():
                assert action.get_default("store_create") is False
            continue
        if command.get_default("store_create"):
            creating.add(name)
    assert creating == {"run", "time", "import", "probe", "ab", "bisect"}
    # Joined on spaces: argparse wraps the help to the terminal's width.
    assert "store, created if missing" in " ".join(commands["run"].format_help().split())
    assert "store to read, which must exist" in " ".join(commands["runs"].format_help().split())
