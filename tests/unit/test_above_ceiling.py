"""Points above their measured ceiling: the flag, the views that say so, and doctor.

Fake profiles and fake result rows only: no probe, no clock.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from benchbench.analysis.roofline import ABOVE_CEILING_TOLERANCE, above_ceiling
from benchbench.cli.doctor import ceiling_checks
from benchbench.machine.doctor_ceilings import check_profile, check_run
from benchbench.machine.environment import Environment
from benchbench.store import open_store
from benchbench.store.profiles import save_profile
from benchbench.views.plot import roofline_figure, throughput_figure
from benchbench.views.results import (
    ABOVE_CEILING,
    above_ceiling_note,
    result_json,
    results_grid,
    with_roofline,
)
from benchbench.views.tables import rich_table
from tests.unit.test_curves import row
from tests.unit.test_plot_views import profile
from tests.unit.test_store_queries import _create_run, _ok, _point

KIB = 1 << 10


def measured(size: int, bytes_per_s: float, **kw: Any) -> dict[str, Any]:
    """A measured sqrt row moving 8 bytes per element at ``bytes_per_s``."""
    out = row(size, 8.0 * size / bytes_per_s, **kw)
    out["bytes_per_s"] = bytes_per_s
    out["flop_per_s"] = size / out["median_s"]  # type: ignore[operator]
    out["warnings"] = ["not converged: 3 of 5 s"]
    return out


def test_the_flag_allows_the_tolerance_and_no_more() -> None:
    assert ABOVE_CEILING_TOLERANCE == 0.10
    assert not above_ceiling(100.0, 100.0)
    assert not above_ceiling(110.0, 100.0)  # within what a measured ceiling can be off by
    assert above_ceiling(110.5, 100.0)
    assert not above_ceiling(5.0, 0.0)  # no ceiling measured: nothing to be above


def test_a_point_above_its_ceiling_is_flagged_and_warned_about_not_reported() -> None:
    # 64 KiB moved: the fake profile's cache plateau, 40 GB/s.
    within, above = measured(8 * KIB, 42e9), measured(8 * KIB, 72e9, variant="numpy.sqrt")
    out = with_roofline([within, above], {"cpu": profile()})
    assert out[0]["ceiling"]["above_measured"] is False
    assert out[0]["warnings"] == ["not converged: 3 of 5 s"]  # untouched
    assert out[1]["ceiling"]["above_measured"] is True
    assert out[1]["percent_of_peak"] == pytest.approx(180.0)
    assert out[1]["warnings"][0] == "not converged: 3 of 5 s"
    warning = out[1]["warnings"][1]
    assert warning.startswith(f"{ABOVE_CEILING}: 180 % of the probe's 40 GB/s")
    assert "re-run `benchbench probe`" in warning
    assert result_json(out[1])["warnings"] == out[1]["warnings"]  # --json carries it

    grid = results_grid(out, profiled=True)
    console = Console(width=250, record=True)
    console.print(rich_table(grid))
    text = console.export_text()
    lines = {
        line.split("│")[2].strip(): line for line in text.splitlines() if line.startswith("│ sqrt")
    }
    assert "% mem" in lines["torch.sqrt"] and "105%" in lines["torch.sqrt"]
    assert "> ceiling" in lines["numpy.sqrt"] and "180%" not in lines["numpy.sqrt"]
    assert lines["numpy.sqrt"].rstrip(" │").endswith("above ceiling")  # the notes column
    assert len(grid.notes) == 1 and grid.notes[0].startswith(
        f"1 point(s) {ABOVE_CEILING} (over 110 % of it): sqrt numpy.sqrt at 2^13 (180 %)"
    )
    assert "re-run `benchbench probe`" in grid.notes[0]
    assert results_grid(out[:1], profiled=True).notes == ()


def test_the_note_names_three_and_counts_the_rest() -> None:
    rows = [measured(8 * KIB, 90e9, variant=f"v{k}") for k in range(5)]
    note = above_ceiling_note(rows, profile())
    assert note is not None and note.startswith(f"5 point(s) {ABOVE_CEILING}")
    assert "v0" in note and "v2" in note and "v3" not in note and "and 2 more" in note
    assert above_ceiling_note(rows) is None  # not held to a profile: nothing to say
    assert above_ceiling_note(rows, None) is None
    on_gpu = [measured(8 * KIB, 90e9, device="cuda")]
    assert above_ceiling_note(on_gpu, profile()) is None  # the profile is the CPU's


def test_plots_say_which_points_are_above_their_ceiling() -> None:
    rows = [measured(n, 90e9 if n == 1024 else 5e9) for n in (1024, 4096, 16384, 65536)]
    for figure in (
        throughput_figure(rows, profile=profile()),
        roofline_figure(rows, profile=profile()),
    ):
        label = figure.get_supxlabel()
        assert ABOVE_CEILING in label and "sqrt torch.sqrt at 2^10 (225 %)" in label.replace(
            "\n", " "
        )
    assert throughput_figure([measured(1024, 5e9)], profile=profile()).get_supxlabel() == ""


def test_doctor_flags_a_profile_that_timed_call_overhead() -> None:
    good = profile()
    (check,) = check_profile(good)
    assert check.status == "warn" and "version 1" in check.value  # min_call_bytes 0: v1
    assert check.advice == "benchbench probe --threads 2"
    with_update = {**good.bandwidth, "update": good.bandwidth["copy"]}
    amortised = profile().__class__(
        **{**vars(good), "repeats": 3, "min_call_bytes": 16 << 20, "bandwidth": with_update}
    )
    (check,) = check_profile(amortised)
    assert check.status == "ok" and "best of 3 repeat(s)" in check.value
    # 4 KiB read at 1.2 GB/s, under main memory's 10 GB/s: overhead, not the cache.
    curve = ((4096, 1.2e9), (16384, 4e9), (65536, 20e9), (1 << 24, 10e9))
    overhead = amortised.__class__(
        **{
            **vars(amortised),
            "bandwidth": {"read": curve, "write": curve, "copy": curve, "update": curve},
        }
    )
    (check,) = check_profile(overhead)
    assert check.status == "warn"
    assert check.value.startswith("in-cache bandwidth below main memory's: 1.2 GB/s at 4 KiB")
    assert "at 2 small working set(s)" in check.value


def test_doctor_reports_the_points_of_a_run_above_their_ceiling() -> None:
    rows = with_roofline(
        [measured(8 * KIB, 42e9), measured(8 * KIB, 72e9, variant="numpy.sqrt")],
        {"cpu": profile()},
    )
    (check,) = check_run("nightly", rows, profile())
    assert check.status == "warn" and check.advice == "benchbench probe --threads 2"
    assert check.value.startswith("run nightly: 1 of 2 point(s) above the measured ceiling")
    assert "numpy.sqrt n=8192 180 %" in check.value
    (check,) = check_run("nightly", rows[:1], profile())
    assert (check.status, check.value) == ("ok", "run nightly: 1 point(s) within their ceiling")
    (check,) = check_run("nightly", with_roofline(rows, {}), None)
    assert check.status == "info" and "benchbench probe --threads N" in check.advice


def test_doctor_reads_the_latest_run_and_its_profile_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "s.db")
    args = argparse.Namespace(store=db, store_create=False)
    store = open_store(db)
    (check,) = ceiling_checks(args)
    assert check.status == "unknown" and "no run in" in check.value
    env = Environment(fields={"machine": "m1", "threads": 2})
    store.save_environment(env)
    save_profile(store, env.id, "cpu", profile().to_dict())  # one pass per call, as v1
    run_id = "aaaa0000-0000-4000-8000-000000000001"
    _create_run(store, run_id, env, dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc), label="x")
    # 8 KiB a call in 10 ns a sample: far above the fake profile's 40 GB/s in cache
    store.write_result(run_id, _ok(_point(), [1e-8, 1e-8, 1e-8]))
    checks = ceiling_checks(args)
    assert [(c.name, c.status) for c in checks] == [
        ("ceilings: cpu profile", "warn"),
        ("ceilings: latest run", "warn"),
        ("run-to-run calibration", "info"),  # none stored: `probe --run-to-run` is the fix
    ]
    assert checks[1].value.startswith("run x: 1 of 1 point(s) above the measured ceiling")
    monkeypatch.delenv("BENCHBENCH_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    (check,) = ceiling_checks(argparse.Namespace(store=None, store_create=False))
    assert check.status == "unknown"
    assert "no results store at results/benchbench.db" in check.value
