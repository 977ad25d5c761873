"""``benchbench.compare_variants``: callables measured against each other, in this process.

The same point pipeline as ``benchbench time``
(:func:`benchbench.measure.variants.measure_variants`)
and the same verdict and crossovers (:mod:`benchbench.analysis.variants`); the rows come
back as a pandas DataFrame that can plot itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from benchbench.analysis.variants import (
    MIN_EFFECT,
    Crossover,
    Row,
    find_crossovers,
    rows_from_results,
)
from benchbench.core.errors import UsageError
from benchbench.core.units import parse_shapes
from benchbench.core.values import ITEMSIZE, Point, Result
from benchbench.measure import timers as device_support
from benchbench.measure.policy import Policy
from benchbench.measure.variants import Candidate, measure_variants, unavailable
from benchbench.suite.inputs import SetupContext
from benchbench.views.variants import plot_rows

if TYPE_CHECKING:
    import pandas as pd


@functools.cache
def comparison_frame_class() -> type[pd.DataFrame]:
    """The :class:`ComparisonFrame` class, made on first use.

    pandas costs ~1 s to import here; the worker imports this module for every
    ``benchbench time`` and never needs pandas, so the class is built lazily.
    """
    import pandas

    class ComparisonFrame(pandas.DataFrame):  # type: ignore[misc, unused-ignore]
        """The rows of :func:`compare_variants`: a DataFrame, one row per variant and point.

        Columns are the fields of :class:`benchbench.analysis.variants.Row` (``ratio`` is
        the variant's median time over the reference's; ``verdict`` faster / slower /
        same / not significant, by :mod:`benchbench.analysis.verdict`; ``p_value``).
        ``.plot()`` draws throughput versus size and returns a matplotlib
        Figure; ``.crossovers()`` lists the sizes where a variant's verdict flips.
        """

        @property
        def _constructor(self) -> type[ComparisonFrame]:
            return ComparisonFrame

        def rows(self) -> list[Row]:
            records = self.to_dict("records")
            return [Row.from_mapping({str(k): v for k, v in record.items()}) for record in records]

        def plot(self, title: str | None = None) -> Any:  # type: ignore[override, unused-ignore]
            """Throughput (elements/s) versus size, log-log, Q1-Q3 bands: a Figure."""
            return plot_rows(self.rows(), title)

        def crossovers(self) -> list[Crossover]:
            return find_crossovers(self.rows())

    return ComparisonFrame


def _names(values: str | Sequence[str], flag: str, known: Sequence[str] | None) -> list[str]:
    names = [v.strip() for v in values.split(",")] if isinstance(values, str) else list(values)
    names = [n for n in names if n]
    if not names:
        raise UsageError(f"{flag} is empty")
    for name in names:
        if known is not None and name not in known:
            raise UsageError(f"{flag} {name!r} is unknown; known: {', '.join(known)}")
    return names


def best_device() -> str:
    """The fastest device present: CUDA (or ROCm through it), else MPS, else the CPU."""
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def _shapes(sizes: str | Sequence[int | Sequence[int]]) -> list[tuple[int, ...]]:
    """``benchbench time --size``'s forms (``"2**10..2**20"``, ``"64x1024..8192"``), or a
    list of element counts and shapes."""
    if isinstance(sizes, str):
        return parse_shapes(sizes)
    shapes = {(int(s),) if isinstance(s, int) else tuple(int(d) for d in s) for s in sizes}
    if not shapes or any(d < 1 for shape in shapes for d in shape):
        raise UsageError(f"sizes must be element counts or shapes of at least 1, got {sizes!r}")
    return sorted(shapes, key=lambda shape: (math.prod(shape), shape))


def compare_variants(
    variants: Mapping[str, Callable[..., Any]],
    sizes: str | Sequence[int | Sequence[int]] = "2**10..2**22",
    devices: str | Sequence[str] | None = None,
    dtypes: str | Sequence[str] = ("float32",),
    setup: Callable[[SetupContext], Any] | None = None,
    reference: str | None = None,
    budget_s: float = 0.5,
    min_effect: float = MIN_EFFECT,
    progress: bool = True,
) -> pd.DataFrame:
    """Measure callables against each other at every size, device and dtype.

    ``variants`` maps names to callables taking the inputs ``setup(ctx)`` returns (a
    tensor or a tuple; default one tensor ``x`` uniform in [0.5, 1.5) of the point's
    size, dtype and device, from a generator seeded by the point). Every variant is
    checked once per point against ``reference`` (default: the first), then they are
    measured interleaved, each point for at most ``budget_s`` seconds of sampling.
    ``sizes`` takes the forms of ``benchbench time --size`` (element counts and shapes,
    ``"2**10..2**20"``, ``"64x1024..8192"``) or a list of counts and shapes; ``devices``
    defaults to the fastest device present (:func:`best_device`); ``progress`` draws a
    bar on stderr (in a notebook, under the cell).

    The callables run **in this process** (they are Python objects, not text a
    worker could rebuild): a crash here takes the caller with it. Use
    ``benchbench time`` for isolation. Returns a ``ComparisonFrame`` (a pandas
    DataFrame: see :func:`comparison_frame_class`). Example::

        frame = benchbench.compare_variants(
            {"rsqrt": torch.rsqrt, "1/sqrt": lambda x: 1 / torch.sqrt(x)}, sizes="2**10..2**20"
        )
        frame.plot()
    """
    names = list(variants)
    if not names:
        raise UsageError("compare_variants needs at least one variant")
    ref_name = names[0] if reference is None else reference
    if ref_name not in variants:
        raise UsageError(f"reference {ref_name!r} is not a variant; variants: {', '.join(names)}")
    if budget_s <= 0:
        raise UsageError(f"budget_s must be > 0 seconds, got {budget_s}")
    shapes = _shapes(sizes)
    policy = Policy(max_time_s=budget_s)
    device_names = _names(devices if devices is not None else best_device(), "devices", None)
    dtype_names = _names(dtypes, "dtypes", list(ITEMSIZE))
    todo = [(d, t, shape) for d in device_names for t in dtype_names for shape in shapes]
    results: list[Result] = []
    from rich.progress import Progress

    with Progress(transient=True, disable=not progress) as bar:
        task = bar.add_task("compare_variants", total=len(todo))
        for device, dtype, shape in todo:
            size = math.prod(shape)
            point = Point("compare_variants", "", "", size, shape, dtype, device)
            bar.update(task, description=f"{'x'.join(map(str, shape))} {dtype} {device}")
            reason = device_support.unavailable_reason(device, torch)
            if reason is not None:
                results.extend(unavailable(point, names, reason))
            else:
                inputs = (setup or _default_setup)(SetupContext(point))
                args = tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)
                candidates = [Candidate(name, variants[name], args) for name in names]
                results.extend(measure_variants(point, candidates, names.index(ref_name), policy))
            bar.advance(task)
    rows = rows_from_results(results, ref_name, min_effect)
    return comparison_frame_class()([row.to_dict() for row in rows])


def _default_setup(ctx: SetupContext) -> Any:
    return ctx.uniform(0.5, 1.5)
