"""The dashboard's output folder: refused unless it is ours, replaced whole or not at all."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchbench.core.errors import UsageError
from benchbench.dashboard import build_site, site
from benchbench.dashboard.synthetic import synthetic_data
from benchbench.dashboard.target import MARKER, WRITTEN, building

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_folder_that_is_not_a_dashboard_is_refused_by_name_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.csv").write_text("precious")
    with pytest.raises(UsageError, match=rf"'{tmp_path}' is a folder that is not a dashboard"):
        build_site(synthetic_data(n_runs=2), tmp_path, now=NOW)
    assert (tmp_path / "data" / "mine.csv").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_file_is_refused_and_a_new_or_empty_folder_is_built(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="is a file; give -o a folder"):
        build_site(synthetic_data(n_runs=2), tmp_path / "f", now=NOW)
    build_site(synthetic_data(n_runs=2), tmp_path / "new" / "site", now=NOW)
    assert (tmp_path / "new" / "site" / MARKER).is_file()
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["site"]  # no temp left


def test_a_build_that_fails_leaves_the_old_site_whole(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "site"
    build_site(synthetic_data(n_runs=2), out, now=NOW)
    before = _tree(out)

    def broken(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(site, "_write_pages", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build_site(synthetic_data(n_runs=4), out, now=NOW)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_rebuild_replaces_the_site_and_keeps_a_users_files(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(synthetic_data(n_runs=2), out, now=NOW)
    (out / "CNAME").write_text("bench.example.org")
    (out / "data" / "stale.js").write_text("old")
    build_site(synthetic_data(n_runs=3), out, now=NOW)
    assert (out / "CNAME").read_text() == "bench.example.org"
    assert not (out / "data" / "stale.js").exists()  # the site is the new one, whole


def test_a_dashboard_built_before_the_marker_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(synthetic_data(n_runs=2), out, now=NOW)
    (out / MARKER).unlink()
    build_site(synthetic_data(n_runs=2), out, now=NOW)
    assert (out / MARKER).is_file()


def test_what_a_build_writes_is_what_the_carry_over_leaves_out(tmp_path: Path) -> None:
    assert set(site.PAGES) | {"assets", "data"} == WRITTEN
    with building(tmp_path / "empty") as new:
        assert new.parent == tmp_path and new.name.startswith(".empty.building-")
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == [MARKER]
