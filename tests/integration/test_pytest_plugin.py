"""The `bench` fixture of the pytest plugin, driven through pytester.

Each inner pytest runs in a subprocess (``runpytest_subprocess``): torch does not
survive several in-process pytest sessions reliably (a crash in garbage collection
on the second one), and a subprocess also loads the plugin the way users do.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from benchbench.core.stats import Stats
from benchbench.pytest_plugin import verdict_for
from benchbench.store import open_store

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    """The inner pytest imports benchbench from this checkout."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _plugin_args() -> list[str]:
    """`-p` unless the installed entry point already loads the plugin."""
    installed = any(
        ep.value == "benchbench.pytest_plugin"
        for ep in importlib.metadata.entry_points(group="pytest11")
    )
    return [] if installed else ["-p", "benchbench.pytest_plugin"]


MEASURING_TEST = """
import torch

def test_sqrt(bench):
    x = torch.rand(4096) + 0.5
    r = bench(torch.sqrt, x, name="sqrt")
    assert r.name == "sqrt" and r.device == "cpu"
    assert r.stats.n == len(r.samples_s) >= 2 and r.calls_per_sample >= 1
    assert r.ci_low_s <= r.median_s <= r.ci_high_s
    assert r.min_s <= r.median_s
    assert r.stop_reason
    VERDICT_CHECK

def test_a_failing_speed_assertion_fails_the_test(bench):
    r = bench(torch.add, torch.ones(8), torch.ones(8))
    assert r.median_s < 0
"""


def _write(pytester: pytest.Pytester, verdict_check: str = "assert r.verdict is None") -> None:
    pytester.makepyfile(test_speed=MEASURING_TEST.replace("VERDICT_CHECK", verdict_check))


def test_fixture_measures_with_the_engine_and_assertions_bite(pytester):
    _write(pytester)
    result = pytester.runpytest_subprocess(*_plugin_args(), "--benchbench-budget", "0.1")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*benchbench*", "test_speed::test_sqrt sqrt: median *s *n=*"])


def test_store_records_one_run_per_session(pytester, tmp_path):
    db = tmp_path / "store.db"
    _write(pytester)
    result = pytester.runpytest_subprocess(
        *_plugin_args(), "--benchbench-budget", "0.1", "--benchbench-store", str(db)
    )
    result.assert_outcomes(passed=1, failed=1)
    store = open_store(str(db))
    (run,) = store.runs()
    assert run["kind"] == "ci" and run["tags"] == ["pytest"] and run["status"] == "finished"
    rows = store.measurements(run["id"])
    assert sorted(r["variant"] for r in rows) == ["add", "sqrt"]
    sqrt = next(r for r in rows if r["variant"] == "sqrt")
    assert sqrt["workload"] == "test_speed::test_sqrt"
    assert sqrt["suite"] == "pytest" and sqrt["size"] == 4096 and sqrt["dtype"] == "float32"
    assert sqrt["status"] == "ok" and len(sqrt["samples_s"]) == sqrt["n"] >= 2
    assert sqrt["ci_low_s"] <= sqrt["median_s"] <= sqrt["ci_high_s"]


def test_baseline_puts_a_verdict_on_each_result(pytester, tmp_path):
    db = tmp_path / "store.db"
    _write(pytester)
    args = [*_plugin_args(), "--benchbench-budget", "0.1", "--benchbench-store", str(db)]
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1, failed=1)
    (baseline,) = open_store(str(db)).runs()
    _write(
        pytester,
        "assert r.verdict.status in ('faster', 'slower', 'same', 'not significant'); "
        "assert r.verdict.ratio > 0 and 0 <= r.verdict.p_value <= 1; "
        f"assert r.verdict.baseline_run == {baseline['id'][:8]!r}; "
        "assert bench(torch.neg, x).verdict.status == 'new'",
    )
    result = pytester.runpytest_subprocess(*args, "--benchbench-baseline", baseline["id"][:8])
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_sqrt sqrt: median *x baseline)*"])


def _stats(median: float, n: int = 40) -> Stats:
    return Stats.from_samples([median * (1 + 0.01 * ((i % 7) - 3)) for i in range(n)], 1)


@pytest.mark.parametrize(
    ("now", "status"),
    [(1.5e-3, "slower"), (1.0e-3, "not significant"), (0.5e-3, "faster"), (1.02e-3, None)],
)
def test_verdict_needs_both_a_minimum_effect_and_significance(now, status):
    verdict = verdict_for(_stats(now), _stats(1e-3), "base")
    assert verdict.ratio == pytest.approx(now / 1e-3, rel=1e-9)
    if status is None:  # 2 % slower and significant: below the 5 % minimum effect
        assert verdict.p_value is not None and verdict.p_value < 0.05
        assert verdict.status == "same"
    else:
        assert verdict.status == status
    assert verdict_for(_stats(now), None, "base").status == "new"
