"""A point's reference: the computation in float64 that its output is checked against,
where it runs (a CUDA point's GPU, else the CPU), with which tolerance, and the second
check of the output the timed loop kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from benchbench.core.values import Point
from benchbench.measure.accuracy import Tolerance, tolerance_for
from benchbench.measure.inplace import fresh as _fresh
from benchbench.measure.pipeline import check_output, sync
from benchbench.suite.declare import Variant, Workload


def numpy_inputs(inputs: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(x.numpy() if isinstance(x, torch.Tensor) else x for x in inputs)


def tolerance(workload: Workload, variant: Variant, point: Point) -> Tolerance:
    """The check's tolerance at ``point``: the variant's, the workload's, the dtype's."""
    size = workload.reduction_size(point) if workload.reduction_size is not None else None
    return tolerance_for(
        point.dtype,
        rtol=(variant.rtol, workload.rtol),
        atol=(variant.atol, workload.atol),
        reduction_size=int(size) if size is not None else None,
    )


def float64_inputs(inputs: Sequence[Any], device: str = "cpu") -> tuple[Any, ...]:
    """Copies of the inputs on ``device``, the floating ones in float64.

    A CUDA point's reference runs on its GPU: an 8192² matmul is ~1 TFLOP of float64,
    tens of seconds on a CPU. MPS has no float64: its points' references run on the CPU.
    """
    where = device if device.startswith("cuda") else "cpu"
    return tuple(
        x.detach().to(where).to(torch.float64)
        if isinstance(x, torch.Tensor) and x.is_floating_point()
        else (x.detach().to(where) if isinstance(x, torch.Tensor) else x)
        for x in inputs
    )


def reference_output(workload: Workload, inputs: Sequence[Any], device: str = "cpu") -> Any:
    """The reference computation on float64 copies of the inputs: on a CUDA point's
    device, else on the CPU. A reference the device cannot run (a float64 kernel it
    lacks, a NumPy call inside) runs on the CPU instead."""
    if device.startswith("cuda"):
        try:
            return _reference_on(workload, float64_inputs(inputs, device))
        except Exception:
            pass  # the same reference on the CPU: it raises there if it is wrong
    return _reference_on(workload, float64_inputs(inputs))


def _reference_on(workload: Workload, ref_inputs: tuple[Any, ...]) -> Any:
    if workload.reference is not None:
        return workload.reference(*ref_inputs)
    first = workload.variants[0]
    args = numpy_inputs(ref_inputs) if first.numpy else ref_inputs
    return first.fn(*(_fresh(args) if first.inplace else args))


def timed_output_wrong(
    timed: Any, reference: Any, workload: Workload, variant: Variant, point: Point
) -> str | None:
    """Why the last output of the timed loop is wrong, or None when it passes the check
    the first call passed: a variant that caches its result, computes it lazily, or
    returns garbage once warm passes the first check and fails this one."""
    sync(point.device)
    wrong, _ = check_output(timed, reference, point.dtype, tolerance(workload, variant, point))
    if wrong is None:
        return None
    return (
        f"the timed output is wrong though the checked call's was right: {wrong} "
        "(a result cached, computed lazily or unfinished on the timed path)"
    )
