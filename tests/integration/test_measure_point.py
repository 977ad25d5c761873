"""measure_point in-process on real tensors: cache modes, in-place, NumPy, skips."""

import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

from benchbench import Suite, Variant
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy

FAST = Policy(max_time_s=0.1, min_time_s=0.01, warmup_min_s=0.01)


def _workload(**kwargs):
    suite = Suite("mp")
    return suite.workload(
        "sqrt",
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[
            Variant("torch.sqrt", torch.sqrt),
            Variant("x.sqrt_()", lambda x: x.sqrt_(), inplace=True),
            Variant("numpy.sqrt", np.sqrt, numpy=True),
            Variant("float64 only", torch.sqrt, dtypes=("float64",)),
        ],
        sizes=[4096],
        bytes=lambda p: 2 * p.numel * p.itemsize,
        **kwargs,
    )


def _point(workload, variant, **changes):
    point = next(p for p in workload.points() if p.variant == variant)
    return replace(point, **changes)


@pytest.mark.parametrize("cache", ["warm", "cold", "rotate"])
def test_cache_modes_are_recorded_and_cold_takes_one_call_per_sample(cache):
    workload = _workload()
    # The cap leaves room for min_samples on a stalled machine: cold mode writes over 2x
    # the LLC before every sample, rotate cycles copies spanning as much, and in CI a
    # warm point under a 0.1 s cap stopped at 2 samples of 0.7 s each. The stopping
    # rule's caps are tested on a fake clock (tests/unit/test_engine.py).
    policy = replace(FAST, max_time_s=2.0)
    result = measure_point(workload, _point(workload, "torch.sqrt"), Options(policy, cache=cache))
    assert result.status == "ok", result.reason
    assert result.cache_mode == cache
    assert len(result.samples_s) >= FAST.min_samples
    if cache == "cold":
        assert result.calls_per_sample == 1


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_in_place_variant_is_restored_untimed_and_records_how(cache):
    workload = _workload()
    # cold and rotate make every sample slower (an eviction; copies spanning twice the
    # last-level cache): their cap leaves room for min_samples on a loaded machine too.
    policy = replace(FAST, max_time_s=2.0) if cache in ("cold", "rotate") else FAST
    result = measure_point(workload, _point(workload, "x.sqrt_()"), Options(policy, cache=cache))
    assert result.status == "ok", result.reason
    note = result.extra["inplace"]
    assert note.startswith("restored untimed before each sample: ")
    assert ("evicted after the restore" in note) == (cache == "cold")
    # one call per restored copy: the calls per sample are the copies
    assert result.extra["inplace_copies"] == result.calls_per_sample >= 1
    assert "restore" not in result.extra  # nothing measured to be subtracted
    assert not any("restore" in w for w in result.warnings)
    assert result.max_rel_error is not None and result.max_rel_error < 1e-6


def test_output_lifetime_is_recorded_from_the_run_the_variant_or_the_workload():
    workload = _workload()
    point = _point(workload, "torch.sqrt")
    assert measure_point(workload, point, Options(FAST)).extra["outputs"] == "keep"
    dropped = measure_point(workload, point, Options(FAST, outputs="drop"))
    assert dropped.status == "ok" and dropped.extra["outputs"] == "drop"
    declared = _workload(outputs="drop")
    assert measure_point(declared, point, Options(FAST)).extra["outputs"] == "drop"
    assert measure_point(declared, point, Options(FAST, outputs="keep")).extra["outputs"] == "keep"


def test_numpy_variant_is_checked_and_skipped_off_the_cpu():
    workload = _workload()
    ok = measure_point(workload, _point(workload, "numpy.sqrt"), Options(FAST))
    assert ok.status == "ok" and ok.max_rel_error is not None
    skipped = measure_point(workload, _point(workload, "numpy.sqrt", device="cuda"), Options(FAST))
    assert skipped.status == "skipped"
    assert skipped.reason in ("CUDA is not available",) or "CPU only" in str(skipped.reason)


def test_variant_dtype_restriction_skips_with_the_reason():
    workload = _workload()
    result = measure_point(workload, _point(workload, "float64 only"), Options(FAST))
    assert result.status == "skipped"
    assert result.reason == "variant 'float64 only' supports float64 only"


def test_peak_memory_sees_the_output_allocation():
    workload = _workload()
    result = measure_point(workload, _point(workload, "torch.sqrt"), Options(FAST))
    # one float32 output of 4096 elements is allocated by torch.sqrt
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes >= 4096 * 4


def test_the_timed_process_runs_no_telemetry_thread():
    # Telemetry is the runner's (benchbench.run.observed): measuring starts no thread here.
    workload = _workload()
    before = threading.active_count()
    result = measure_point(workload, _point(workload, "torch.sqrt"), Options(FAST))
    assert result.status == "ok" and result.telemetry is None
    assert threading.active_count() == before
