"""Run the real CLI in a subprocess, the way a user does."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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


def benchbench(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchbench", *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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
