"""Checking and measuring variants in-process: compare_variants and the worker's time op."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

import benchbench
from benchbench.analysis.verdict import VERDICTS
from benchbench.core.errors import UsageError
from benchbench.core.values import Point
from benchbench.measure.policy import Policy
from benchbench.measure.variants import Candidate, measure_variants, time_request
from benchbench.run.statements import TimeConfig

# Short everything: these tests check what is reported, never how fast anything is. The
# cap yields to min_samples; short calls wait out a stalled machine up to a hundredfold
# cap (a stall of 0.6 s once left compare_variants' reference one sample, and no ratio).
FAST = Policy(
    max_time_s=0.05,
    min_time_s=0.0,
    min_samples=3,
    min_sample_s=1e-5,
    warmup_min_calls=1,
    warmup_min_s=0.0,
    warmup_max_s=0.01,
)
POINT = Point("t", "t", "", 256, (256,), "float32", "cpu")


def test_a_variant_computing_something_else_is_reported_and_not_timed():
    x = torch.rand(256) + 0.5
    candidates = [
        Candidate("sqrt", torch.sqrt, (x,)),
        Candidate("sqrt+1", lambda x: torch.sqrt(x) + 1, (x,)),
        Candidate("pow", lambda x: x**0.5, (x,)),
        Candidate("boom", lambda x: 1 / 0, (x,)),
    ]
    sqrt, plus_one, power, boom = measure_variants(POINT, candidates, 0, FAST)
    assert sqrt.status == "ok" and len(sqrt.samples_s) >= 3
    assert power.status == "ok" and power.max_rel_error is not None and power.max_rel_error < 1e-6
    assert power.extra["interleaved_with"] == ["sqrt", "pow"]
    assert power.extra["outputs"] == "keep"
    assert plus_one.status == "error" and not plus_one.samples_s
    assert plus_one.reason.startswith("wrong result against 'sqrt': ")
    assert "float32 elements beyond atol 1e-05 + rtol 1.3e-06·|expected|" in plus_one.reason
    assert plus_one.max_abs_error == pytest.approx(1.0)
    assert boom.status == "error" and boom.reason == "ZeroDivisionError: division by zero"
    assert [r.point.variant for r in (sqrt, plus_one, power, boom)] == [
        "sqrt",
        "sqrt+1",
        "pow",
        "boom",
    ]


def test_check_only_evaluates_without_timing():
    x = torch.rand(256)
    results = measure_variants(POINT, [Candidate("a", torch.neg, (x,))], 0, FAST, check_only=True)
    assert results[0].status == "ok" and results[0].samples_s == ()


def _request(statements, setup=None, check_only=False, size=64):
    config = TimeConfig(statements=tuple(statements), sizes=(size,), setup=setup, policy=FAST)
    return config.request(config.point(size, "cpu", "float32"), check_only=check_only)


def test_time_request_binds_the_point_and_the_default_inputs():
    results = time_request(_request(["x.sum() * 0 + n", "y.dtype == dtype", "x.min() >= 0.5"]))
    assert [r["status"] for r in results] == ["ok", "error", "error"]
    # The second and third return booleans: compared with the first (64.0), they are wrong.
    assert all(r["reason"].startswith("wrong result") for r in results[1:])
    same = time_request(_request(["(x.min() >= 0.5) & (x.max() < 1.5)", "y.dtype == dtype"]))
    assert [r["status"] for r in same] == ["ok", "ok"]  # both True: x in [0.5, 1.5), float32


def test_time_request_reports_name_errors_and_setup_failures_with_their_kind():
    checked = time_request(_request(["x", "torch.sqrtt(x)"], check_only=True))
    assert checked[0]["status"] == "ok"
    assert checked[1]["extra"]["failure"] == "AttributeError"
    failed = time_request(_request(["z"], setup="z = 1\nraise ValueError('no inputs')"))
    assert failed[0]["status"] == "error"
    assert failed[0]["reason"] == "setup, line 2: ValueError: no inputs"
    assert failed[0]["extra"] == {"failure": "ValueError", "in": "setup"}


def test_custom_setup_runs_with_torch_seeded_by_the_point():
    request = _request(["z"], setup="z = torch.rand(n, dtype=dtype)", check_only=True)
    seed = Point.from_dict(request["point"]).input_seed()
    again = f"(torch.manual_seed({seed}), torch.rand(n, dtype=dtype))[1]"
    other = f"(torch.manual_seed({seed + 1}), torch.rand(n, dtype=dtype))[1]"
    results = time_request({**request, "statements": ["z", again, other]})
    assert [r["status"] for r in results] == ["ok", "ok", "error"]
    assert results[2]["reason"].startswith("wrong result")


def test_an_absent_device_is_skipped_for_every_statement():
    request = _request(["x", "x + 0"])
    request["point"] = dataclasses.replace(POINT, device="cuda", size=64, shape=(64,)).to_dict()
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    results = time_request(request)
    assert [(r["status"], r["reason"]) for r in results] == [
        ("skipped", "CUDA is not available")
    ] * 2


def test_compare_variants_returns_a_dataframe_whose_plot_is_a_figure():
    frame = benchbench.compare_variants(
        {"rsqrt": torch.rsqrt, "1/sqrt": lambda x: 1 / torch.sqrt(x), "wrong": torch.sqrt},
        sizes=[256, 1024],
        budget_s=0.05,  # see FAST: a busy machine must not leave a side one sample
    )
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) == 6
    assert set(frame["variant"]) == {"rsqrt", "1/sqrt", "wrong"}
    ok = frame[frame["variant"] == "1/sqrt"]
    assert (ok["status"] == "ok").all() and ok["ratio"].notna().all()
    assert set(ok["verdict"]) <= set(VERDICTS)
    assert (frame[frame["variant"] == "rsqrt"]["verdict"] == "reference").all()
    wrong = frame[frame["variant"] == "wrong"]
    assert wrong["reason"].str.startswith("wrong result").all()
    assert type(frame.head(2)).__name__ == "ComparisonFrame"  # slicing keeps the class
    figure = frame.plot(title="rsqrt")
    assert isinstance(figure, Figure)
    (axes,) = figure.axes
    assert axes.get_xscale() == "log" and axes.get_yscale() == "log"
    assert len(axes.get_lines()) == 2  # the wrong variant has no line
    for crossover in frame.crossovers():  # timing decides whether there is one
        assert (crossover.variant, crossover.reference) == ("1/sqrt", "rsqrt")
        assert 256 <= crossover.size <= 1024
    assert "<table" in frame._repr_html_()


def test_compare_variants_rejects_an_unknown_reference():
    with pytest.raises(UsageError, match="reference 'c' is not a variant"):
        benchbench.compare_variants({"a": torch.neg}, sizes=[8], reference="c")
