"""Every shell and Python block of the README and the docs runs, page by page.

A page's blocks run in order in one fresh directory (so a block may use the store or a
file an earlier block of the page made), with ``docs/`` linked into it so that paths such
as ``docs/examples/transformer_layer.py`` resolve as they do from a checkout. Shell
blocks run under ``bash -e -o pipefail``; Python blocks run in one namespace per page.
As in the other CLI tests, ``$BENCHBENCH_ROUNDS`` is 1 (one process per point: these tests
check that a recipe works, not what it measures), and the blocks themselves use tiny
sizes and budgets. A block that cannot run here says why on the line above it
(tests/docblocks.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docblocks import PYTHON, ROOT, Block, blocks, doc_pages
from tests.integration.cli import env

PAGES = [
    page
    for page in doc_pages()
    if any(b.runnable and not b.skip and not b.file for b in blocks(page))
]


def _run_shell(block: Block, cwd: Path) -> None:
    environ = env()
    environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environ["PATH"]
    environ["COLUMNS"] = "120"
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in block.exit_codes, (
        f"{block.where} exited {done.returncode}, expected {block.exit_codes}\n"
        f"--- block\n{block.code}--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
    )


def _run_python(block: Block, namespace: dict[str, object]) -> None:
    code = compile(block.code, block.where, "exec")
    exec(code, namespace)  # the docs' own examples


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_page_s_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    monkeypatch.chdir(tmp_path)
    for name, value in env().items():
        if name.startswith("BENCHBENCH_") or name == "COLUMNS":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("BENCHBENCH_STORE", raising=False)
    namespace: dict[str, object] = {"__name__": "__doc_block__"}
    for block in blocks(page):
        if block.file:
            (tmp_path / block.file).write_text(block.code)
        elif not block.runnable or block.skip:
            continue
        elif block.language in PYTHON:
            _run_python(block, namespace)
        else:
            _run_shell(block, tmp_path)
