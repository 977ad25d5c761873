"""Curves, fits and crossovers from stored rows (synthetic rows: no clock)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchbench.analysis.curves import (
    CurveKey,
    analyze,
    crossovers_frame,
    curves_from_rows,
    fit_of_curve,
    fit_run,
    with_run,
)

SIZES = [2**k for k in range(10, 24, 2)]


def row(
    size: int,
    median_s: float,
    *,
    workload: str = "sqrt",
    variant: str = "torch.sqrt",
    device: str = "cpu",
    dtype: str = "float32",
    status: str = "ok",
    bytes_per_elem: float | None = 8.0,
    flop: float | None = None,
) -> dict[str, object]:
    return {
        "suite": "s",
        "workload": workload,
        "variant": variant,
        "device": device,
        "dtype": dtype,
        "size": size,
        "params": {},
        "status": status,
        "median_s": median_s if status == "ok" else None,
        "q1_s": median_s * 0.98 if status == "ok" else None,
        "q3_s": median_s * 1.03 if status == "ok" else None,
        "bytes_per_call": bytes_per_elem * size if bytes_per_elem else None,
        "flop_per_call": flop if flop is not None else (size if bytes_per_elem else None),
        "items_per_call": size if bytes_per_elem else None,
    }


def curve_rows(t0: float, rate: float, noise: float = 0.0, seed: int = 0, **kw):
    rng = np.random.default_rng(seed)
    out = []
    for n in SIZES:
        t = t0 + 8.0 * n / rate
        out.append(row(n, t * (1 + noise * rng.standard_normal()), **kw))
    return out


@pytest.mark.parametrize("seed", range(10))
def test_fit_recovers_t0_and_rate_within_10_percent_from_rows(seed: int) -> None:
    rows = curve_rows(5e-6, 20e9, noise=0.05, seed=seed)
    (curve,) = curves_from_rows(rows)
    fit = fit_of_curve(curve).fit
    assert fit is not None
    assert fit.work_unit == "bytes"  # bytes and flop fit alike; ties go to bytes
    assert fit.t0_s == pytest.approx(5e-6, rel=0.10)
    assert fit.rate_per_s == pytest.approx(20e9, rel=0.10)


def test_matmul_fits_in_flop_not_bytes() -> None:
    rows = []
    for n in (32, 64, 128, 256, 512):
        flop = 2.0 * n**3
        rows.append(
            {
                **row(n * n, 2e-6 + flop / 50e9, workload="matmul", variant="mm"),
                "bytes_per_call": 12.0 * n * n,
                "flop_per_call": flop,
                "items_per_call": None,
            }
        )
    fit = fit_of_curve(curves_from_rows(rows)[0]).fit
    assert fit is not None and fit.work_unit == "flop"
    assert fit.rate_per_s == pytest.approx(50e9, rel=1e-3)


def test_curves_group_rows_skip_failures_and_keep_lowest_repeat() -> None:
    rows = [
        row(1024, 2e-6),
        row(1024, 1e-6),  # the same size measured twice: the faster one is kept
        row(4096, 3e-6),
        row(4096, 0.0, status="error"),
        row(1024, 4e-6, variant="other"),
    ]
    curves = curves_from_rows(rows)
    assert [c.key.variant for c in curves] == ["torch.sqrt", "other"]
    assert curves[0].sizes == [1024, 4096]
    assert curves[0].medians_s == [1e-6, 3e-6]


def test_no_work_model_and_too_few_sizes_say_why() -> None:
    few = fit_of_curve(curves_from_rows([row(1024, 1e-6), row(4096, 2e-6)])[0])
    assert few.fit is None and few.reason == "needs 3 sizes to fit, has 2"
    bare = [row(n, 1e-6 * (1 + i), bytes_per_elem=None) for i, n in enumerate(SIZES)]
    none = fit_of_curve(curves_from_rows(bare)[0])
    assert none.fit is None and none.reason == "no work model"


def test_crossover_between_variants_found_with_the_faster_side() -> None:
    # Low overhead and slow rate versus high overhead and fast rate: equal times where
    # 1e-6 + 8n/1e9 == 2e-5 + 8n/1e10, i.e. n = 1.9e-5 / (8e-9 - 8e-10) ≈ 2639.
    small = curve_rows(1e-6, 1e9, variant="cheap")
    big = curve_rows(2e-5, 1e10, variant="fast")
    analysis = analyze(small + big)
    (x,) = analysis.crossovers
    assert x.differs == "variant"
    assert x.faster_below.variant == "cheap" and x.faster_above.variant == "fast"
    expected = 1.9e-5 / (8e-9 - 8e-10)
    assert 1024 < x.size < 4096  # between the two measured sizes it lies between
    assert x.model_size == pytest.approx(expected, rel=1e-3)
    frame = crossovers_frame(small + big)
    assert frame.loc[0, "faster_above"] == "fast" and frame.loc[0, "differs"] == "variant"


def test_crossover_between_devices_but_not_across_dtypes() -> None:
    cpu = curve_rows(1e-6, 1e9, variant="v")
    gpu = curve_rows(2e-5, 1e10, variant="v", device="cuda")
    other_dtype = curve_rows(2e-5, 1e10, variant="w", dtype="float64")
    analysis = analyze(cpu + gpu + other_dtype)
    assert [x.differs for x in analysis.crossovers] == ["device"]
    assert analysis.crossovers[0].faster_above.device == "cuda"


def test_differences_within_min_effect_are_not_crossovers() -> None:
    base = curve_rows(1e-6, 1e9, variant="a")
    # Alternately 2 % faster and 2 % slower: noise, not a swap of order.
    wobble = [
        {**r, "variant": "b", "median_s": r["median_s"] * (1.02 if i % 2 else 0.98)}
        for i, r in enumerate(base)
    ]
    assert analyze(base + wobble).crossovers == ()
    assert len(analyze(base + wobble, min_effect=0.01).crossovers) == 1


def test_sizes_within_min_effect_locate_the_crossing_between_adjacent_sizes() -> None:
    sizes = [2**10, 2**11, 2**12, 2**13, 2**14]
    ratios = [0.5, 0.8, 0.98, 1.03, 2.0]  # b / a: anchors at 0.5, 0.8 and 2.0
    rows = [row(n, 1e-6, variant="a") for n in sizes]
    rows += [row(n, 1e-6 * r, variant="b") for n, r in zip(sizes, ratios, strict=True)]
    (x,) = analyze(rows).crossovers
    # Where log(ratio) changes sign, between 2^12 and 2^13 — not anywhere between the
    # anchors 2^11 and 2^14, as interpolating between decisive sizes only would put it.
    t = math.log(0.98) / (math.log(0.98) - math.log(1.03))
    assert x.size == pytest.approx(2**12 * 2**t)
    assert x.faster_below.variant == "b" and x.more == 0


def test_curves_of_different_runs_stay_apart() -> None:
    rows = with_run({"id": "r1", "environment_id": "e1"}, curve_rows(1e-6, 1e9))
    rows += with_run({"id": "r2", "environment_id": "e1"}, curve_rows(1e-6, 2e9))
    curves = curves_from_rows(rows)
    assert [c.key.run_id for c in curves] == ["r1", "r2"]
    assert analyze(rows).crossovers == ()  # runs are not variants


def test_fit_run_frame_has_one_row_per_curve() -> None:
    rows = curve_rows(2e-5, 1e10, variant="a") + curve_rows(1e-6, 1e9, variant="b")
    rows += [row(1024, 1e-6, workload="sum", bytes_per_elem=None)]
    frame = fit_run(rows)
    assert list(frame["variant"]) == ["a", "b", "torch.sqrt"]
    assert frame.loc[0, "rate_per_s"] == pytest.approx(1e10, rel=1e-3)
    assert frame.loc[0, "work_unit"] == "bytes" and frame.loc[0, "crossovers"] == 1
    assert math.isnan(frame.loc[2, "t0_s"]) and frame.loc[2, "note"].startswith("needs 3")


def test_key_differs_only_in_one_field() -> None:
    a = CurveKey("s", "w", "v1", "cpu", "float32")
    assert a.differs_only_in(CurveKey("s", "w", "v2", "cpu", "float32")) == "variant"
    assert a.differs_only_in(CurveKey("s", "w", "v1", "cuda", "float32")) == "device"
    assert a.differs_only_in(CurveKey("s", "w", "v2", "cuda", "float32")) is None
    assert a.differs_only_in(CurveKey("s", "w", "v2", "cpu", "float64")) is None
