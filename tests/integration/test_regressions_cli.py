"""`benchbench regressions` and `annotate` against a real SQLite store with history."""

import random

from benchbench.store import open_store
from tests.integration.cli import benchbench, json_of
from tests.synthetic import point, write_history


def _store_with_a_regression(tmp_path):
    db = tmp_path / "h.db"
    store = open_store(str(db))
    rng = random.Random(1)
    slow = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(30)] + [
        1.2e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(15)
    ]
    flat = [2e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(45)]
    noisy = [1e-3 * (1 + rng.gauss(0, 0.4)) for _ in range(45)]
    runs = write_history(
        store, {point("torch.sqrt"): slow, point("x.sqrt_()"): flat, point("noisy"): noisy}
    )
    return db, runs


def test_regression_is_found_listed_and_fails_the_job(tmp_path):
    db, runs = _store_with_a_regression(tmp_path)
    done = benchbench("regressions", "--store", str(db), "--json", "--fail", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    doc = json_of(done)
    (alert,) = doc["alerts"]
    assert alert["variant"] == "torch.sqrt"
    assert alert["first_bad_run_id"] == runs[30] and alert["last_good_run_id"] == runs[29]
    assert alert["severity"] == "major" and alert["status"] == "open"
    assert alert["detail"]["good_sha"] == f"{29:040x}"
    assert len(doc["unstable"]) == 1
    assert doc["new_alerts"] == 1
    # The smallest step each judged series could show: 1 % noise over 45 runs sees 5 %.
    seen = doc["detectable"]
    assert len(seen["series"]) == 2 and seen["power"] == 0.8 and not seen["blind"]
    assert all(0 < s["mde"] < 0.05 for s in seen["series"])
    # Listed in the series' order and the alert's detail with its keys in order, not as
    # the engine read them: the same on SQLite and PostgreSQL.
    ids = [s["benchmark_id"] for s in seen["series"]]
    assert ids == sorted(ids) and list(alert["detail"]) == sorted(alert["detail"])
    again = json_of(benchbench("regressions", "--store", str(db), "--json", cwd=tmp_path))
    assert again["new_alerts"] == 0 and len(again["alerts"]) == 1

    table = benchbench("regressions", "--store", str(db), cwd=tmp_path)
    assert table.returncode == 0 and "+2" in table.stdout and "major" in table.stdout
    assert "smallest step a series could show: median" in table.stderr
    assert "sqrt:torch.sqrt[float32, cpu](n=2^10)" in table.stdout  # the label, whole
    summary = benchbench("regressions", "--store", str(db), "--format", "markdown", cwd=tmp_path)
    rows = [line for line in summary.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| alert | status | severity | change | benchmark |")
    assert len(rows) == 2 and "sqrt:torch.sqrt\\[float32, cpu\\](n=2^10)" in rows[1]

    ack = benchbench(
        "annotate",
        str(alert["id"]),
        "--acknowledge",
        "--note",
        "known",
        "--store",
        str(db),
        cwd=tmp_path,
    )
    assert ack.returncode == 0, ack.stderr
    after = benchbench("regressions", "--store", str(db), "--json", "--fail", cwd=tmp_path)
    assert after.returncode == 0
    assert json_of(after)["alerts"] == []
    listed = json_of(benchbench("regressions", "--store", str(db), "--json", "--all", cwd=tmp_path))
    assert [a["status"] for a in listed["alerts"]] == ["acknowledged"]


def test_expected_change_resets_the_baseline_and_unknown_alert_is_named(tmp_path):
    db, _ = _store_with_a_regression(tmp_path)
    alert = json_of(benchbench("regressions", "--store", str(db), "--json", cwd=tmp_path))[
        "alerts"
    ][0]
    done = benchbench("annotate", str(alert["id"]), "--expected", "--store", str(db), cwd=tmp_path)
    assert done.returncode == 0
    doc = json_of(benchbench("regressions", "--store", str(db), "--json", "--fail", cwd=tmp_path))
    assert doc["alerts"] == [] and doc["new_alerts"] == 0
    missing = benchbench("annotate", "999", "--ignore", "--store", str(db), cwd=tmp_path)
    assert missing.returncode == 1 and "no alert 999" in missing.stderr
    bad_date = benchbench("regressions", "--since", "yesterday", "--store", str(db), cwd=tmp_path)
    assert bad_date.returncode == 2 and "YYYY-MM-DD" in bad_date.stderr
    no_jobs = benchbench("regressions", "--jobs", "0", "--store", str(db), cwd=tmp_path)
    assert no_jobs.returncode == 2 and "--jobs must be at least 1, got 0" in no_jobs.stderr


def test_too_little_history_says_how_many_runs_are_needed_and_had(tmp_path):
    db = tmp_path / "short.db"
    store = open_store(str(db))
    # 4 runs, the second failed for one series: 4 and 3 measured runs, both below 6.
    write_history(
        store, {point("torch.sqrt"): [1e-3] * 4, point("x.sqrt_()"): [1e-3, None, 1e-3, 1e-3]}
    )
    done = benchbench("regressions", "--store", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 of 2 series have too little history to judge" in done.stderr
    assert "needs at least 6 runs with a measured value per series" in done.stderr
    assert "they have 3 to 4" in done.stderr
    doc = json_of(benchbench("regressions", "--store", str(db), "--json", cwd=tmp_path))
    assert doc["min_runs"] == 6
    assert sorted(s["runs"] for s in doc["too_short"]) == [3, 4]
    assert doc["series"] == 2 and doc["alerts"] == []


def test_a_store_without_runs_says_it_has_no_history(tmp_path):
    db = tmp_path / "empty.db"
    open_store(str(db))
    done = benchbench("regressions", "--store", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())  # the note wraps at 150 characters
    assert "no history in sqlite:///" in said
    assert "needs at least 6 runs per series" in said and "it has 0 runs" in said


def test_enough_history_prints_no_note(tmp_path):
    db, _ = _store_with_a_regression(tmp_path)
    done = benchbench("regressions", "--store", str(db), cwd=tmp_path)
    assert "too little history" not in done.stderr and "no history" not in done.stderr
    assert (
        json_of(benchbench("regressions", "--store", str(db), "--json", cwd=tmp_path))["too_short"]
        == []
    )
