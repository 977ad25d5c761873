"""Claims evaluation on synthetic stored rows: verdicts follow the numbers, never a guess."""

from __future__ import annotations

import math
from typing import Any

import pytest

from benchbench.analysis.claims import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURED,
    UNMEASURABLE,
    Claim,
    Finding,
    Rows,
    band_verdict,
    claims_of,
    evaluate,
    ratio_of_medians,
    speedup,
)
from benchbench.analysis.compare import compare_point
from benchbench.analysis.verdict import estimate
from benchbench.suite.load import builtin_suites, load_suite


def row(workload: str, variant: str, median: float, **kw: Any) -> dict[str, Any]:
    """One stored measurement as Store.measurements returns it (joined with its benchmark)."""
    half = kw.pop("half_width", 0.01) * median
    out = {
        "suite": kw.pop("suite", "s"),
        "workload": workload,
        "variant": variant,
        "device": kw.pop("device", "cpu"),
        "dtype": kw.pop("dtype", "float32"),
        "size": kw.pop("size", 1000),
        "params": kw.pop("params", {}),
        "status": kw.pop("status", "ok"),
        "reason": kw.pop("reason", None),
        "median_s": median,
        # 41 evenly spread samples: their median is ``median``, their range +-half.
        "samples_s": [median + half * k / 20 for k in range(-20, 21)],
        "calls_per_sample": 1,
        "ci_low_s": median - half,
        "ci_high_s": median + half,
        "peak_memory_bytes": kw.pop("peak", None),
        "max_rel_error": kw.pop("max_rel_error", None),
        "max_abs_error": kw.pop("max_abs_error", None),
        "extra": kw.pop("extra", {}),
        "bytes_per_s": kw.pop("bytes_per_s", None),
        # Instructions per call (``run --metric instructions``), one instrumented process.
        "instructions_per_call": kw.pop("instructions", None),
    }
    out["instruction_counts"] = (
        [out["instructions_per_call"]] if out["instructions_per_call"] else None
    )
    if not kw.pop("timed", True):  # counted only: ok, no samples, no median
        out.update(samples_s=[], median_s=None, ci_low_s=None, ci_high_s=None)
    assert not kw, kw
    return out


def test_ratio_of_medians_is_the_one_estimate_of_the_verdict():
    slow, fast = row("w", "a", 10.0), row("w", "b", 2.0)
    ratio, (low, high) = ratio_of_medians(slow, fast)
    assert ratio == pytest.approx(5.0)
    same = estimate(fast["samples_s"], slow["samples_s"])
    assert (ratio, low, high) == (same.ratio, same.ci_low, same.ci_high)
    # +-1 % samples: the interval holds 5 and is far narrower than the +-2 % that the
    # two medians' own intervals would combine to.
    assert 4.9 < low < 5.0 < high < 5.1


@pytest.mark.parametrize(
    ("ci", "verdict"),
    [
        ((1.2, 1.4), HOLDS),
        ((0.8, 1.1), FAILS),
        ((1.6, 2.0), FAILS),
        ((1.1, 1.3), INCONCLUSIVE),
        ((1.4, 1.6), INCONCLUSIVE),
    ],
)
def test_band_verdict(ci, verdict):
    assert band_verdict(ci, 1.15, 1.5) == verdict


def test_speedup_holds_fails_or_is_inconclusive_from_the_stored_medians():
    check = speedup("loop", "slow", "fast", low=50, high=200)
    hundred = Rows((row("loop", "slow", 1e-2), row("loop", "fast", 1e-4)))
    finding = check(hundred)
    assert finding.verdict == HOLDS
    assert finding.value == pytest.approx(100.0)
    assert "slow / fast = 100x" in finding.figure
    assert check(Rows((row("loop", "slow", 1e-2), row("loop", "fast", 1e-3)))).verdict == FAILS
    wide = Rows((row("loop", "slow", 1e-2, half_width=0.5), row("loop", "fast", 2.2e-4)))
    assert check(wide).verdict == INCONCLUSIVE


def test_speedup_shows_the_instruction_ratio_beside_and_judges_by_time():
    check = speedup("loop", "slow", "fast", low=50, high=200)
    # 100x faster in time with the same instructions: the claim holds on time alone.
    slow, fast = row("loop", "slow", 1e-2, instructions=4e6), row("loop", "fast", 1e-4,
                                                                   instructions=2e6)  # fmt: skip
    finding = check(Rows((slow, fast)))
    assert finding.verdict == HOLDS and finding.value == pytest.approx(100.0)
    assert finding.instructions_ratio == 2.0
    assert finding.figure.endswith("; instructions slow / fast = 2x")
    # The ratio `benchbench compare` gives for the same two rows (base: the fast one).
    ids = {"benchmark_id": "b", "shape": [1000]}
    same = compare_point({**fast, **ids}, {**slow, **ids})
    assert finding.instructions_ratio == same.instructions_ratio
    (result,) = evaluate([Claim("X", "A", "t", "n", "s", ("loop",), check)], [slow, fast])
    assert result.to_dict()["instructions_ratio"] == 2.0
    untimed_count = check(Rows((row("loop", "slow", 1e-2), fast)))
    assert untimed_count.instructions_ratio is None and "instructions" not in untimed_count.figure


def test_a_run_that_only_counted_is_not_measured_with_the_command_that_times():
    claim = Claim("X", "A", "t", "n", "s", ("loop",), speedup("loop", "slow", "fast", low=2))
    rows = [row("loop", v, 1e-3, instructions=1e6, timed=False) for v in ("slow", "fast")]
    (result,) = evaluate([claim], rows)
    assert result.finding.verdict == NOT_MEASURED
    assert "did not time them (`--metric instructions`)" in result.finding.reason
    assert "run `benchbench run s --tag quick`" in result.finding.reason
    # One variant timed, the other only counted: the claim's own "no stored point".
    rows[0] = row("loop", "slow", 1e-3, instructions=1e6)
    (result,) = evaluate([claim], rows)
    assert result.finding.verdict == NOT_MEASURED
    assert "no stored point loop:fast" in result.finding.reason


def test_speedup_compares_the_same_size_and_uses_the_largest():
    rows = Rows(
        (
            row("w", "slow", 1.0, size=10),
            row("w", "fast", 1.0, size=10),
            row("w", "slow", 8.0, size=100),
            row("w", "fast", 2.0, size=100),
        )
    )
    assert speedup("w", "slow", "fast", low=1.0)(rows).value == pytest.approx(4.0)


def test_skipped_point_is_not_measurable_with_its_reason():
    rows = Rows(
        (
            row("w", "slow", 1.0),
            row("w", "slow", 1.0, device="cuda", status="skipped", reason="CUDA is not available"),
            row("w", "fast", 1.0, device="cuda", status="skipped", reason="CUDA is not available"),
        )
    )
    finding = speedup("w", "slow", "fast", low=1.0, device="cuda")(rows)
    assert finding.verdict == UNMEASURABLE
    assert "CUDA is not available" in finding.reason


def test_missing_suite_names_the_suite_and_tag_to_run():
    claim = Claim(
        "X-1", "C", "text", "needs", "overhead", ("row sum",), lambda rows: Finding(HOLDS)
    )
    (result,) = evaluate([claim], [row("other", "v", 1.0, suite="precision")])
    assert result.finding.verdict == NOT_MEASURED
    assert "benchbench run overhead --tag quick" in result.finding.reason
    doc = result.to_dict()
    assert doc["id"] == "X-1" and doc["verdict"] == NOT_MEASURED


def test_claim_and_finding_reject_bad_values():
    with pytest.raises(ValueError, match="section"):
        Claim("x", "E", "t", "n", "s", ("w",), lambda rows: Finding(HOLDS))
    with pytest.raises(ValueError, match="verdict"):
        Finding("probably")


def test_to_dict_drops_non_finite_numbers_for_json():
    claim = Claim("x", "A", "t", "n", "s", ("w",), lambda rows: Finding(HOLDS, value=math.inf))
    (result,) = evaluate([claim], [row("w", "v", 1.0)])
    assert result.to_dict()["value"] is None


def _claims() -> dict[str, Claim]:
    return {c.id: c for c in claims_of(builtin_suites().values())}


def test_builtin_suites_declare_a_claim_for_every_seeds_section():
    claims = _claims()
    assert {c.section for c in claims.values()} == {"A", "B", "C", "D"}
    for name in ("C-unbind", "C-sum", "A-float16-sqrt", "C-softmax", "D-bmm", "D-collectives"):
        assert name in claims
    for claim in claims.values():  # each claim points at workloads its suite declares
        suite = load_suite(builtin_suites()[claim.suite])
        for workload in claim.workloads:
            suite.get(workload)


def test_float16_sqrt_claim_reads_the_recorded_errors():
    claim = _claims()["A-float16-sqrt"]
    rows = [
        row("sqrt magnitude", "torch.sqrt", 1e-6, suite="precision", dtype=dtype,
            params={"magnitude": 1e-8}, max_rel_error=err)
        for dtype, err in (("float16", 1.0), ("float32", 8e-8))
    ]  # fmt: skip
    (result,) = evaluate([claim], rows)
    assert result.finding.verdict == HOLDS
    rows[0]["max_rel_error"] = 1e-3  # a float16 that kept the value: the claim fails
    (result,) = evaluate([claim], rows)
    assert result.finding.verdict == FAILS


def test_softmax_claim_needs_nan_at_89_but_not_at_88():
    claim = _claims()["C-softmax"]

    def rows(naive_at_88: int) -> list[dict[str, Any]]:
        out = []
        for variant, counts in (("naive exp / sum", (naive_at_88, 64)), ("max-subtracted", (0, 0))):
            for peak, count in zip((88.0, 89.0), counts, strict=True):
                out.append(row("softmax", variant, 1e-4, suite="precision",
                               params={"peak": peak}, extra={"nonfinite": count}))  # fmt: skip
        return out

    assert evaluate([claim], rows(0))[0].finding.verdict == HOLDS
    assert evaluate([claim], rows(3))[0].finding.verdict == FAILS


def test_broadcast_claim_needs_both_speed_and_memory():
    claim = _claims()["C-broadcast"]
    w = "tile vs broadcast"

    fwd, step = {"mode": "fwd"}, {"mode": "fwd_bwd"}

    def rows(peak_broadcast: int) -> list[dict[str, Any]]:
        return [
            row(w, "cat(tile) + Linear", 2e-3, suite="overhead", peak=4_000_000, params=fwd),
            row(w, "two Linears + broadcast", 1e-3, suite="overhead", peak=peak_broadcast,
                params=fwd),
            # The training step's points (the opposite outcome) are not what the claim reads.
            row(w, "cat(tile) + Linear", 1e-3, suite="overhead", peak=1_000, params=step),
            row(w, "two Linears + broadcast", 9e-3, suite="overhead", peak=9_000_000,
                params=step),
        ]  # fmt: skip

    assert evaluate([claim], rows(2_000_000))[0].finding.verdict == HOLDS
    assert evaluate([claim], rows(8_000_000))[0].finding.verdict == FAILS


def test_autocast_claim_reads_the_training_step():
    claim = _claims()["C-autocast"]
    w = "autocast step"

    def rows(step_s: float) -> list[dict[str, Any]]:
        # Forward and backward alone: autocast 4x slower; the step (fwd_bwd): ``step_s``.
        out = []
        for mode, autocast_s in (("fwd", 8e-3), ("bwd", 8e-3), ("fwd_bwd", step_s)):
            for device, variant in (("cpu", "autocast bfloat16"), ("cuda", "autocast float16")):
                for name, median in (("float32", 2e-3), (variant, autocast_s)):
                    params = {"mode": mode}
                    out.append(row(w, name, median, suite="precision", device=device,
                                   params=params))  # fmt: skip
        return out

    faster = evaluate([claim], rows(1e-3))[0].finding
    assert faster.verdict == HOLDS
    assert "CUDA float32/autocast float16 = 2x" in faster.figure
    assert "CPU bfloat16 autocast: float32/autocast = 2x" in faster.figure
    assert evaluate([claim], rows(4e-3))[0].finding.verdict == FAILS


def test_bmm_claim_holds_only_for_a_nonzero_difference():
    claim = _claims()["D-bmm"]
    zero = [row("bmm difference", "d", 1e-4, suite="precision", max_abs_error=0.0)]
    some = [row("bmm difference", "d", 1e-4, suite="precision", max_abs_error=1e-7)]
    assert evaluate([claim], zero)[0].finding.verdict == FAILS
    assert evaluate([claim], some)[0].finding.verdict == HOLDS
    # A run stored before the column kept the difference in ``extra``.
    old = [row("bmm difference", "d", 1e-4, suite="precision", extra={"max_abs_error": 1e-7})]
    assert evaluate([claim], old)[0].finding.verdict == HOLDS


def _sqrt(device: str, median: float, size: int, **kw: Any) -> dict[str, Any]:
    return row("sqrt", "torch.sqrt", median, suite="elementwise", device=device, size=size, **kw)


def test_devices_claim_without_a_size_on_both_devices_is_not_measurable_here():
    claim = _claims()["A-devices"]
    only_cuda = [_sqrt("cuda", 1e-5, 2**20), _sqrt("cpu", 1e-5, 2**10)]
    finding = evaluate([claim], only_cuda)[0].finding
    assert finding.verdict == UNMEASURABLE and "both a cpu and a cuda point" in finding.reason


def test_devices_claim_decides_from_the_intervals():
    claim = _claims()["A-devices"]

    def rows(large_cpu_s: float, half_width: float) -> list[dict[str, Any]]:
        return [
            _sqrt("cpu", 1e-6, 2**10), _sqrt("cuda", 1e-5, 2**10),  # CPU 10x faster small
            _sqrt("cpu", large_cpu_s, 2**24, half_width=half_width),
            _sqrt("cuda", 1e-4, 2**24, half_width=half_width),
        ]  # fmt: skip

    assert evaluate([claim], rows(4e-3, 0.01))[0].finding.verdict == HOLDS  # 40x apart
    assert evaluate([claim], rows(1e-3, 0.01))[0].finding.verdict == FAILS  # 10x at most
    # 18x measured, but each side +-30 %: the interval reaches below 17x.
    assert evaluate([claim], rows(1.8e-3, 0.3))[0].finding.verdict == INCONCLUSIVE


def test_devices_reachable_needs_mps_and_a_rocm_build_not_any_cuda():
    claim = _claims()["D-devices"]
    cuda = [_sqrt("cuda", 1e-5, 2**20)]
    nvidia = evaluate([claim], cuda, {"rocm": None, "gpus": ["NVIDIA H100"]})[0].finding
    assert nvidia.verdict == UNMEASURABLE
    assert "CUDA (not ROCm) build" in nvidia.reason
    mps_and_rocm = [_sqrt("mps", 1e-5, 2**20), *cuda]
    assert evaluate([claim], mps_and_rocm, {"rocm": "6.2"})[0].finding.verdict == HOLDS


def test_profiler_claim_reads_the_cpu_time_against_the_measured_interval():
    claim = _claims()["D-profiler"]

    def finding(cpu_s: float, device_s: float = 1e-3) -> Finding:
        top = [{"name": "aten::sqrt", "self_cpu_s": cpu_s, "self_device_s": device_s}]
        extra = {"profile": {"calls": 100, "top": top, "trace": "t.json"}}
        gpu = _sqrt("cuda", 1e-5, 2**20, extra=extra)  # 10 us per call, CI +-1 %
        return evaluate([claim], [gpu])[0].finding

    assert finding(1e-4).verdict == HOLDS  # 1 us per call on the CPU side: misreported
    assert finding(1e-3).verdict == FAILS  # 10 us per call: inside the interval
    assert finding(1e-4, device_s=0.0).verdict == UNMEASURABLE  # no CUDA activity


def test_a_speed_claim_whose_interval_straddles_one_is_inconclusive():
    claim = _claims()["C-autocast"]
    w, step = "autocast step", {"mode": "fwd_bwd"}
    rows = [
        row(w, "float32", 2.0e-3, suite="precision", device="cuda", params=step, half_width=0.2),
        row(w, "autocast float16", 1.9e-3, suite="precision", device="cuda", params=step,
            half_width=0.2),
    ]  # fmt: skip
    assert evaluate([claim], rows)[0].finding.verdict == INCONCLUSIVE
