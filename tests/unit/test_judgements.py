import math

import numpy as np

from benchbench.analysis.changepoint import analyze
from benchbench.analysis.judgements import decode, digest, encode


def test_a_verdict_reads_back_equal_creeps_and_nan_included():
    rng = np.random.default_rng(7)
    ramp = np.concatenate([np.full(15, 1.0), np.linspace(1.0, 1.5, 12), np.full(15, 1.5)])
    values = ramp * (1 + rng.normal(0, 0.005, ramp.size))
    values[[4, 20]] = np.nan
    analysis = analyze(values)
    assert analysis.change_points and analysis.creeps  # the case worth reading back
    assert decode(encode(analysis)) == analysis
    short = analyze(np.array([1.0, math.nan]))
    assert short.noise_rel is None and decode(encode(short)) == short


def test_the_digest_changes_with_any_value_a_gap_or_the_minimum_effect():
    values = np.array([1.0, 2.0, math.nan, 3.0])
    key = digest(values, 0.05)
    assert key == digest(values.copy(), 0.05) and len(key) == 32
    assert key != digest(values, 0.1)
    assert key != digest(np.array([1.0, 2.0, 3.0]), 0.05)  # a gap removed
    assert key != digest(np.array([1.0, 2.0, math.nan, 3.0000000001]), 0.05)
    assert key == digest(values[::1], 0.05) == digest(np.r_[0.0, values][1:], 0.05)
