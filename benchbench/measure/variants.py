"""Measuring variants against each other at one point.

The torch side of one-off comparisons (:mod:`benchbench.analysis.variants` holds the logic
that needs no torch): each variant is called once and checked against the
reference variant's output, then the variants that agree are measured
**interleaved** by :func:`benchbench.measure.policy.measure`. The worker's ``time`` request
(``benchbench time``) and :func:`compare_variants` (in-process) both go through
:func:`measure_variants`.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from benchbench.core.values import DEFAULT_OUTPUTS, Point, Result
from benchbench.measure import timers as device_support
from benchbench.measure.loops import make_loop
from benchbench.measure.pipeline import check_output, ok_result, sync, time_subjects
from benchbench.measure.policy import Policy, Subject
from benchbench.measure.statements import Statement, statement_function, statement_names
from benchbench.suite.inputs import SetupContext


@dataclass(frozen=True)
class Candidate:
    """A variant ready to call: ``fn(*args)``."""

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _failed(point: Point, exc: BaseException, where: str | None = None) -> Result:
    reason = f"{type(exc).__name__}: {_first_line(exc)}"
    extra = {"failure": type(exc).__name__, **({"in": where} if where else {})}
    return Result(point=point, status="error", reason=reason, extra=extra)


def measure_variants(
    point: Point,
    candidates: Sequence[Candidate],
    reference: int,
    policy: Policy,
    check_only: bool = False,
) -> list[Result]:
    """Check each candidate against ``candidates[reference]``, then time those that agree.

    One result per candidate, in order, at ``point`` with ``variant`` set to the
    candidate's name. A candidate that raises or computes something different is an
    error, not timed. ``check_only`` stops after the check (results without samples).
    """
    points = [replace(point, variant=c.name) for c in candidates]
    outcome: dict[int, Result] = {}
    outputs: dict[int, Any] = {}
    for i, candidate in enumerate(candidates):
        try:
            outputs[i] = candidate.fn(*candidate.args)
            sync(point.device)
        except Exception as exc:  # the candidate's own failure, reported for it alone
            outcome[i] = _failed(points[i], exc)
    ref_name = candidates[reference].name
    notes: dict[int, list[str]] = {i: [] for i in range(len(candidates))}
    errors: dict[int, float | None] = {}
    abs_errors: dict[int, float | None] = {}
    for i in outputs:
        if i == reference:
            continue
        if reference not in outputs:
            notes[i].append(f"result not checked: {ref_name!r} failed")
            continue
        wrong, accuracy = check_output(
            outputs[i], outputs[reference], point.dtype, reference_name=ref_name
        )
        if accuracy is None and wrong is None:
            notes[i].append(f"result not checked: {ref_name!r} returns no tensor or array")
        if accuracy is not None:
            errors[i] = accuracy.max_rel_error
            abs_errors[i] = accuracy.max_abs_error
            if accuracy.nonfinite:
                notes[i].append(f"output holds {accuracy.nonfinite} NaN/Inf value(s)")
        if wrong is not None:
            outcome[i] = Result(
                point=points[i],
                status="error",
                reason=wrong,
                max_rel_error=errors.get(i),
                max_abs_error=abs_errors.get(i),
            )
    outputs.clear()  # large outputs are not kept alive while timing
    timed = [i for i in range(len(candidates)) if i not in outcome]
    if check_only or not timed:
        return [outcome.get(i) or Result(point=points[i], status="ok") for i in range(len(points))]
    subjects = [
        Subject(candidates[i].name, make_loop(candidates[i].fn, candidates[i].args)) for i in timed
    ]
    policy, measured = time_subjects(point, subjects, policy)
    interleaved = [candidates[j].name for j in timed]
    for i, m in zip(timed, measured, strict=True):
        outcome[i] = ok_result(
            points[i],
            m,
            policy,
            notes[i],
            items_per_call=float(point.size),
            max_rel_error=errors.get(i),
            max_abs_error=abs_errors.get(i),
            extra={
                "reference": ref_name,
                "interleaved_with": interleaved,
                "outputs": DEFAULT_OUTPUTS,
            },
        )
    return [outcome[i] for i in range(len(candidates))]


def unavailable(point: Point, names: Sequence[str], reason: str) -> list[Result]:
    return [Result(point=replace(point, variant=n), status="skipped", reason=reason) for n in names]


def time_request(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Answer the worker's ``time`` request: statements measured at one point.

    Binds ``n`` (elements), ``shape`` (a tuple), ``device``, ``dtype`` (a torch.dtype),
    ``torch``, ``np`` and ``ctx`` (a seeded :class:`~benchbench.suite.inputs.SetupContext`),
    runs the setup (default: ``x`` and ``y`` uniform in [0.5, 1.5), inside every
    operator's domain) with torch's and NumPy's global generators seeded by the point,
    then measures the statements.
    """
    started = time.perf_counter()
    point = Point.from_dict(request["point"])
    texts = [str(s) for s in request["statements"]]
    if request.get("threads"):
        torch.set_num_threads(int(request["threads"]))
    reason = device_support.unavailable_reason(point.device, torch)
    if reason is not None:
        return [r.to_dict() for r in unavailable(point, texts, reason)]
    ctx = SetupContext(point)
    namespace: dict[str, Any] = {
        "n": point.size,
        "shape": point.shape,
        "device": point.device,
        "dtype": ctx.dtype,
        "torch": torch,
        "np": np,
        "ctx": ctx,
    }
    seed = point.input_seed()
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    setup = request.get("setup")
    try:
        if setup is None:
            # x first, y second: the same values whichever the statements use; y is
            # made only when used (2 x 2^22 float64 draws cost ~0.1 s a point here).
            namespace["x"] = ctx.uniform(0.5, 1.5)
            if "y" in set().union(*(statement_names(t) for t in texts)):
                namespace["y"] = ctx.uniform(0.5, 1.5)
        else:
            exec(compile(setup, "<setup>", "exec"), namespace)
    except Exception as exc:
        text = _first_line(exc)
        if "not implemented for" in text or "not supported" in text:
            why = f"{point.dtype} is not supported on {point.device}: {text}"
            return [r.to_dict() for r in unavailable(point, texts, why)]
        where = traceback.extract_tb(exc.__traceback__)[-1]
        failed = _failed(point, exc, "setup")
        failed = replace(failed, reason=f"setup, line {where.lineno}: {failed.reason}")
        return [replace(failed, point=replace(point, variant=t)).to_dict() for t in texts]
    candidates = [
        Candidate(text, statement_function(Statement(i, text), namespace))
        for i, text in enumerate(texts, start=1)
    ]
    policy = Policy(**request["policy"])
    try:
        results = measure_variants(
            point, candidates, int(request["reference"]), policy, bool(request.get("check_only"))
        )
    except Exception as exc:  # raised while timing (not at the check): the point is lost
        message = f"{type(exc).__name__} while timing: {_first_line(exc)}"
        if "out of memory" in message.lower() or isinstance(exc, MemoryError):
            message = f"out of memory: {_first_line(exc)}"
        results = [
            Result(point=replace(point, variant=t), status="error", reason=message) for t in texts
        ]
    duration_s = time.perf_counter() - started
    return [replace(r, duration_s=duration_s).to_dict() for r in results]
