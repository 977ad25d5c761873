"""The accuracy plot's numbers: float16 flushes 1e-8 to zero and overflows past 65504."""

from __future__ import annotations

import math

import pytest
import torch

from benchbench.core.errors import UsageError
from benchbench.views.accuracy_plot import Limits, accuracy_figure, operator, relative_errors


def test_limits_of_float16_are_its_documented_ones():
    limits = Limits.of(torch.float16)
    assert limits.smallest_subnormal == 2.0**-24  # 5.96e-8
    assert limits.smallest_normal == 2.0**-14
    assert limits.max == 65504.0
    assert limits.unit_roundoff == 2.0**-11


def test_relative_errors_show_underflow_overflow_and_rounding():
    x = torch.tensor([1e-8, 1.0, 2.0, 1e5], dtype=torch.float64)
    rel = relative_errors(torch.sqrt, x, torch.float16)
    assert rel[0] == 1.0  # 1e-8 is stored as 0: sqrt gives 0, off by everything
    assert rel[1] == 0.0 and rel[2] < 2.0**-11  # exact, then within half an ulp
    assert math.isinf(rel[3])  # 1e5 > 65504 is stored as Inf
    assert relative_errors(torch.sqrt, x, torch.float32)[0] < 1e-7


def test_figure_has_one_series_per_dtype_and_marks_limits():
    figure = accuracy_figure("sqrt", ["float16", "float32"], low=1e-10, high=1e6, points=50)
    (ax,) = figure.axes
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert [label.split()[0] for label in labels] == ["float16", "float32"]
    # float16's subnormal, normal and max fall inside 1e-10..1e6: three vertical lines.
    verticals = [line for line in ax.get_lines() if len(set(line.get_xdata())) == 1]
    assert sorted(line.get_xdata()[0] for line in verticals) == pytest.approx(
        [2.0**-24, 2.0**-14, 65504.0]
    )


def test_bad_operator_range_or_dtype_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown operator 'nope'"):
        operator("nope")
    with pytest.raises(UsageError, match="0 < low < high"):
        accuracy_figure("sqrt", low=10, high=1)
    with pytest.raises(UsageError, match="not a floating dtype"):
        accuracy_figure("sqrt", ["int32"], points=10)
    assert operator("erf") is torch.special.erf or operator("erf") is torch.erf
