"""The probe's bandwidth sweeps: passes per call, the repeated views, best of repeats.

Timings come from fake ``run_block`` functions that charge a fixed per-call overhead plus
bytes over a known rate; nothing here reads a real clock.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from benchbench.cli.probe import paired_caches
from benchbench.machine.hardware import CacheLevel, OsCache, Profile
from benchbench.machine.probe_bandwidth import (
    OPS,
    PASS_BYTES,
    SweepPoint,
    best_bandwidths,
    op_call,
    passes_for,
)

KIB, MIB = 1 << 10, 1 << 20
OVERHEAD_S = 5e-6  # torch's per-call cost, as measured on our machine
RATE = 50e9  # the cache's true bandwidth in these fakes


def model_block(bytes_per_call: int, log: list[int] | None = None) -> Callable[[int], float]:
    """A block of ``calls`` calls: each costs the overhead plus its bytes at ``RATE``."""

    def run_block(calls: int) -> float:
        if log is not None:
            log.append(calls)
        return calls * (OVERHEAD_S + bytes_per_call / RATE)

    return run_block


def test_passes_make_a_call_move_at_least_the_target() -> None:
    assert passes_for(4 * KIB, PASS_BYTES) == 4096
    assert passes_for(3000, 10_000) == 4  # 12,000 bytes: rounded up, never short
    assert passes_for(32 * MIB, PASS_BYTES) == 1  # big working sets: one pass, as before
    assert passes_for(4 * KIB, 0) == 1
    with pytest.raises(ValueError, match="working_set_bytes must be > 0, got 0"):
        passes_for(0, PASS_BYTES)


def test_many_passes_per_call_measure_the_cache_not_the_call_overhead() -> None:
    sizes = [4 * KIB, 64 * KIB, MIB, 16 * MIB]

    def sweep(min_call_bytes: int) -> list[float]:
        points = []
        for ws in sizes:
            nbytes = ws * passes_for(ws, min_call_bytes)
            points.append(SweepPoint(ws, nbytes, model_block(nbytes)))
        return best_bandwidths({"read": points}, repeats=1, blocks=1)["read"]

    one_pass = sweep(0)
    # One pass of 4 KiB: 5 µs of overhead against 82 ns of data, 0.8 GB/s "bandwidth".
    assert one_pass[0] == pytest.approx(4 * KIB / (OVERHEAD_S + 4 * KIB / RATE))
    assert one_pass[0] < 0.02 * RATE
    amortised = sweep(PASS_BYTES)
    # 16 MiB a call: the overhead is 5 µs of 340 µs, so every size reads within 2 % of
    # the true rate, the small ones included.
    for value in amortised:
        assert value == pytest.approx(PASS_BYTES / (OVERHEAD_S + PASS_BYTES / RATE))
        assert value > 0.98 * RATE


def test_each_point_keeps_its_best_over_repeats_of_the_whole_sweep() -> None:
    order: list[tuple[str, int]] = []
    # Per point, the slowdown of each successive timed block (after calibration).
    slowdowns = {("read", 0): [3.0, 1.0, 2.0], ("read", 1): [1.0, 4.0, 4.0]}
    slowdowns |= {("write", 0): [2.0, 2.0, 1.25], ("write", 1): [1.5, 1.1, 1.2]}
    calibrated: set[tuple[str, int]] = set()

    def runner(op: str, k: int) -> Callable[[int], float]:
        def run_block(calls: int) -> float:
            base = calls * 1e-3  # 1 ms a call: calibration stops at one call
            if (op, k) not in calibrated:
                calibrated.add((op, k))
                return base * 10  # the calibration block is slow: it must not count
            order.append((op, k))
            return base * slowdowns[(op, k)].pop(0)

        return run_block

    curves = {
        op: [SweepPoint(4096, 1_000_000, runner(op, k)) for k in range(2)]
        for op in ("read", "write")
    }
    rates = best_bandwidths(curves, repeats=3, blocks=1)
    # Repeats sweep every op and size before the next: a busy second hits one repeat.
    assert order == [("read", 0), ("read", 1), ("write", 0), ("write", 1)] * 3
    assert rates["read"] == pytest.approx([1e9, 1e9])
    assert rates["write"] == pytest.approx([1e9 / 1.25, 1e9 / 1.1])


def test_blocks_per_repeat_and_the_second_look_at_a_sunk_point() -> None:
    log: dict[int, list[int]] = {k: [] for k in range(7)}
    # A neighbour's load outlasts the calibration and both repeats of point 3.
    sunk = {3: [0.2] * 5 + [1.0] * 2}

    def runner(k: int) -> Callable[[int], float]:
        seen = 0

        def run_block(calls: int) -> float:
            nonlocal seen
            log[k].append(calls)
            speed = 1.0
            if calls == 4:  # the last calibration block (1, 2, 4 calls) and the timed ones
                speed = sunk[k][seen] if k in sunk else 1.0
                seen += 1
            return calls * 3e-4 / speed

        return run_block

    points = [SweepPoint(4096 << k, 1_000_000, runner(k)) for k in range(7)]
    rates = best_bandwidths({"copy": points}, repeats=2, blocks=2)["copy"]
    assert log[0] == [1, 2, 4] + [4] * 4  # calibrated once, then 2 repeats x 2 blocks
    assert log[3] == [1, 2, 4] + [4] * 4 + [4] * 2  # flagged: timed again, recovered
    assert rates == pytest.approx([1e6 / 3e-4] * 7)
    with pytest.raises(ValueError, match="repeats and blocks must be >= 1, got 0 and 2"):
        best_bandwidths({"copy": points}, repeats=0, blocks=2)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_repeated_views_do_every_pass_over_the_working_set(threads: int) -> None:
    src = torch.rand(4096)
    dst = torch.zeros(4096)
    ws = 4 * KIB  # 1024 floats
    read, nbytes = op_call("read", src, dst, ws, passes=7, threads=threads)
    assert nbytes == 7 * 4 * (1024 // threads) * threads
    totals = read()
    assert isinstance(totals, torch.Tensor) and totals.shape == (threads, 7)
    share = 1024 // threads
    for t in range(threads):
        expected = src[t * share : (t + 1) * share].sum()
        assert torch.allclose(totals[t], expected.expand(7))
    write, nbytes = op_call("write", src, dst, ws, passes=5, threads=threads)
    assert nbytes == 5 * 4 * share * threads
    write()
    assert bool((dst[: share * threads] == 1.5).all()) and bool((dst[1024:] == 0).all())
    copy, nbytes = op_call("copy", src, dst, ws, passes=3, threads=threads)
    assert nbytes == 3 * ws  # half in, half out, three times
    copy()
    assert torch.equal(dst[:512], src[:512])
    with pytest.raises(ValueError, match="unknown bandwidth op 'scan'"):
        op_call("scan", src, dst, ws, passes=1)


def test_paired_caches_matches_each_boundary_to_the_nearest_os_level() -> None:
    def found(size: int) -> CacheLevel:
        return CacheLevel(size, size // 2, size * 2, 100e9, 50e9)

    profile = Profile(
        device="cpu",
        threads=2,
        bandwidth={},
        cache_levels=(found(40 * KIB), found(600 * KIB), found(900 * KIB), found(30 * MIB)),
        os_caches=(
            OsCache(1, "Data", 32 * KIB),
            OsCache(2, "Unified", 512 * KIB),
            OsCache(3, "Unified", 32 * MIB),
        ),
        peak_flop_per_s={},
        memory_bytes_per_s={},
        cache_bytes_per_s={},
        timer_resolution_s=1e-9,
        timer_observed_resolution_s=1e-8,
        timer_overhead_s=5e-8,
        duration_s=1.0,
    )
    rows = paired_caches(profile)
    assert [(name, size, lv.size_bytes if lv else None) for name, size, lv in rows] == [
        ("L1 data", 32 * KIB, 40 * KIB),
        ("L2", 512 * KIB, 600 * KIB),
        ("L3", 32 * MIB, 30 * MIB),
        ("not an OS level", None, 900 * KIB),
    ]


def test_the_update_op_rewrites_its_buffer_once_per_pass_and_counts_read_and_write() -> None:
    src = torch.rand(4096)
    dst = torch.full((4096,), -2.0)
    fn, nbytes = op_call("update", src, dst, 4 * KIB, passes=7)
    assert "update" in OPS
    assert nbytes == 7 * 8 * 1024  # 1024 floats read and written back, seven times
    fn()
    assert bool((dst[:1024] == 2.0).all())  # abs_: the buffer updated in place
    assert bool((dst[1024:] == -2.0).all())  # nothing past the working set touched
    before = dst.clone()
    fn()
    assert torch.equal(dst, before)  # positive values stay as they are, pass after pass
    single, nbytes = op_call("update", src, dst, 16 * KIB, passes=1)
    assert nbytes == 8 * 4096
    single()
    assert bool((dst == 2.0).all())


def test_the_update_sweep_reports_credited_bytes_over_the_best_time() -> None:
    # A fake update block: each call moves its credited bytes at 30 GB/s after 5 µs of
    # call overhead; one timed block of the small size is disturbed (3x slower).
    slow = {4 * KIB: [1.0, 3.0]}

    def block(ws: int, nbytes: int) -> Callable[[int], float]:
        timed: list[int] = []

        def run_block(calls: int) -> float:
            seconds = calls * (5e-6 + nbytes / 30e9)
            if calls * (5e-6 + nbytes / 30e9) >= 1e-3:  # a timed block, not calibration
                timed.append(calls)
                factors = slow.get(ws, [])
                seconds *= factors[len(timed) - 1] if len(timed) <= len(factors) else 1.0
            return seconds

        return run_block

    points = []
    for ws in (4 * KIB, 16 * MIB):
        passes = 16 * MIB // ws
        _, nbytes = op_call("update", torch.rand(ws // 4), torch.ones(ws // 4), ws, passes=passes)
        assert nbytes == 2 * ws * passes  # the sweep credits twice the working set a pass
        points.append(SweepPoint(ws, nbytes, block(ws, nbytes)))
    (rates,) = best_bandwidths({"update": points}, repeats=2, blocks=1).values()
    for rate in rates:
        assert rate == pytest.approx(32 * MIB / (5e-6 + 32 * MIB / 30e9))
