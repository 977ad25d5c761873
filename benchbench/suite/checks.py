"""Checks of a workload's declared values: sizes, tolerances, the x-axis.

Each raises :class:`~benchbench.core.errors.SuiteError` naming the workload (``where``),
the bad value and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from benchbench.core.errors import SuiteError
from benchbench.core.values import MODES

#: The dtypes a tolerance may name (the others are compared exactly).
FLOATING = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128")
#: A point's size as declared: elements, or a shape.
Size = int | tuple[int, ...]
#: A reference-check tolerance: one number, or a number per dtype name.
ToleranceSpec = float | Mapping[str, float] | None


def check_tolerance(where: str, whose: str, **values: ToleranceSpec) -> None:
    """A tolerance is a number >= 0, or such a number per floating dtype name."""
    for name, value in values.items():
        if value is None:
            continue
        per_dtype = value.items() if isinstance(value, Mapping) else [(None, value)]
        for dtype, number in per_dtype:
            if dtype is not None and dtype not in FLOATING:
                raise SuiteError(
                    f"{where}:{whose} {name}={value!r} names unknown dtype {dtype!r}; "
                    f"use one of {', '.join(FLOATING)}"
                )
            if (
                isinstance(number, bool)
                or not isinstance(number, int | float)
                or not math.isfinite(number)
                or number < 0
            ):
                raise SuiteError(
                    f"{where}:{whose} {name}={value!r}: a tolerance is a finite number "
                    f">= 0 or a dict of them by dtype, e.g. {name}={{'bfloat16': 2e-2}}"
                )


def frozen(value: ToleranceSpec) -> ToleranceSpec:
    return dict(value) if isinstance(value, Mapping) else value


def check_x(
    x: Any, params: Sequence[tuple[str, tuple[Any, ...]]], sizes: Sequence[Size], where: str
) -> None:
    if x is None:
        return
    if isinstance(x, str):
        values = dict(params).get(x)
        if values is None:
            known = ", ".join(k for k, _ in params) or "none"
            raise SuiteError(
                f"{where}: x={x!r} names no parameter (parameters: {known}); "
                "give a parameter name or a shape dimension index"
            )
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))]
        if bad or any(not v > 0 for v in values):
            raise SuiteError(
                f"{where}: x={x!r}: parameter values must be positive numbers, got {list(values)}"
            )
        return
    if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
        short = [s for s in sizes if len((s,) if isinstance(s, int) else s) <= x]
        if short:
            raise SuiteError(
                f"{where}: x={x} is no dimension of shape {short[0]!r}; "
                "give an index below every shape's rank"
            )
        return
    raise SuiteError(
        f"{where}: x must be a parameter name or a shape dimension index >= 0, got {x!r}"
    )


def check_size(size: Any, where: str) -> Size:
    if isinstance(size, bool):
        raise SuiteError(f"{where}: size must be a positive int or shape, got {size!r}")
    if isinstance(size, int):
        if size < 1:
            raise SuiteError(f"{where}: size must be a positive int, got {size}")
        return size
    if (
        isinstance(size, (tuple, list))
        and size
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in size)
    ):
        return tuple(size)
    raise SuiteError(
        f"{where}: size must be a positive int or a shape of positive ints, got {size!r}"
    )


def check_modes(
    modes: Any, params: Sequence[tuple[str, tuple[Any, ...]]], where: str
) -> tuple[str, ...]:
    """``modes`` as a tuple: some of :data:`~benchbench.core.values.MODES`, each once, and
    no declared parameter named ``mode`` beside them."""
    if isinstance(modes, str):
        raise SuiteError(
            f"{where}: modes must be a tuple, got the string {modes!r}; write ({modes!r},)"
        )
    values = tuple(modes)
    bad = [m for m in values if m not in MODES]
    if not values or bad or len(set(values)) != len(values):
        raise SuiteError(
            f"{where}: modes must be distinct values among {', '.join(MODES)}, got {values!r}"
        )
    if values != ("fwd",) and any(name == "mode" for name, _ in params):
        raise SuiteError(
            f"{where}: parameter 'mode' collides with the mode axis of modes={values!r}; "
            "rename the parameter"
        )
    return values
