import datetime as dt
import random

import numpy as np

from benchbench.analysis.regressions import analyze_all, analyze_series, detect, severity
from benchbench.store import history, open_store
from benchbench.store.history import HistoryPoint, annotate, list_alerts
from tests.synthetic import point, write_history


def _history(values):
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return [
        HistoryPoint(f"run{i}", start + dt.timedelta(days=i), f"sha{i}", v)
        for i, v in enumerate(values)
    ]


def _noisy(levels, seed=0, noise=0.01):
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for level in levels]


def test_a_step_up_is_one_alert_with_its_commit_range():
    values = _noisy([1e-3] * 30 + [1.12e-3] * 20)
    report = analyze_series("b", "e", _history(values))
    assert not report.unstable
    (alert,) = report.alerts
    assert alert.first_bad_run_id == "run30"
    assert alert.last_good_run_id == "run29"
    assert alert.detail["good_sha"] == "sha29" and alert.detail["bad_sha"] == "sha30"
    assert 0.09 < alert.rel_change < 0.15
    assert alert.severity == "major"


def test_improvements_and_flat_series_raise_nothing():
    assert analyze_series("b", "e", _history(_noisy([1e-3] * 50))).alerts == ()
    assert analyze_series("b", "e", _history(_noisy([1e-3] * 25 + [0.8e-3] * 25))).alerts == ()


def test_failed_runs_are_gaps_and_the_good_run_skips_them():
    values = _noisy([1e-3] * 30 + [1.3e-3] * 20)
    values[29] = None
    report = analyze_series("b", "e", _history(values))
    (alert,) = report.alerts
    assert alert.first_bad_run_id == "run30" and alert.last_good_run_id == "run28"
    assert alert.severity == "critical"


def test_noisy_series_are_unstable_not_alerts():
    values = _noisy([1e-3] * 25 + [1.2e-3] * 25, noise=0.3)
    report = analyze_series("b", "e", _history(values))
    assert report.unstable and report.alerts == ()


def test_expected_change_resets_the_baseline():
    values = _noisy([1e-3] * 30 + [1.12e-3] * 20)
    report = analyze_series("b", "e", _history(values), baseline_run_id="run30")
    assert report.alerts == ()
    assert report.points == 20


def test_severity_bands():
    assert severity(0.06) == "minor"
    assert severity(0.15) == "major"
    assert severity(-0.3) == "critical"


def test_detect_judges_every_stored_series_and_saves_each_alert_once(tmp_path):
    store = open_store(str(tmp_path / "h.db"))
    rng = random.Random(2)
    step = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(20)] + [
        1.3e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(10)
    ]
    flat = [2e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(30)]
    runs = write_history(store, {point("step"): step, point("flat"): flat})
    reports, new = detect(store)
    assert len(reports) == 2 and new == 1
    (alert,) = [a for r in reports for a in r.alerts]
    assert alert.first_bad_run_id == runs[20] and alert.severity == "critical"
    assert detect(store)[1] == 0  # already stored: not new again
    (stored,) = list_alerts(store)
    # An expected change resets the baseline: the series is judged from its bad run on.
    annotate(store, stored["id"], "expected")
    reports, new = detect(store)
    assert new == 0 and not [a for r in reports for a in r.alerts]


def test_instruction_series_alert_on_a_count_step_the_times_do_not_show(tmp_path):
    store = open_store(str(tmp_path / "h.db"))
    rng = random.Random(3)
    times = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(12)]  # flat in time
    counts = [10_000.0] * 8 + [10_300.0] * 4  # +3 % instructions from run 8 on
    p = point("counted")
    runs = write_history(store, {p: times}, counts={p: counts})
    reports, new = detect(store)
    assert new == 0  # time sees nothing
    reports, new = detect(store, min_effect=0.01, metric="instructions")
    (alert,) = [a for r in reports for a in r.alerts]
    assert new == 1 and alert.first_bad_run_id == runs[8]
    assert alert.detail["metric"] == "instructions"
    assert alert.detail["before_instructions"] == 10_000.0
    assert alert.detail["after_instructions"] == 10_300.0


def test_series_never_counted_are_not_judged_on_instructions(tmp_path):
    store = open_store(str(tmp_path / "h.db"))
    write_history(store, {point("timed"): [1e-3] * 8})
    reports, new = detect(store, metric="instructions")
    assert reports == [] and new == 0


def test_counts_of_the_cpu_counter_are_gaps_in_the_instruction_series(tmp_path):
    """A run counted with ``--counter pmu`` (the C allocator's instructions in its counts:
    30 % more here) is not a step in callgrind's series; the same counts from callgrind
    are."""
    later = dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc)
    for counter, alerts in (("pmu", 0), ("callgrind", 1)):
        store = open_store(str(tmp_path / f"{counter}.db"))
        p = point("counted")
        write_history(store, {p: [1e-3] * 8}, counts={p: [10_000.0] * 8})
        runs = write_history(store, {p: [1e-3] * 6}, counts={p: [13_000.0] * 6},
                             counter=counter, seed=1, start=later)  # fmt: skip
        assert history.runs_counted_by(store, "pmu") == (set(runs) if counter == "pmu" else set())
        reports, _ = detect(store, min_effect=0.01, metric="instructions")
        assert sum(len(r.alerts) for r in reports) == alerts, counter


def test_forked_workers_find_what_one_process_finds_in_the_same_order():
    rng = random.Random(3)
    series = []
    for k in range(40):
        step = 1.0 + 0.2 * (k % 3 == 0)
        levels = [1e-3] * 25 + [1e-3 * step] * (15 + k % 7)
        series.append(np.array(_noisy(levels, seed=rng.randrange(1000))))
    series[5][[3, 30]] = np.nan  # failed runs are gaps on either side
    one = analyze_all(series, jobs=1)
    forked = analyze_all(series, jobs=2, parallel_from=0)
    assert forked == one
    assert sum(1 for a in one if a.change_points) == 14  # the stepped series, no others


def test_detect_judges_every_series_of_the_store_from_its_baseline(tmp_path):
    store = open_store(str(tmp_path / "s.db"))
    run_ids = write_history(store, {point(): _noisy([1e-3] * 10 + [1.3e-3] * 10, seed=4)})
    (alert,) = detect(store)[0][0].alerts
    assert alert.first_bad_run_id == run_ids[10] and alert.last_good_run_id == run_ids[9]
    (row,) = list_alerts(store)
    annotate(store, row["id"], "expected")
    (report,) = detect(store)[0]
    assert report.points == 10 and report.alerts == ()  # judged from the new level on
