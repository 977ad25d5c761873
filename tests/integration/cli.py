"""Run the real CLI in a subprocess, the way a user does."""

from __future__ import annotations

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
