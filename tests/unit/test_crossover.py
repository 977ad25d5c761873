"""The one crossover (measured and modelled), on synthetic curves with known crossings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchbench.analysis.crossover import crossings, model_crossover
from benchbench.analysis.fit import Fit
from benchbench.core.errors import BenchbenchError

# Two known curves: a GPU-like one (20 µs launch, 500 GB/s) and a CPU-like one
# (1 µs, 10 GB/s). Equal at w: 20e-6 + w/5e11 = 1e-6 + w/1e10 -> w = 19e-6 / (1e-10 - 2e-12).
GPU = Fit(t0_s=20e-6, rate_per_s=5e11, r2=1.0, n_points=10, work_unit="bytes")
CPU = Fit(t0_s=1e-6, rate_per_s=1e10, r2=1.0, n_points=10, work_unit="bytes")
EXPECTED = 19e-6 / (1 / 1e10 - 1 / 5e11)


def test_model_crossover_at_the_right_place() -> None:
    w = model_crossover(GPU, CPU, (1.0, 1e12))
    assert w == pytest.approx(EXPECTED, rel=1e-9)
    assert float(GPU.predict(w)) == pytest.approx(float(CPU.predict(w)), rel=1e-9)
    assert model_crossover(CPU, GPU, (1.0, 1e12)) == pytest.approx(EXPECTED, rel=1e-9)


def test_model_crossover_outside_range_or_parallel_is_none() -> None:
    assert model_crossover(GPU, CPU, (1.0, EXPECTED / 2)) is None
    assert model_crossover(GPU, CPU, (EXPECTED * 2, 1e12)) is None
    parallel = Fit(t0_s=5e-6, rate_per_s=1e10, r2=1.0, n_points=3, work_unit="bytes")
    assert model_crossover(CPU, parallel, (1.0, 1e12)) is None


def test_model_crossover_rejects_mixed_units_and_bad_range() -> None:
    flops = Fit(t0_s=1e-6, rate_per_s=1e9, r2=1.0, n_points=3, work_unit="flop")
    with pytest.raises(BenchbenchError, match="different work units"):
        model_crossover(CPU, flops, (1.0, 10.0))
    with pytest.raises(BenchbenchError, match="work_range"):
        model_crossover(CPU, GPU, (10.0, 1.0))


def test_measured_crossing_interpolates_in_log_space() -> None:
    sizes = np.geomspace(2**10, 2**30, 21)
    (found,) = crossings(list(sizes), list(GPU.predict(sizes) / CPU.predict(sizes)))
    # Between adjacent measured sizes (2x apart), log-log interpolation of near-straight
    # curves lands within a few percent of the exact crossing.
    assert found.size == pytest.approx(EXPECTED, rel=0.05)
    lower = sizes[sizes < EXPECTED].max()
    assert lower < found.size < 2 * lower
    assert (found.below, found.above) == (1, -1)  # the GPU is slower below, faster above


def test_no_crossing_when_the_order_never_changes() -> None:
    sizes = np.geomspace(2**10, 2**16, 7)  # all below the crossing: CPU faster throughout
    assert crossings(list(sizes), list(GPU.predict(sizes) / CPU.predict(sizes))) == []


def test_crossing_halfway_in_log_size_between_adjacent_sizes() -> None:
    sizes = [2**10, 2**12, 2**14, 2**16]
    (found,) = crossings(sizes, [0.5, 0.8, 1.25, 2.0])
    # log(0.8) = -log(1.25): the crossing is halfway between 2^12 and 2^14 in log size.
    assert found.size == pytest.approx(2**13)
    assert (found.below, found.between) == (-1, (2**12, 2**14))


def test_sizes_that_are_not_decisive_locate_the_flip_but_do_not_anchor_it() -> None:
    sizes = [1000, 2000, 4000, 8000, 16000]
    ratios = [1.5, 1.02, 0.99, 0.97, 0.6]
    (found,) = crossings(sizes, ratios, [True, False, False, False, True])
    assert (found.below, found.between) == (1, (1000, 16000))
    t = math.log(1.02) / (math.log(1.02) - math.log(0.99))
    assert found.size == pytest.approx(math.exp(math.log(2000) + t * math.log(2)))
    assert 2000 < found.size < 4000
    # Without decisive sizes on both sides there is no crossing, whatever the medians do.
    assert crossings(sizes, ratios, [True, False, False, False, False]) == []
    assert crossings([1, 2, 4, 8], [1.02, 0.98, 1.02, 0.98], [False] * 4) == []


def test_exact_tie_multiple_crossings_and_any_order() -> None:
    w = [1, 2, 4, 8, 16]
    assert [c.size for c in crossings(w, [0.5, 1.0, 2.0, 4.0, 8.0])] == [2.0]
    assert len(crossings(w, [1.0, 1.1, 0.9, 1.1, 0.9])) == 3
    (found,) = crossings([4096, 1024], [2.0, 0.5])
    assert (round(found.size), found.below) == (2048, -1)


def test_bad_input_is_refused() -> None:
    with pytest.raises(BenchbenchError, match="finite and > 0"):
        crossings([1, 2], [1.0, 0.0])
    with pytest.raises(BenchbenchError, match="once"):
        crossings([1, 1], [1.0, 2.0])
    with pytest.raises(BenchbenchError, match="one entry per size"):
        crossings([1, 2], [1.0, 2.0], [True])
