"""`benchbench probe / show / plot` end to end: real CLI, real SQLite store in a temp folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchbench.store import open_store
from benchbench.store.profiles import latest_profile, save_profile
from tests.integration.cli import SUITES, benchbench, json_of
from tests.unit.test_plot_views import profile as fake_profile


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one run of the `sizes` suite (3 sizes x 2 variants + 1), no profile."""
    folder = tmp_path_factory.mktemp("views")
    db = folder / "store.db"
    done = benchbench(
        "run", str(SUITES / "sizes.py"), "--store", str(db), "--label", "base", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    return db, "base"


def test_show_without_a_profile_has_null_peak_and_says_how_to_get_one(measured) -> None:
    db, label = measured
    doc = json_of(benchbench("show", label, "--store", str(db), "--json", cwd=db.parent))
    assert {r["percent_of_peak"] for r in doc["results"]} == {None}
    assert {r["ceiling"] is None for r in doc["results"]} == {True}
    fits = {(f["workload"], f["variant"]): f for f in doc["fits"]}
    assert fits[("sqrt", "torch.sqrt")]["points"] == 3
    assert fits[("sqrt", "torch.sqrt")]["work_unit"] == "bytes"
    assert fits[("sum", "torch.sum")]["note"] == "needs 3 sizes to fit, has 1"
    for c in doc["crossovers"]:  # timing decides whether there is one; its shape is fixed
        sizes = [r["size"] for r in doc["results"] if r["workload"] == c["workload"]]
        assert min(sizes) <= c["size"] <= max(sizes) and c["differs"] == "variant"
        sides = {f["variant"] for f in doc["fits"] if f["workload"] == c["workload"]}
        assert c["faster_below"] != c["faster_above"]
        assert {c["faster_below"], c["faster_above"]} <= sides
    table = benchbench("show", label, "--store", str(db), cwd=db.parent)
    assert table.returncode == 0, table.stderr
    assert "run `benchbench probe`" in table.stdout
    assert "fits: time = t0 + work / rate" in table.stdout
    assert "no work model" in table.stdout  # torch.sum has none: no GB/s, and it says so


def test_probe_stores_a_profile_that_show_then_uses(measured, tmp_path) -> None:
    db, label = measured
    done = benchbench("probe", "--quick", "--store", str(db), "--json", cwd=db.parent)
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    profile = doc["profile"]
    assert profile["device"] == "cpu" and profile["profile_version"] == 2
    assert profile["repeats"] == 3 and profile["min_call_bytes"] == 16 << 20
    assert {"read", "write", "copy", "update"} <= set(profile["bandwidth"])
    assert "float32" in profile["peak_flop_per_s"]
    assert profile["timer_overhead_s"] > 0 and profile["threads"] >= 1
    store = open_store(str(db))
    # The probe's environment is the run's: later runs on this machine reuse the profile.
    run = store.resolve_run(label)
    assert doc["environment_id"] == run["environment_id"]
    stored = latest_profile(store, run["environment_id"], "cpu")
    assert stored is not None and stored["id"] == doc["profile_id"]

    shown = json_of(benchbench("show", label, "--store", str(db), "--json", cwd=db.parent))
    sqrt = [r for r in shown["results"] if r["workload"] == "sqrt"]
    assert all(r["percent_of_peak"] > 0 for r in sqrt)
    # Which roof applies depends on the measured peaks (a --quick probe's matmul peak on a
    # loaded machine can fall under 0.125 flop/byte x bandwidth); the unit must match it.
    units = {"memory": "bytes/s", "compute": "flop/s"}
    assert all(units[r["ceiling"]["kind"]] == r["ceiling"]["unit"] for r in sqrt)
    summed = next(r for r in shown["results"] if r["workload"] == "sum")
    assert summed["percent_of_peak"] is None  # no work model, no percentage

    pictures = tmp_path / "pics"
    pictures.mkdir()
    for name, magic in (("p.png", b"\x89PNG\r\n\x1a\n"), ("p.svg", b"<?xml"), ("p.pdf", b"%PDF-")):
        out = pictures / name
        done = benchbench(
            "plot", label, "-o", str(out), "--workload", "sqrt", "--store", str(db), cwd=db.parent
        )
        assert done.returncode == 0, done.stderr
        assert out.read_bytes().startswith(magic)
    roof = pictures / "roof.png"
    done = benchbench(
        "plot", label, "-o", str(roof), "--roofline", "--store", str(db), cwd=db.parent
    )
    assert done.returncode == 0, done.stderr
    assert roof.read_bytes().startswith(b"\x89PNG")


def test_plot_of_unknown_run_or_workload_names_what_exists(measured, tmp_path) -> None:
    db, label = measured
    out = tmp_path / "x.png"
    done = benchbench("plot", "nosuchrun", "-o", str(out), "--store", str(db), cwd=db.parent)
    assert done.returncode == 1
    assert "no run 'nosuchrun'" in done.stderr and "(base)" in done.stderr
    done = benchbench(
        "plot", label, "-o", str(out), "--workload", "nope", "--store", str(db), cwd=db.parent
    )
    assert done.returncode == 1
    assert "'nope'" in done.stderr and "workloads there: sqrt, sum" in done.stderr
    done = benchbench(
        "plot", label, "-o", str(tmp_path / "x.gif"), "--store", str(db), cwd=db.parent
    )
    assert done.returncode == 2 and ".png, .svg or .pdf" in done.stderr
    assert not out.exists()


def test_points_above_a_too_low_ceiling_are_flagged_by_show_plot_and_doctor(
    measured, tmp_path
) -> None:
    db = tmp_path / "low.db"
    shutil.copy(measured[0], db)
    store = open_store(str(db))
    run = store.resolve_run(measured[1])
    low = fake_profile().to_dict()  # a profile of 1 MB/s everywhere: every point beats it
    low["bandwidth"] = {op: [[b, 1e6] for b, _ in pts] for op, pts in low["bandwidth"].items()}
    save_profile(store, run["environment_id"], "cpu", low)

    shown = json_of(benchbench("show", measured[1], "--store", str(db), "--json", cwd=tmp_path))
    sqrt = [r for r in shown["results"] if r["workload"] == "sqrt"]
    assert sqrt and all(r["ceiling"]["above_measured"] for r in sqrt)
    assert all(any(w.startswith("above the measured ceiling") for w in r["warnings"]) for r in sqrt)
    table = benchbench("show", measured[1], "--store", str(db), cwd=tmp_path)
    assert "> ceiling" in table.stdout and "re-run `benchbench probe`" in table.stdout
    plotted = benchbench(
        "plot", measured[1], "-o", str(tmp_path / "p.png"), "--store", str(db), cwd=tmp_path
    )
    assert plotted.returncode == 0, plotted.stderr
    assert "above the measured ceiling" in plotted.stderr
    doctor = json_of(benchbench("doctor", "--store", str(db), "--json", cwd=tmp_path))
    checks = {c["name"]: c for c in doctor["checks"]}
    assert checks["ceilings: latest run"]["status"] == "warn"
    assert checks["ceilings: latest run"]["value"].startswith(f"run {measured[1]}: ")
    assert checks["ceilings: cpu profile"]["status"] == "warn"  # 1 MB/s in L1: not a cache


def test_a_declared_axis_is_stored_and_a_product_size_without_one_gets_no_fit(tmp_path) -> None:
    db = tmp_path / "store.db"
    suite = str(SUITES / "axes.py")
    done = benchbench("run", suite, "--rounds", "1", "--store", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = open_store(str(db))
    rows = store.measurements(store.resolve_run("latest")["id"])
    declared = [r for r in rows if r["workload"] == "mm k"]
    assert sorted(r["extra"]["x"]["value"] for r in declared) == [8, 8, 32, 32, 128, 128]
    assert {r["extra"]["x"]["name"] for r in declared} == {"dim1"}
    doc = json_of(benchbench("show", "latest", "--store", str(db), "--json", cwd=tmp_path))
    fits = {(f["workload"], f["variant"]): f for f in doc["fits"]}
    assert fits[("mm k", "torch.mm")]["work_unit"] == "flop"
    assert "product of varying dimensions" in fits[("mm mixed", "torch.mm")]["note"]
    assert all(c["axis"] == "dim1" for c in doc["crossovers"])  # timing decides if any
    table = benchbench("show", "latest", "--store", str(db), cwd=tmp_path).stdout
    assert table.count("product of varying dimensions") == 1
    out = tmp_path / "axes.png"
    plotted = benchbench("plot", "latest", "-o", str(out), "--store", str(db), cwd=tmp_path)
    assert plotted.returncode == 0, plotted.stderr
    assert out.stat().st_size > 0


@pytest.mark.slow
def test_a_run_to_run_calibration_is_taken_by_a_suite_with_no_history(tmp_path) -> None:
    from tests.integration.cli import env

    db = tmp_path / "s.db"
    environ = {**env(), "BENCHBENCH_ROUNDS": "2"}  # two processes a point: an interval
    done = benchbench("probe", "--run-to-run", "3", "--store", str(db), "--json",
                      cwd=tmp_path, environ=environ)  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = json_of(done)["run_to_run"]
    assert line["runs"] == 3 and line["points"] >= 10 and line["run_level"] >= 0
    # Its runs went to a store of their own: this one keeps their points, not the runs.
    assert json_of(benchbench("runs", "--store", str(db), "--json", cwd=tmp_path))["runs"] == []
    # The calibration's environment is the run's: a first run of another suite takes it.
    ran = benchbench("run", str(SUITES / "sizes.py"), "--store", str(db), "--json",
                     cwd=tmp_path, environ=environ)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    doc = json_of(ran)
    assert doc["environment_id"] == line["environment_id"]
    assert "machine calibrated" in (doc["run_to_run"] or {}).get("calibrated", "")
    table = benchbench("show", "latest", "--store", str(db), cwd=tmp_path, environ=environ)
    assert "95% CI incl. run-to-run" in table.stdout and "machine calibrated 20" in table.stdout
