"""Arrays of numbers written as JSON by NumPy read back as what compact() rounds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchbench.dashboard.json_numbers import compact, json_numbers

EDGES = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, 10.0, 1e-3, 99999.6, 0.000999996, 123456789.0]
EXTREMES = [1e-30, 1e30, 5e-324, 1.7e308, -2.5e-25]


@pytest.mark.parametrize("digits", [1, 3, 5, 8])
def test_every_value_reads_back_as_the_double_compact_gives(digits: int) -> None:
    rng = np.random.default_rng(digits)
    values = rng.lognormal(-8, 5, 20_000) * rng.choice([-1.0, 1.0], 20_000)
    values = np.concatenate([values, EDGES, EXTREMES])
    text = json_numbers(values, digits)
    assert json.loads(text.array(0, values.size)) == compact(values, digits)
    # Any stretch is its own array (the history pages slice one per line).
    for lo, hi in [(0, 0), (3, 3), (5, 17), (values.size - 9, values.size)]:
        assert json.loads(text.array(lo, hi)) == compact(values[lo:hi], digits)


def test_the_text_is_short_and_plain() -> None:
    text = json_numbers(np.array([1.2345678e-5, 1e-3, -2.5, 0.0, np.nan, 120000.0, 1.0]))
    assert text.array(0, 7) == "[12346e-9,1e-3,-25e-1,0,null,12e4,1]"


def test_integers_are_written_exactly() -> None:
    runs = np.array([0, 1, 7, 10, 7099, 99999, 100000, 123456, 2**40], dtype=float)
    assert json.loads(json_numbers(runs, None).array(0, runs.size)) == [int(v) for v in runs]
    assert json_numbers(np.array([10.0, 2.0]), None).array(0, 2) == "[10,2]"
    assert json_numbers(np.zeros(0), None).array(0, 0) == "[]"
