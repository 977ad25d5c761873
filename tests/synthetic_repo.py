"""A small git repository of a package whose function is the workload, for ``ab
--base-ref/--head-ref`` and ``bisect``: its commits change nothing but comments and other
files, except the ones given extra whole calls (a known amount of extra work: 11 calls
where there were 10 is +10 %)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

PACKAGE = "tinywork"

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinywork"
version = "0.1.0"

[tool.setuptools]
packages = ["tinywork"]
"""

MODULE = '''"""The workload: CALLS whole calls of torch.exp on the same tensor."""

import torch

CALLS = {calls}
# {comment}


def work(x):
    for _ in range(CALLS - 1):
        torch.exp(x)
    return torch.exp(x)
'''

SUITE = """from benchbench import Suite, Variant
from tinywork import work

suite = Suite("tiny")
suite.workload(
    "exp",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("tinywork.work", work)],
    sizes={sizes},
    budget_s=0.05,
    # No work model: the calls are the subject, and each side's first round then skips
    # the first dispatch mode (torch._dynamo's import, ~2.4 s a zygote).
    derive=False,
)
"""

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@localhost",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@localhost",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **_GIT_ENV},
        check=True,
    )
    return done.stdout.strip()


def write_module(repo: Path, calls: int, comment: str = "") -> None:
    (repo / PACKAGE / "__init__.py").write_text(MODULE.format(calls=calls, comment=comment))


def make_repo(
    repo: Path,
    calls: Sequence[int],
    *,
    broken: Sequence[int] = (),
    notes: Mapping[int, str] | None = None,
) -> list[str]:
    """A repository with one commit per entry of ``calls`` (the workload's whole calls at
    that commit); a commit whose calls do not change touches a comment or a note file, and
    a commit in ``broken`` has a pyproject.toml that cannot be built. The commits' shas,
    oldest first."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / PACKAGE).mkdir(exist_ok=True)
    shas = []
    for index, count in enumerate(calls):
        write_module(repo, count, comment=f"commit {index}" if index % 2 else "")
        if index == 0:
            (repo / ".gitignore").write_text("build/\n*.egg-info/\n__pycache__/\n")
        (repo / "pyproject.toml").write_text(
            PYPROJECT if index not in broken else PYPROJECT.replace("[project]", "[project")
        )
        (repo / "NOTES.md").write_text((notes or {}).get(index, f"note {index}\n"))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {index}: {count} calls")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def write_suite(path: Path, sizes: Sequence[int] = (4096,)) -> Path:
    path.write_text(SUITE.format(sizes=list(sizes)))
    return path
