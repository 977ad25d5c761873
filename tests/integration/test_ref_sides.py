"""``ab --base-ref/--head-ref`` and ``bisect`` end to end through the real CLI, on a small
git repository made in a temporary folder (a package whose function is the workload).

Real builds (git worktree, virtual environment, pip), real lockstep measurements at a
small budget. No verdict is asserted from real timings except where the injected change
is 5x whole calls; the rest asserts what was built, cached, imported, logged and refused.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.integration.cli import ROOT, benchbench, json_of
from tests.integration.cli import env as cli_env
from tests.synthetic_repo import git, make_repo, write_module, write_suite

pytestmark = pytest.mark.slow


def run_cli(*args: str, cwd: Path, cache: Path, extra_env: dict | None = None, fresh: bool = False):
    environ = {**cli_env(), "BENCHBENCH_SIDES_CACHE": str(cache), **(extra_env or {})}
    # a step is ~20 s on a quiet 2-core VM, ~5 min beside five busy ones
    return benchbench(*args, cwd=cwd, environ=environ, timeout=1500, fresh=fresh)


def _entries(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir() if p.is_dir()} if cache.exists() else set()


@pytest.fixture
def project(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [10, 10, 20])
    suite = write_suite(tmp_path / "tiny_suite.py")
    return repo, shas, suite


AB_FLAGS = ("--rounds", "2", "--budget", "0.02", "--no-fail-on-regression", "--format", "json")


def test_ab_from_refs_builds_each_commit_once_and_the_second_call_builds_nothing(project, tmp_path):
    repo, shas, suite = project
    cache, store = tmp_path / "cache", str(tmp_path / "s.db")
    argv = ("ab", str(suite), "--base-ref", "main~2", "--head-ref", "main", "--repo", str(repo))
    first = run_cli(*argv, *AB_FLAGS, "--store", store, cwd=tmp_path, cache=cache)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(": built (") == 2, first.stderr
    built = _entries(cache)
    assert len(built) == 2
    for line in (ln for ln in first.stderr.splitlines() if ": built (" in ln):
        assert "tinywork from " + str(cache) in line  # each side imports its own checkout
    document = json_of(first)
    assert document["paired"] is True and len(document["points"]) == 1
    assert document["base"]["git_sha"] == shas[0] and document["contender"]["git_sha"] == shas[2]

    second = run_cli(*argv, *AB_FLAGS, "--store", store, cwd=tmp_path, cache=cache)
    assert second.returncode == 0, second.stderr
    assert second.stderr.count(": cached (") == 2 and ": built (" not in second.stderr
    assert _entries(cache) == built


def test_the_working_tree_is_a_side_and_the_current_folder_never_shadows_a_side(project, tmp_path):
    repo, _shas, suite = project
    cache = tmp_path / "cache"
    write_module(repo, 99)  # uncommitted
    # From inside the repository: its tinywork/ folder is in the current folder.
    done = run_cli(
        "ab",
        str(suite),
        "--base-ref",
        "main",
        "--head-ref",
        "WORKTREE",
        *AB_FLAGS,
        "--store",
        str(tmp_path / "s.db"),
        cwd=repo,
        cache=cache,
    )
    assert done.returncode == 0, done.stderr
    lines = {ln.split()[0]: ln for ln in done.stderr.splitlines() if " from " in ln}
    imported = {flag: Path(line.rsplit(" from ", 1)[1].strip()) for flag, line in lines.items()}
    assert "CALLS = 99" in imported["--head-ref"].read_text()
    assert "CALLS = 20" in imported["--base-ref"].read_text()
    assert all(str(path).startswith(str(cache)) for path in imported.values())


def test_a_side_shadowed_by_pythonpath_is_refused_naming_the_module(project, tmp_path):
    repo, _shas, suite = project
    done = run_cli(
        "ab",
        str(suite),
        "--base-ref",
        "main~1",
        "--head-ref",
        "main",
        "--repo",
        str(repo),
        "--store",
        str(tmp_path / "s.db"),
        cwd=tmp_path,
        cache=tmp_path / "cache",
        extra_env={"PYTHONPATH": f"{repo}{os.pathsep}{ROOT}"},
    )
    assert done.returncode == 2, done.stderr
    assert "imports tinywork from " + str(repo) in done.stderr
    assert "unset PYTHONPATH" in done.stderr
    assert not (tmp_path / "s.db").exists()


def test_a_ref_that_names_no_commit_is_a_usage_error_before_any_build(project, tmp_path):
    repo, _shas, suite = project
    cache = tmp_path / "cache"
    done = run_cli(
        "ab",
        str(suite),
        "--base-ref",
        "main",
        "--head-ref",
        "no-such-ref",
        "--repo",
        str(repo),
        cwd=tmp_path,
        cache=cache,
    )
    assert done.returncode == 2
    assert "--head-ref 'no-such-ref': no such commit" in done.stderr
    assert not cache.exists()
    both = run_cli(
        "ab", str(suite), "--base", sys.executable, "--base-ref", "main", cwd=tmp_path, cache=cache
    )
    assert both.returncode == 2 and "--base and --base-ref both given" in both.stderr


BISECT_FLAGS = ("--rounds", "3", "--budget", "0.04", "--min-effect", "0.5", "--json")


@pytest.mark.timeout(1800)  # two steps of 3 lockstep rounds: under a minute on a quiet machine
def test_bisect_finds_the_commit_that_made_5x_the_calls_skips_a_broken_one_and_resumes(
    tmp_path,
):
    repo = tmp_path / "repo"
    # c0 good; c1 cannot be built; c2 a comment; c3 five times the calls.
    shas = make_repo(repo, [10, 10, 10, 50], broken=[1])
    suite = write_suite(tmp_path / "tiny_suite.py")
    cache, store = tmp_path / "cache", str(tmp_path / "s.db")
    log = tmp_path / "bisect.jsonl"
    argv = (
        "bisect",
        str(suite),
        "--good",
        shas[0],
        "--bad",
        "main",
        "--repo",
        str(repo),
        "--log",
        str(log),
        "--store",
        store,
        *BISECT_FLAGS,
    )
    done = run_cli(*argv, cwd=tmp_path, cache=cache)
    assert done.returncode == 3, done.stderr
    found = json_of(done)
    # The bad end (c3) slower: five times the calls, which no machine's noise hides; c1
    # skipped (it cannot be built). Whether c2 (a comment) is judged the same at once, or
    # unknown and looked at again, is the machine's noise to decide (`same` needs its
    # interval below 1 + --min-effect: 1.11-1.24 on a quiet 2-core VM): the test takes
    # either, and c3 named alone or among the candidates that c2's unknowns leave.
    looks = [(look["commit"], look["outcome"]) for look in found["looks"]]
    assert looks[:2] == [(shas[3], "different"), (shas[1], "skip")]
    assert {outcome for commit, outcome in looks[2:]} <= {"same", "unknown"}
    assert {commit for commit, _ in looks[2:]} == {shas[2]}
    assert found["skipped"][:1] == [shas[1]] and "could not be built" in done.stderr
    if found["status"] == "culprit":
        assert found["culprit"]["sha"] == shas[3] and found["last_same"] == shas[2]
        (point,) = found["evidence"]["points"]
        assert point["mark"] == "slower" and point["ratio"] > 1.5
    else:
        assert shas[3] in [c["sha"] for c in found["candidates"]]
    looks = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    assert [look["commit"] for look in looks] == [look["commit"] for look in found["looks"]]

    again = run_cli(*argv, "--resume", cwd=tmp_path, cache=cache)
    assert again.returncode == 3, again.stderr
    assert f"{len(looks)} look(s) resumed" in again.stderr
    assert "step:" not in again.stderr  # nothing measured again
    assert ": built (" not in again.stderr  # nor built
    assert json_of(again)["status"] == found["status"]
    refused = run_cli(*argv, cwd=tmp_path, cache=cache)
    assert refused.returncode == 2 and "--resume" in refused.stderr


def test_bisect_refuses_bad_refs_before_any_build(project, tmp_path):
    repo, _shas, suite = project
    cache = tmp_path / "cache"
    common = ("--repo", str(repo), "--store", str(tmp_path / "s.db"))
    missing = run_cli(
        "bisect", str(suite), "--good", "nope", "--bad", "main", *common, cwd=tmp_path, cache=cache
    )
    assert missing.returncode == 2 and "--good 'nope': no such commit" in missing.stderr
    reversed_ = run_cli(
        "bisect",
        str(suite),
        "--good",
        "main",
        "--bad",
        "main~2",
        *common,
        cwd=tmp_path,
        cache=cache,
    )
    assert reversed_.returncode == 2 and "is not an ancestor of --bad main~2" in reversed_.stderr
    assert not cache.exists()


def test_bisect_names_the_points_the_two_ends_load_differently(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [10, 10])
    suite = tmp_path / "sized_suite.py"
    suite.write_text(
        write_suite(tmp_path / "plain.py", sizes=(1,))
        .read_text()
        .replace("sizes=[1]", "sizes=[getattr(__import__('tinywork'), 'SIZE', 4096)]")
    )
    (repo / "tinywork" / "__init__.py").write_text(
        (repo / "tinywork" / "__init__.py").read_text() + "\nSIZE = 2048\n"
    )
    git(repo, "commit", "-qam", "another size")
    done = run_cli(
        "bisect",
        str(suite),
        "--good",
        shas[0],
        "--bad",
        "main",
        "--repo",
        str(repo),
        "--store",
        str(tmp_path / "s.db"),
        "--log",
        str(tmp_path / "b.jsonl"),
        cwd=tmp_path,
        cache=tmp_path / "cache",
    )
    assert done.returncode == 2, done.stderr
    assert "the two ends load the suites to different points" in done.stderr
    assert "(n=4096)" in done.stderr and "(n=2048)" in done.stderr
