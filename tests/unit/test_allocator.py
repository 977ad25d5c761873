"""The workers' allocator: its environment, a missing library, what a worker records."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchbench.core.errors import UsageError
from benchbench.machine.allocator import (
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    describe,
    find_library,
    transparent_hugepages,
    worker_environment,
)
from benchbench.run.runner import RunConfig


def test_system_fixes_both_glibc_thresholds_for_the_workers():
    env = worker_environment("system", base={"PATH": "/bin"})
    assert env == {
        "PATH": "/bin",
        "BENCHBENCH_ALLOCATOR": "system",
        "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
        "MALLOC_TRIM_THRESHOLD_": str(64 * 2**20),
    }


def test_a_preloaded_allocator_goes_before_what_ld_preload_already_holds(tmp_path: Path):
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    env = worker_environment(
        "jemalloc", base={"LD_PRELOAD": "/opt/other.so"}, search_path=[str(tmp_path)]
    )
    assert env["LD_PRELOAD"] == f"{tmp_path}/libjemalloc.so.2:/opt/other.so"
    assert env["BENCHBENCH_ALLOCATOR"] == "jemalloc"
    assert "MALLOC_MMAP_THRESHOLD_" not in env


@pytest.mark.parametrize(
    ("allocator", "filename", "package"),
    [
        ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
        ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ],
)
def test_a_missing_library_names_the_file_the_path_and_the_package(
    tmp_path: Path, allocator: str, filename: str, package: str
):
    with pytest.raises(UsageError) as caught:
        find_library(allocator, search_path=[str(tmp_path)])
    assert str(caught.value) == (
        f"--allocator {allocator}: {filename} not found in {tmp_path}; install it "
        f"(Debian/Ubuntu: apt-get install {package}) or use --allocator system"
    )


def test_an_unknown_allocator_is_a_usage_error_echoing_it():
    with pytest.raises(
        UsageError,
        match=r"--allocator must be one of system, jemalloc, "
        r"tcmalloc, got 'mimalloc'",
    ):
        worker_environment("mimalloc")
    with pytest.raises(UsageError, match="got 'mimalloc'"):
        RunConfig(suites=(), allocator="mimalloc")


@pytest.mark.parametrize(
    ("text", "mode"),
    [("always [madvise] never\n", "madvise"), ("[always] madvise never\n", "always"), ("", None)],
)
def test_the_huge_pages_mode_is_the_bracketed_word(tmp_path: Path, text: str, mode: str | None):
    path = tmp_path / "enabled"
    path.write_text(text)
    assert transparent_hugepages(path) == mode


def test_a_worker_describes_what_it_was_started_with(tmp_path: Path):
    thp = tmp_path / "enabled"
    thp.write_text("always madvise [never]\n")
    started = worker_environment("system", base={})
    assert describe(started, thp) == {
        "allocator": "system",
        "malloc_mmap_threshold_bytes": MMAP_THRESHOLD_BYTES,
        "malloc_trim_threshold_bytes": TRIM_THRESHOLD_BYTES,
        "transparent_hugepages": "never",
    }
    # A process the runner did not start: glibc's dynamic thresholds, no file to read.
    assert describe({}, tmp_path / "absent") == {
        "allocator": "system",
        "malloc_mmap_threshold_bytes": None,
        "malloc_trim_threshold_bytes": None,
        "transparent_hugepages": None,
    }
