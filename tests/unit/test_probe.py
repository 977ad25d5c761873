"""Hardware probe: plateau detection, OS cache parsing, roofline, CUDA logic on a fake.

Nothing here asserts a magnitude read from a real clock: the detection and roofline tests
use synthetic curves, the CUDA tests a fake ``torch`` whose device clock advances by a
known amount per operation, and the one real run of the probe checks structure only.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from benchbench.analysis.roofline import bandwidth_at, ceiling_for
from benchbench.core.errors import MeasurementError, StoreError, UsageError
from benchbench.machine.caches import parse_size, read_os_caches
from benchbench.machine.probe import (
    PROFILE_VERSION,
    CacheLevel,
    OsCache,
    Profile,
    detect_cache_levels,
    disturbed_points,
    run_probe,
)
from benchbench.machine.probe_bandwidth import PASS_BYTES
from benchbench.machine.probe_cuda import best_seconds_per_call, measure_cuda_extras

MIB = 1 << 20
SIZES = [int(s) for s in np.geomspace(4096, 256 * MIB, 49)]  # three per octave, as probed


def stepped_curve(
    steps: list[tuple[float, float]], last: float, *, noise: float = 0.0, seed: int = 0
) -> list[tuple[int, float]]:
    """Plateaus ``(bytes_per_s, up_to_bytes)`` with smooth drops centred on each boundary,
    a 5 µs per-call overhead in front (like torch's), and multiplicative noise."""
    rng = np.random.default_rng(seed)
    out = []
    for ws in SIZES:
        logbw = math.log(last)
        for level, (bw, boundary) in enumerate(steps):
            below = steps[level + 1][0] if level + 1 < len(steps) else last
            # logistic in log2(size), a quarter octave wide: the drop spans ~1.5 octaves
            weight = 1 / (1 + math.exp((math.log2(ws) - math.log2(boundary)) / 0.25))
            logbw += weight * (math.log(bw) - math.log(below))
        bw_ws = math.exp(logbw)
        seconds = 5e-6 + ws / bw_ws
        out.append((ws, ws / seconds * math.exp(rng.normal(0, noise))))
    return out


def test_detects_known_steps_at_the_right_sizes() -> None:
    curve = stepped_curve([(40e9, 1 * MIB), (20e9, 32 * MIB)], 9e9)
    levels = detect_cache_levels(curve)
    assert len(levels) == 2
    assert levels[0].size_bytes == pytest.approx(1 * MIB, rel=0.15)
    assert levels[1].size_bytes == pytest.approx(32 * MIB, rel=0.15)
    assert levels[0].drop_start_bytes < 1 * MIB < levels[0].drop_end_bytes
    assert levels[1].drop_start_bytes < 32 * MIB < levels[1].drop_end_bytes
    assert levels[1].bytes_per_s_after == pytest.approx(9e9, rel=0.05)


def test_detection_survives_noise_and_an_outlier() -> None:
    curve = stepped_curve([(40e9, 1 * MIB), (20e9, 32 * MIB)], 9e9, noise=0.03, seed=7)
    curve[40] = (curve[40][0], curve[40][1] / 3)  # one preempted point on the memory plateau
    levels = detect_cache_levels(curve)
    assert len(levels) == 2
    assert levels[0].size_bytes == pytest.approx(MIB, rel=0.25)
    assert levels[1].size_bytes == pytest.approx(32 * MIB, rel=0.25)


def test_a_flat_step_inside_a_drop_does_not_split_it() -> None:
    # seen on this machine: 31 GB/s at 0.5 MiB, 25 at 0.79, 24.4 at 1.0, 18.8 at 1.26
    values = [31e9] * 6 + [25e9, 24.4e9] + [18.8e9] * 6
    curve = list(zip(SIZES[20:34], values, strict=True))
    levels = detect_cache_levels(curve)
    assert len(levels) == 1
    assert levels[0].drop_start_bytes == SIZES[25] and levels[0].drop_end_bytes == SIZES[28]
    assert levels[0].bytes_per_s_before == pytest.approx(31e9)
    assert levels[0].bytes_per_s_after == pytest.approx(18.8e9)


def test_small_drops_flat_curves_and_short_curves_give_nothing() -> None:
    assert detect_cache_levels(stepped_curve([(40e9, 1 * MIB)], 36e9)) == ()  # 1.1x: too small
    assert detect_cache_levels([(s, 10e9) for s in SIZES]) == ()
    assert detect_cache_levels([(4096, 1e9), (8192, 2e9), (16384, 1e9)]) == ()
    # a drop that bounces straight back is noise, not a cache
    bounce = [(s, 10e9) for s in SIZES]
    bounce[30:32] = [(SIZES[30], 6e9), (SIZES[31], 6e9)]
    assert detect_cache_levels(bounce) == ()


def test_disturbed_points_flags_a_sunk_run_not_a_cache_drop() -> None:
    values = [40.0] * 8 + [20.0] * 8
    assert disturbed_points(values) == []  # a step is not a disturbance
    values[3] = 5.0
    values[12] = 2.0
    assert disturbed_points(values) == [3, 12]


def test_parse_size_reads_sysfs_and_lscpu_forms() -> None:
    assert parse_size("32K") == 32768
    assert parse_size("36608K") == 36608 * 1024
    assert parse_size("35.8 MiB") == round(35.8 * MIB)
    assert parse_size("1 GiB") == 1 << 30
    assert parse_size("lots") is None


def test_read_os_caches_from_sysfs(tmp_path: Path) -> None:
    for i, (level, kind, size) in enumerate(
        [
            (1, "Data", "32K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "1024K"),
            (3, "Unified", "36608K"),
        ]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert read_os_caches(tmp_path) == (
        OsCache(1, "Data", 32768),
        OsCache(2, "Unified", MIB),
        OsCache(3, "Unified", 36608 * 1024),
    )


def test_read_os_caches_falls_back_to_lscpu_per_instance(tmp_path: Path) -> None:
    lscpu = """L1d cache:  64 KiB (2 instances)
L1i cache:                               64 KiB (2 instances)
L2 cache:                                2 MiB (2 instances)
L3 cache:                                35.8 MiB (1 instance)
"""
    assert read_os_caches(tmp_path / "missing", lscpu) == (
        OsCache(1, "Data", 32768),
        OsCache(2, "Unified", MIB),
        OsCache(3, "Unified", round(35.8 * MIB)),
    )
    assert read_os_caches(tmp_path / "missing", "nothing here") == ()


def make_profile(**changes: Any) -> Profile:
    fields: dict[str, Any] = {
        "device": "cpu",
        "threads": 2,
        "bandwidth": {
            "read": ((4096, 1e9), (MIB, 40e9), (64 * MIB, 10e9)),
            "copy": ((4096, 2e9), (MIB, 30e9), (64 * MIB, 12e9)),
        },
        "cache_levels": (CacheLevel(MIB, MIB // 2, 2 * MIB, 40e9, 20e9),),
        "os_caches": (OsCache(2, "Unified", MIB),),
        "peak_flop_per_s": {"float32": 200e9, "float64": 100e9},
        "memory_bytes_per_s": {"read": 10e9, "copy": 12e9},
        "cache_bytes_per_s": {"read": 40e9, "copy": 30e9},
        "timer_resolution_s": 1e-9,
        "timer_observed_resolution_s": 5e-8,
        "timer_overhead_s": 6e-8,
        "duration_s": 30.0,
    }
    fields.update(changes)
    return Profile(**fields)


def test_profile_round_trips_through_json() -> None:
    profile = make_profile(extra={"launch_latency_s": 5e-6}, repeats=3, min_call_bytes=16 * MIB)
    doc = json.loads(json.dumps(profile.to_dict()))
    assert doc["profile_version"] == PROFILE_VERSION == 2
    assert (doc["repeats"], doc["min_call_bytes"]) == (3, 16 * MIB)
    assert Profile.from_dict(doc) == profile
    assert profile.peak_memory_bytes_per_s == 12e9
    assert profile.peak_cache_bytes_per_s == 40e9


def test_a_version_1_profile_reads_as_one_repeat_of_one_pass_per_call() -> None:
    doc = make_profile(repeats=3, min_call_bytes=16 * MIB).to_dict()
    old = {k: v for k, v in doc.items() if k not in ("repeats", "min_call_bytes")}
    profile = Profile.from_dict({**old, "profile_version": 1})
    assert (profile.repeats, profile.min_call_bytes) == (1, 0)
    assert profile.bandwidth == make_profile().bandwidth
    with pytest.raises(StoreError, match="malformed"):
        Profile.from_dict(old)  # version 2 without them is not a profile this code wrote


def test_profile_from_dict_rejects_other_versions_and_malformed_documents() -> None:
    doc = make_profile().to_dict()
    with pytest.raises(StoreError, match="profile_version 99"):
        Profile.from_dict({**doc, "profile_version": 99})
    with pytest.raises(StoreError, match="malformed"):
        Profile.from_dict({k: v for k, v in doc.items() if k != "bandwidth"})
    with pytest.raises(StoreError, match="malformed"):
        Profile.from_dict({**doc, "threads": "two"})


def test_bandwidth_at_interpolates_in_log_log_and_takes_the_best_op() -> None:
    profile = make_profile()
    assert bandwidth_at(profile, MIB) == pytest.approx(40e9)  # read beats copy in cache
    assert bandwidth_at(profile, 64 * MIB) == pytest.approx(12e9)  # copy beats read in DRAM
    # halfway in log-size between 1 MiB and 64 MiB (8 MiB): geometric means
    assert bandwidth_at(profile, 8 * MIB) == pytest.approx(
        max(math.sqrt(40e9 * 10e9), math.sqrt(30e9 * 12e9))
    )
    assert bandwidth_at(profile, 1 << 40) == pytest.approx(12e9)  # held beyond the range


def test_ceiling_memory_bound_copy_and_compute_bound_matmul() -> None:
    profile = make_profile()
    copy = ceiling_for(
        profile, bytes_per_call=2 * 64 * MIB, flop_per_call=0, working_set_bytes=64 * MIB
    )
    assert (copy.kind, copy.value) == ("memory", pytest.approx(12e9))
    n = 2048  # 2 n^3 flop over 3 n^2 * 4 bytes: intensity 341 flop/byte
    mm = ceiling_for(profile, 12 * n * n, 2 * n**3, 12 * n * n)
    assert mm.kind == "compute"
    assert mm.value == 200e9
    assert mm.intensity_flop_per_byte == pytest.approx(n / 6)
    mm64 = ceiling_for(profile, 24 * n * n, 2 * n**3, 24 * n * n, dtype="float64")
    assert mm64.value == 100e9


def test_ceiling_switches_at_the_ridge_point() -> None:
    profile = make_profile()
    # In DRAM (12 GB/s) the ridge is at 200e9 / 12e9 = 16.7 flop/byte.
    below = ceiling_for(profile, 1e9, 16e9, 64 * MIB)
    above = ceiling_for(profile, 1e9, 17e9, 64 * MIB)
    assert (below.kind, above.kind) == ("memory", "compute")
    assert below.attainable_flop_per_s == pytest.approx(16 * 12e9)
    # The same intensity in L2 (40 GB/s) is compute-bound: the working set matters.
    assert ceiling_for(profile, 1e9, 6e9, MIB).kind == "compute"
    assert ceiling_for(profile, 1e9, 4e9, MIB).kind == "memory"


def test_ceiling_edge_cases() -> None:
    profile = make_profile()
    assert ceiling_for(profile, 0, 1e9, MIB).kind == "compute"
    # an unmeasured dtype falls back to the best measured peak (float32's 200 GFLOP/s)
    assert ceiling_for(profile, 1, 1e6, MIB, dtype="bfloat16").value == 200e9
    with pytest.raises(MeasurementError, match="not both 0"):
        ceiling_for(profile, 0, 0, MIB)
    with pytest.raises(MeasurementError, match="bytes_per_call >= 0"):
        ceiling_for(profile, -1, 5, MIB)
    with pytest.raises(MeasurementError, match="no bandwidth curve"):
        ceiling_for(make_profile(bandwidth={}), 1, 1, MIB)


def test_best_seconds_per_call_grows_the_block_to_1ms_and_keeps_the_best() -> None:
    seen: list[int] = []
    slow = iter([1.0, 1.0, 1.0, 1.0, 0.9, 1.2])  # per-block slowdowns after calibration

    def run_block(calls: int) -> float:
        seen.append(calls)
        base = calls * 2e-6 + 1e-5  # 2 µs per call plus 10 µs per block
        return base * (next(slow) if calls == 512 and len(seen) > 10 else 1.0)

    per_call = best_seconds_per_call(run_block, blocks=5)
    assert seen[:10] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]  # 512 calls: first >= 1 ms
    assert seen[10:] == [512] * 5
    assert per_call == pytest.approx(0.9 * (512 * 2e-6 + 1e-5) / 512)


class FakeCuda:
    """A ``torch.cuda`` stand-in whose device clock (ms) advances as fake work is queued."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.syncs = 0
        self.current = "cuda:0"
        self.synced: set[object] = set()

    def Event(self, enable_timing: bool = False) -> Any:
        assert enable_timing
        cuda = self
        event = SimpleNamespace(at=None)
        event.record = lambda: setattr(event, "at", cuda.now_ms)
        event.elapsed_time = lambda end: end.at - event.at
        return event

    def synchronize(self, device: object = None) -> None:
        self.syncs += 1
        self.synced.add(device)

    @contextlib.contextmanager
    def device(self, device: object) -> Iterator[None]:
        before, self.current = self.current, str(device)
        try:
            yield
        finally:
            self.current = before


RATES = {  # bytes/s per (direction, pinned)
    ("h2d", True): 12e9,
    ("h2d", False): 6e9,
    ("d2h", True): 13e9,
    ("d2h", False): 5e9,
}


class FakeTensor:
    def __init__(self, cuda: FakeCuda, nbytes: int, device: str, pinned: bool) -> None:
        self.cuda, self.nbytes, self.device, self.pinned = cuda, nbytes, device, pinned
        if device.startswith("cuda"):
            cuda.devices.append(device)

    def copy_(self, src: FakeTensor, non_blocking: bool = False) -> FakeTensor:
        on_gpu = self.device.startswith("cuda")
        host = src if on_gpu else self
        direction = "h2d" if on_gpu else "d2h"
        self.cuda.now_ms += self.nbytes / RATES[(direction, host.pinned)] * 1e3
        return self

    def fill_(self, value: float) -> FakeTensor:
        return self

    def add_(self, value: float) -> FakeTensor:
        self.cuda.now_ms += 5e-3  # 5 µs per tiny kernel
        return self


def fake_torch() -> Any:
    cuda = FakeCuda()

    def empty(n: int, dtype: str, device: str = "cpu", pin_memory: bool = False) -> FakeTensor:
        return FakeTensor(cuda, n, device, pin_memory)

    cuda.devices = []  # type: ignore[attr-defined]  # where each GPU tensor was made
    return SimpleNamespace(
        cuda=cuda, empty=empty, uint8="uint8", float32="float32", device=lambda d: d
    )


def test_cuda_extras_compute_bandwidth_from_bytes_and_event_milliseconds() -> None:
    torch_mod = fake_torch()
    host_ns = iter(range(0, 10**9, 700))  # every host clock read is 700 ns after the last
    extras = measure_cuda_extras(torch_mod, clock_ns=lambda: next(host_ns))
    for (direction, pinned), rate in RATES.items():
        key = f"{direction}_{'pinned' if pinned else 'pageable'}_bytes_per_s"
        assert extras[key] == pytest.approx(rate, rel=1e-9)
    assert extras["launch_latency_s"] == pytest.approx(5e-6, rel=1e-9)
    assert extras["sync_latency_s"] == pytest.approx(700e-9)
    assert torch_mod.cuda.syncs > 200  # one per timed block, plus the latency loop


def test_cuda_extras_of_cuda_1_measure_gpu_1() -> None:
    torch_mod = fake_torch()
    seen: list[str] = []
    empty = torch_mod.empty

    def watched(*args: Any, **kw: Any) -> Any:
        seen.append(torch_mod.cuda.current)  # the device current when tensors are made
        return empty(*args, **kw)

    torch_mod.empty = watched
    measure_cuda_extras(torch_mod, device="cuda:1", quick=True)
    assert set(torch_mod.cuda.devices) == {"cuda:1"}  # every GPU tensor on GPU 1
    assert torch_mod.cuda.synced == {"cuda:1"}  # and every synchronize of GPU 1
    assert set(seen) == {"cuda:1"} and torch_mod.cuda.current == "cuda:0"  # restored


def test_run_probe_rejects_unknown_and_absent_devices() -> None:
    with pytest.raises(UsageError, match="unknown device 'tpu'"):
        run_probe("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="not available"):
            run_probe("cuda")


def test_quick_probe_on_this_cpu_has_the_full_structure() -> None:
    messages: list[str] = []
    profile = run_probe(quick=True, progress=messages.append)
    assert profile.device == "cpu"
    assert profile.threads == torch.get_num_threads()
    ops = {"read", "write", "copy", "update"}
    assert set(profile.bandwidth) == ops | {f"{op}@1t" for op in ops}
    assert profile.has_update_curve
    for points in profile.bandwidth.values():
        sizes = [b for b, _ in points]
        assert sizes == sorted(sizes) and sizes[0] == 4096 and len(sizes) >= 10
        assert all(v > 0 and math.isfinite(v) for _, v in points)
    assert {"float32", "float64"} <= set(profile.peak_flop_per_s)
    assert set(profile.memory_bytes_per_s) == set(profile.cache_bytes_per_s) == ops
    assert profile.timer_overhead_s > 0 and profile.timer_observed_resolution_s > 0
    assert (profile.repeats, profile.min_call_bytes) == (3, PASS_BYTES)
    assert any(m.startswith("bandwidth: read") for m in messages)
    assert any("float32" in m for m in messages)
    assert Profile.from_dict(json.loads(json.dumps(profile.to_dict()))) == profile
