"""Tables a nightly job reads: written to a file, no terminal, no `$COLUMNS`, nothing cut."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from benchbench.cli import main
from benchbench.core.units import format_time
from tests.integration.cli import SUITES, benchbench, env, json_of

LABELS = SUITES / "labels.py"
BROKEN = (
    "failed: layer_norm_broken:torch.nn.functional.layer_norm[float32, cpu](n=1024): "
    "RuntimeError: setup of layer_norm_broken refuses on purpose: the input is never made "
    f"(at {LABELS}:8)"
)


def to_file(*args: str, cwd: Path) -> tuple[int, str, str]:
    """The CLI with stdout and stderr written to files, as in a CI log: no terminal and,
    unlike the other tests' helper, no `$COLUMNS`."""
    environ = env()
    environ.pop("COLUMNS")
    done = benchbench(*args, cwd=cwd, environ=environ)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with two runs (labels a, b) of a 13-point suite; one point fails in setup.
    Returns the store and the first run's closing table."""
    folder = tmp_path_factory.mktemp("output")
    tables = []
    for label in ("a", "b"):
        args = ("run", str(LABELS), "--store", "s.db", "--label", label)
        code, out, err = to_file(*args, cwd=folder)
        assert code == 1, err  # the broken setup fails its point
        assert BROKEN in err
        tables.append(out)
    return folder, tables[0]


def _doc(folder: Path, *args: str) -> dict:
    return json_of(benchbench(*args, "--store", "s.db", "--json", cwd=folder))


def _names_and_numbers(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        out += [r["workload"], r["variant"], r["dtype"]]
        if r["status"] == "ok":
            out.append(format_time(r["median_s"]))
        elif r["status"] == "error":  # its head in the table, whole under it (stderr)
            out.append(r["reason"].split(":", 1)[0])
        else:
            out.append(r["reason"])
    return out


def test_run_and_show_written_to_a_file_hold_every_label_and_number(two_runs) -> None:
    folder, run_table = two_runs
    doc = _doc(folder, "show", "b")
    code, out, err = to_file("show", "b", "--store", "s.db", cwd=folder)
    assert code == 0, err
    assert "…" not in out and "…" not in run_table
    for text in _names_and_numbers(doc["results"]):
        assert text in out, text
    for text in _names_and_numbers(_doc(folder, "show", "a")["results"]):
        assert text in run_table, text
    # The fits table: one row per curve, each with its dtype and device.
    for dtype in ("float32", "float64"):
        for variant in ("torch.nn.functional.layer_norm", "manual_mean_and_variance"):
            assert f"layer_norm_rowwise:{variant}[{dtype}, cpu]" in out
    assert BROKEN in err


def test_compare_written_to_a_file_holds_every_point_label_and_ratio(two_runs) -> None:
    folder, _ = two_runs
    doc = _doc(folder, "compare", "a", "b", "--no-fail-on-regression")
    code, out, err = to_file("compare", "a", "b", "--store", "s.db", cwd=folder)
    assert code in (0, 3), err
    assert "…" not in out
    assert len(doc["points"]) == 13
    for point in doc["points"]:
        assert point["label"] in out
        if point["ratio"] is not None:
            assert f"{point['ratio']:.3f}" in out
    # The smallest change each point could have seen, and the run's line about it.
    from benchbench.analysis.detectable import format_effect

    assert "MDE" in out
    for point in doc["points"]:
        if point["mde"] is not None:
            assert format_effect(point["mde"], doc["min_effect"]) in out
    assert doc["detectable"]["power"] == 0.8
    assert "could not have seen a change below" in err or "smallest detectable change" in err
    assert BROKEN in err


def test_markdown_and_csv_carry_the_same_rows(two_runs) -> None:
    folder, _ = two_runs
    code, out, err = to_file("show", "b", "--store", "s.db", "--format", "markdown", cwd=folder)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    # Results: header and 13 points; fits: header and 4 curves.
    assert len(rows) == 1 + 13 + 1 + 4
    assert rows[0].startswith("| workload | variant | dtype | device | size | median |")
    assert "| layer\\_norm\\_broken | torch.nn.functional.layer\\_norm | float32 |" in out
    code, out, err = to_file("show", "b", "--store", "s.db", "--format", "csv", cwd=folder)
    assert code == 0, err
    results, fits = (list(csv.reader(io.StringIO(b))) for b in out.split("\n\n"))
    assert results[0][:6] == ["workload", "variant", "dtype", "device", "size", "median"]
    assert len(results) == 14 and len(fits) == 5
    assert {r[2] for r in results[1:]} == {"float32", "float64"}
    assert "no hardware profile" in err  # the note, kept out of the CSV


def test_list_and_runs_print_full_labels_in_every_format(two_runs) -> None:
    folder, _ = two_runs
    code, out, err = to_file("list", str(LABELS), cwd=folder)
    assert code == 0, err
    labels = [p["label"] for p in _list_json(folder)]
    assert len(labels) == len(set(labels)) == 13  # two dtypes: two labels
    for label in labels:
        assert label in out
    code, out, err = to_file("runs", "--store", "s.db", "--format", "csv", cwd=folder)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    counts = [(r["label"], r["ok"], r["failed"]) for r in rows]
    assert counts == [("b", "12", "1"), ("a", "12", "1")]


def _list_json(folder: Path) -> list[dict]:
    return json_of(benchbench("list", str(LABELS), "--format", "json", cwd=folder))["points"]


def test_doctor_prints_its_checks_as_csv(capsys) -> None:
    assert main(["doctor", "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["check", "status", "value", "fix"]
    assert len(rows) > 5 and {r[1] for r in rows[1:]} <= {"ok", "warn", "info", "unknown"}


@pytest.mark.parametrize(
    "args",
    [("doctor",), ("claims", "a"), ("regressions",), ("list", str(LABELS), "--tag", "nothing")],
)
def test_a_command_s_table_and_notes_fit_160_columns_in_a_file(two_runs, args) -> None:
    """What a machine or a claim puts in a cell wraps within its column, and a note under
    a table at 150: doctor's /sys paths made its table 328 wide, the claims' sentences
    438, and regressions' note on short histories was one line of 200."""
    folder, _ = two_runs
    code, out, err = to_file(*args, "--store", "s.db", cwd=folder)
    assert code == 0, err
    lines = (out + err).splitlines()
    assert len(lines) > 1 and max(len(line) for line in lines) <= 160, max(lines, key=len)


def test_show_says_the_threads_the_verdict_and_the_drift_within_160_columns(two_runs) -> None:
    folder, run_table = two_runs
    code, out, err = to_file("show", "b", "--store", "s.db", cwd=folder)
    assert code == 0, err
    lines = out.splitlines()
    # Under the table (this suite's names are long on purpose: the table is as wide as
    # they need), every line fits 160 columns; test_run_notes.py checks a quick run whole.
    table_end = min(k for k, line in enumerate(lines) if line.startswith("└"))
    assert max(len(line) for line in lines[table_end + 1 :]) <= 160
    assert "· 1 thread" in lines[0]  # the default: one torch thread
    assert any(line.startswith("verdict: ") and " within ±3 %" in line for line in lines)
    # Run b has run a before it, of the same suite on the same environment.
    assert any(line.startswith("between runs, from run ") for line in lines)
    assert not any(line.startswith("between runs") for line in run_table.splitlines())
    doc = _doc(folder, "show", "b")
    assert {r["threads"] for r in doc["results"] if r["status"] == "ok"} == {1}
