"""Suite API extensions: check modes, Skip, teardown, unsupported dtypes, --profile traces."""

from __future__ import annotations

import json

import pytest
import torch

from benchbench.core.errors import SuiteError
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy
from benchbench.measure.trace import profile_file_name
from benchbench.suite.declare import Skip, Suite, Variant

# Short enough that each measured point costs well under a second here.
FAST = Options(policy=Policy(max_time_s=0.02, min_time_s=0.0, warmup_min_s=0.0, warmup_max_s=0.01))


def _point(workload, variant=None, dtype="float32"):
    return next(
        p for p in workload.points(dtypes=[dtype]) if variant is None or p.variant == variant
    )


def test_check_mode_is_validated_with_the_declaration_site():
    suite = Suite("s")
    with pytest.raises(SuiteError, match="check must be True, False or 'record'"):
        suite.workload("w", setup=lambda c: c.uniform(), variants=[Variant("v", abs)],
                       sizes=[4], check="maybe")  # fmt: skip
    with pytest.raises(SuiteError, match="check must be"):
        suite.workload("w", setup=lambda c: c.uniform(),
                       variants=[Variant("v", abs, check="loose")], sizes=[4])  # fmt: skip


def test_record_mode_stores_the_error_and_does_not_reject_the_point():
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[
            Variant("right", torch.sqrt),
            Variant("off by 1 %", lambda x: torch.sqrt(x) * 1.01, check="record"),
            Variant("checked", lambda x: torch.sqrt(x) * 1.01),
        ],
        sizes=[64],
    )
    recorded = measure_point(w, _point(w, "off by 1 %"), FAST)
    assert recorded.status == "ok", recorded.reason
    assert recorded.max_rel_error == pytest.approx(0.01, rel=1e-3)
    assert recorded.extra["check"] == "record"
    assert any("accuracy recorded, not enforced" in x for x in recorded.warnings)
    rejected = measure_point(w, _point(w, "checked"), FAST)
    assert rejected.status == "error" and rejected.reason.startswith("wrong result")


def test_record_mode_counts_nan_and_inf_outputs():
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: c.uniform(80.0, 100.0),
        variants=[Variant("exp", torch.exp)],
        reference=torch.exp,
        sizes=[1000],
        check="record",
    )
    result = measure_point(w, _point(w), FAST)
    assert result.status == "ok"
    # exp overflows float32 above 88.72: about 11.3 of every 20 units of the range.
    assert 400 < result.extra["nonfinite"] < 700
    assert result.extra["mismatched_nonfinite"] == result.extra["nonfinite"]


def test_skip_from_setup_is_stored_as_skipped_with_the_message():
    suite = Suite("s")

    def setup(ctx):
        raise Skip("needs a second GPU; this machine has 0")

    w = suite.workload("w", setup=setup, variants=[Variant("v", abs)], sizes=[4])
    result = measure_point(w, _point(w), FAST)
    assert (result.status, result.reason) == ("skipped", "needs a second GPU; this machine has 0")


def test_an_unimplemented_dtype_in_the_first_call_is_a_skip_not_an_error():
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: c.uniform(0.1, 0.9),
        variants=[Variant("ndtri", torch.special.ndtri)],
        sizes=[16],
        dtypes=["float16"],
    )
    result = measure_point(w, _point(w, dtype="float16"), FAST)
    assert result.status == "skipped"
    assert "float16 is not supported on cpu" in result.reason and "Half" in result.reason


def test_teardown_runs_after_success_and_after_failure():
    released = []
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: (c.uniform(0.5, 1.5), "handle"),
        teardown=lambda x, handle: released.append(handle),
        variants=[
            Variant("ok", lambda x, h: torch.sqrt(x)),
            Variant("boom", lambda x, h: 1 / 0),
        ],
        sizes=[8],
    )
    assert measure_point(w, _point(w, "ok"), FAST).status == "ok"
    failed = measure_point(w, _point(w, "boom"), FAST)
    assert failed.status == "error" and "ZeroDivisionError" in failed.reason
    assert released == ["handle", "handle"]


def test_profile_writes_a_chrome_trace_and_lists_top_operators(tmp_path):
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[Variant("torch.sqrt", torch.sqrt)],
        sizes=[256],
    )
    point = _point(w)
    result = measure_point(w, point, Options(policy=FAST.policy, profile_dir=str(tmp_path)))
    profiled = result.extra["profile"]
    assert profiled["trace"] == str(tmp_path / profile_file_name(point))
    trace = json.loads((tmp_path / profile_file_name(point)).read_text())
    assert any(e.get("name") == "aten::sqrt" for e in trace["traceEvents"])
    top = {op["name"]: op for op in profiled["top"]}
    assert top["aten::sqrt"]["calls"] == profiled["calls"] >= 10
    # The timed samples came first: profiling never adds to them.
    assert result.samples_s and result.stop_reason


def test_profile_file_name_is_safe_and_distinct():
    suite = Suite("s")
    w = suite.workload("w", setup=lambda c: c.uniform(), variants=[Variant("a/b [x]", abs)],
                       sizes=[4, 8])  # fmt: skip
    names = {profile_file_name(p) for p in w.points()}
    assert len(names) == 2
    assert all("/" not in n and "[" not in n and n.endswith(".json") for n in names)


def test_compile_time_is_the_first_call_recorded_apart_from_the_samples(monkeypatch):
    calls: list[str] = []

    def fake_compile(fn, dynamic=None):
        assert dynamic is False  # specialised on the point's shapes

        def compiled(*args):
            calls.append("first" if not calls else "later")
            return fn(*args)

        return compiled

    monkeypatch.setattr(torch, "compile", fake_compile)
    suite = Suite("s")
    w = suite.workload(
        "w",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[Variant("compiled", torch.sqrt, compile=True)],
        sizes=[16],
    )
    result = measure_point(w, _point(w), FAST)
    assert result.status == "ok", result.reason
    assert "compile_s" in result.extra and result.extra["compile_s"] >= 0
    assert calls[0] == "first" and len(calls) > 2  # compile call, check call, then warm-up
