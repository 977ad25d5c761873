"""Run the real CLI the way a user does: its argument parsing, its exit code, its output.

:func:`benchbench` runs a command in this process by default, as a fresh process would
see it (the environment of :func:`env`, the folder, its own file descriptors 1 and 2, no
suite loaded before), and ``fresh=True`` in a new interpreter. A command costs ~1-2 s of
CPU in a new interpreter, ~95 % of it imports; the integration tests run ~250 of them,
so the tests that check what only a process shows (its imports, its exit, its signals)
ask for one and the others share their worker's imports.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SUITES = Path(__file__).resolve().parent / "suites"


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    out.pop("BENCHBENCH_STORE", None)
    # One process per point unless a test asks for rounds: the tests check behaviour, and
    # three fresh processes a point would triple their time.
    out["BENCHBENCH_ROUNDS"] = "1"
    out["COLUMNS"] = "200"
    # Python caches bytecode by default; a machine that turns it off makes every CLI
    # process and zygote compile benchbench's modules again (~0.2 s each, hundreds of
    # processes a suite), which a user's machine does not.
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def benchbench(
    *args: str,
    cwd: Path,
    timeout: float = 300,
    fresh: bool = False,
    environ: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``benchbench ARGS`` run in ``cwd`` with ``environ`` (default :func:`env`): in this
    process, or a new one with ``fresh`` (or ``$BENCHBENCH_TESTS_FRESH=1``, which tells
    whether a failure is the in-process run's)."""
    command = [sys.executable, "-m", "benchbench", *args]
    environ = env() if environ is None else environ
    if fresh or os.environ.get("BENCHBENCH_TESTS_FRESH") == "1":
        return subprocess.run(
            command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout
        )
    with _as_a_new_process(cwd, environ) as (out, err):
        code = _main(list(args))
    return subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())


def _main(argv: list[str]) -> int:
    """:func:`benchbench.cli.main` ended as :func:`benchbench.cli.entry` ends it: threads
    it started joined, the store's engines closed (SQLite folds its log back)."""
    from benchbench.cli import main
    from benchbench.store.migrations import _dispose_engines

    before = set(threading.enumerate())
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: --help, --version
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # an uncaught exception: the traceback, exit 1
        traceback.print_exc()
        code = 1
    for thread in set(threading.enumerate()) - before:
        if not thread.daemon:
            thread.join()
    gc.collect()  # a store the command left in a reference cycle gives its connection back
    _dispose_engines()
    return code


def _unbuffered_text(fd: int) -> io.TextIOWrapper:
    """Text written straight to ``fd``, in order with what child processes write there."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", write_through=True)


@contextlib.contextmanager
def _as_a_new_process(
    cwd: Path, environ: dict[str, str]
) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """The state a new ``benchbench`` process starts from, for the block: ``environ``,
    ``cwd``, no suite executed yet, and file descriptors 1 and 2 of its own (the zygotes
    and workers a run starts inherit them, as they inherit a command's). pytest-timeout
    bounds a command that hangs, as ``timeout`` bounds a new process."""
    from benchbench.machine import doctor_sources
    from benchbench.suite import load

    saved_environ, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        saved_fds = os.dup(1), os.dup(2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
        sys.stdout, sys.stderr = _unbuffered_text(1), _unbuffered_text(2)
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        load.forget_executed()
        doctor_sources._window.clear()
        try:
            yield out, err
        finally:
            sys.stdout.close()
            sys.stderr.close()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_environ)
            load.forget_executed()
            for file, text in ((out_file, out), (err_file, err)):
                file.seek(0)
                text.write(file.read().decode("utf-8", "replace"))


def json_of(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.stdout.strip(), f"no stdout; stderr was:\n{done.stderr}"
    return json.loads(done.stdout)


def walk_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` of ``parser`` and every subcommand's below it: ``()`` for the top,
    ``("run",)``, ``("dashboard", "build")``."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk_parsers(sub, (*path, name))
