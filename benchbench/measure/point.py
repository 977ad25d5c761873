"""Measuring one point inside a worker: inputs, reference check, engine, work model.

Runs in the worker process (it imports torch). Every failure becomes a
:class:`~benchbench.core.values.Result` with a status and a reason: a bad point loses
that point only.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from benchbench.core.values import DEFAULT_OUTPUTS, Point, Result
from benchbench.measure import backward, inplace, instructions, workmodel
from benchbench.measure import timers as devices
from benchbench.measure.accuracy import as_float64
from benchbench.measure.compile_caches import fresh_compile_caches
from benchbench.measure.cuda_graph import GraphCaptureError, graph_mode, graph_subject, per_call
from benchbench.measure.inplace import fresh as _fresh
from benchbench.measure.loops import held_output, make_loop, make_rotating_loop
from benchbench.measure.memory import peak_memory
from benchbench.measure.pipeline import check_output, gated, ok_result, sync, time_subjects
from benchbench.measure.policy import Policy, Subject
from benchbench.measure.reference import (
    float64_inputs,
    numpy_inputs,
    reference_output,
    timed_output_wrong,
    tolerance,
)
from benchbench.measure.trace import profile_point
from benchbench.suite.declare import Skip, Variant, Workload
from benchbench.suite.inputs import SetupContext

#: The work model's figures per call: ``Workload.bytes``, ``flops``, ``items``.
WORK = ("bytes", "flops", "items")
#: ``rotate`` mode keeps at most this many copies of the inputs.
MAX_ROTATE_COPIES = 64


@dataclass(frozen=True)
class Options:
    """How to measure: the engine policy, cache mode, thread count, cancellation hook."""

    policy: Policy = field(default_factory=Policy)
    cache: str = "warm"
    threads: int | None = None
    should_stop: Callable[[], bool] | None = None  # see engine.measure
    #: Folder for a ``torch.profiler`` trace of the point, taken after the timed
    #: measurement (never inside it); ``None``: no profile.
    profile_dir: str | None = None
    #: Output lifetime for every point (``run --outputs``); ``None``: each workload's
    #: (or variant's) own, ``keep`` unless declared.
    outputs: str | None = None
    #: False: skip the reference check, the derived work model and the peak memory (a
    #: later process of a point the first one checked; the merge keeps its figures).
    check: bool = True
    #: When the point's measurement began (``time.perf_counter``): ``extra.cost`` says
    #: how the process's time was spent before, in and after the timed part.
    started: float = field(default_factory=time.perf_counter)
    #: ``time`` (the engine's samples) or ``instructions`` (counted under callgrind, in a
    #: worker the instrumented launcher started: :mod:`benchbench.measure.instructions`).
    metric: str = "time"
    #: What counts ``metric="instructions"``: ``callgrind`` or ``pmu`` (``--counter``).
    counter: str = "callgrind"
    #: Called before every calibrated and sampled block, outside the timed region (not
    #: in warm-up): ``benchbench ab``'s lockstep, which waits there for its turn. With a
    #: gate the point takes no peak memory and no trace after its samples (the other
    #: side would be sampling meanwhile).
    gate: Callable[[], None] | None = None


def _skip(point: Point, reason: str, **kw: Any) -> Result:
    return Result(point=point, status="skipped", reason=reason, **kw)


def _error(point: Point, reason: str, **kw: Any) -> Result:
    return Result(point=point, status="error", reason=reason, **kw)


def measure_point(workload: Workload, point: Point, options: Options) -> Result:
    """Measure ``point`` of ``workload``; never raises for a problem of the point."""
    started = time.perf_counter()
    # No telemetry thread here: the runner samples the machine from its own process
    # (benchbench.run.observed), so nothing of ours shares this process while it times.
    try:
        result = _measure(workload, point, options)
    except Skip as exc:
        result = _skip(point, str(exc) or "skipped by the suite", code_version=workload.version)
    except torch.cuda.OutOfMemoryError as exc:
        result = _error(point, f"out of memory: {_first_line(exc)}")
    except MemoryError:
        result = _error(point, "out of memory (MemoryError)")
    except Exception as exc:
        message = _first_line(exc)
        if "can't allocate memory" in message or "out of memory" in message.lower():
            result = _error(point, f"out of memory: {message}")
        elif isinstance(exc, (RuntimeError, NotImplementedError)) and _unsupported(message):
            # e.g. '"ndtri_cpu" not implemented for 'Half'': the dtype is not here,
            # which is a skip with the reason, not a failure of the point.
            result = _skip(
                point,
                f"{point.dtype} is not supported on {point.device}: {message}",
                code_version=workload.version,
            )
        else:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            result = _error(
                point,
                f"{type(exc).__name__}: {message} (at {where.filename}:{where.lineno})",
            )
    return replace(result, duration_s=time.perf_counter() - started)


def _unsupported(message: str) -> bool:
    return "not implemented for" in message or "not supported" in message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _measure(workload: Workload, point: Point, options: Options) -> Result:
    variant = workload.variant(point.variant)
    cache_mode = workload.cache or options.cache
    base: dict[str, Any] = {"code_version": workload.version, "cache_mode": cache_mode}
    reason = devices.unavailable_reason(point.device, torch)
    if reason is None:
        reason = _variant_restriction(variant, point)
    if reason is not None:
        return _skip(point, reason, **base)
    # Every CUDA call of the point (setup, compile, check, warm-up, timing, peak memory,
    # trace) runs with the point's device current: a cuda:1 point never touches cuda:0.
    with devices.device_scope(point.device, torch):
        return _measure_available(workload, variant, point, options, base)


def _measure_available(
    workload: Workload, variant: Variant, point: Point, options: Options, base: dict[str, Any]
) -> Result:
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    threads = torch.get_num_threads()
    base["threads"] = threads

    try:
        inputs = _as_tuple(workload.setup(SetupContext(point)))
    except (RuntimeError, TypeError) as exc:
        text = _first_line(exc)
        if _unsupported(text):
            return _skip(point, f"{point.dtype} is not supported on {point.device}: {text}", **base)
        raise
    try:
        with fresh_compile_caches() if variant.compile else contextlib.nullcontext():
            return _measure_inputs(workload, variant, point, options, inputs, base)
    finally:
        if workload.teardown is not None:
            workload.teardown(*inputs)


def _measure_inputs(
    workload: Workload,
    variant: Variant,
    point: Point,
    options: Options,
    inputs: tuple[Any, ...],
    base: dict[str, Any],
) -> Result:
    fn = _prepare(variant)
    call_inputs = numpy_inputs(inputs) if variant.numpy else inputs
    mode = str(point["mode"]) if workload.mode_axis else "fwd"
    if mode != "fwd" and variant.numpy:
        return _skip(
            point, f"variant {variant.name!r} uses NumPy, which autograd does not track", **base
        )

    warnings: list[str] = []
    max_rel_error: float | None = None
    extra: dict[str, Any] = {}
    if variant.compile and options.metric == "instructions":
        # Compiling takes 20-90 s here natively and ~50x that under callgrind.
        return _skip(point, "instructions are not counted for torch.compile variants", **base)
    if variant.compile:
        # The first call of a torch.compile'd function traces and compiles it (20-90 s
        # here, cold); it comes before the reference check so that its time is
        # recorded on its own, never in the samples nor hidden in the check.
        started = time.perf_counter()
        fn(*(_fresh(call_inputs) if variant.inplace else call_inputs))
        sync(point.device)
        extra["compile_s"] = time.perf_counter() - started
    outputs = workload.outputs_mode(variant, options.outputs)
    policy = _policy_for(workload, options)
    cache = base["cache_mode"]
    planned_bwd: backward.BackwardPlan | None = None
    if mode != "fwd":
        # Before the check: the plan's first, untimed backward gives the gradients checked.
        planned_bwd = backward.plan(
            variant.name,
            fn,
            call_inputs,
            mode,
            seed=point.input_seed(),
            timer=devices.timer_for(point.device, torch),
            min_sample_s=policy.min_sample_s,
            evict=devices.cache_flusher(point.device, torch) if cache == "cold" else None,
            at_least=_rotate_copies(call_inputs, point) if cache == "rotate" else 1,
        )
    check = workload.check_mode(variant) if options.check else False
    #: The reference, kept (float64, on the CPU) to check the timed output after sampling.
    recheck: Any = None
    if check:
        if planned_bwd is None:
            output = fn(*_fresh(call_inputs)) if variant.inplace else fn(*call_inputs)
            sync(point.device)
            reference = reference_output(workload, inputs, point.device)
            wrong, accuracy = check_output(
                output, reference, point.dtype, tolerance(workload, variant, point)
            )
            if check != "record" and wrong is None and accuracy is not None and not variant.inplace:
                recheck = as_float64(reference)
            del output, reference  # the device's float64 copy goes now, before timing
        else:
            sync(point.device)
            wrong, accuracy = backward.check_gradients(
                planned_bwd,
                workload.reference or workload.variants[0].fn,
                float64_inputs(inputs),
                point.dtype,
                tolerance(workload, variant, point),
                extra,
            )
        if accuracy is None and "gradient_check" not in extra:
            # A suite's reference is float64 tensors: an output or reference that is not
            # a tensor, array or number cannot be checked, which is the suite's bug.
            reason = wrong or "cannot check the result: the reference returns no tensor or array"
            return _error(point, reason, extra=extra, **base)
        if accuracy is not None:
            max_rel_error = accuracy.max_rel_error
            base["max_abs_error"] = accuracy.max_abs_error
            extra["tolerance"] = {"rtol": accuracy.tolerance.rtol, "atol": accuracy.tolerance.atol}
            extra["nonfinite"] = accuracy.nonfinite
            extra["mismatched_nonfinite"] = accuracy.mismatched_nonfinite
        if check == "record":
            extra["check"] = "record"
            if wrong is not None and accuracy is not None:
                warnings.append(
                    f"accuracy recorded, not enforced: {accuracy.why_wrong(point.dtype)}"
                )
        elif wrong is not None:
            return _error(point, wrong, max_rel_error=max_rel_error, extra=extra, **base)
        if accuracy is not None and accuracy.nonfinite:
            warnings.append(f"output holds {accuracy.nonfinite} NaN/Inf value(s)")

    extra["outputs"] = outputs
    if variant.traffic is not None:
        extra["traffic"] = variant.traffic  # the roofline's curve (analysis/roofline.py)
    if (axis := workload.x_of(point)) is not None:
        extra["x"] = {"name": axis[0], "value": axis[1]}
    if planned_bwd is not None:
        subjects = [planned_bwd.subject]
        policy = replace(policy, fixed_calls=planned_bwd.copies)
        extra["backward"] = planned_bwd.note
        extra["backward_slots"] = planned_bwd.copies
    elif variant.inplace:
        planned = inplace.plan(
            variant.name,
            fn,
            call_inputs,
            timer=devices.timer_for(point.device, torch),
            min_sample_s=policy.min_sample_s,
            outputs=outputs,
            evict=devices.cache_flusher(point.device, torch) if cache == "cold" else None,
            at_least=_rotate_copies(call_inputs, point) if cache == "rotate" else 1,
        )
        subjects = [planned.subject]
        policy = replace(policy, fixed_calls=planned.copies)
        extra["inplace"] = planned.note
        extra["inplace_copies"] = planned.copies
    else:
        subjects = _subjects(variant, fn, call_inputs, point, cache, outputs)
    if options.metric == "instructions":
        work = {
            n: _work(getattr(workload, n), point, warnings) for n in ("bytes", "flops", "items")
        }
        return instructions.counted_result(
            point,
            subjects[0],
            call_inputs,
            outputs,
            policy.fixed_calls,
            work,
            warnings,
            max_rel_error=max_rel_error,
            extra=extra,
            counter=options.counter,
            **base,
        )
    graph, note = graph_mode(
        variant.cuda_graph or options.policy.cuda_graph,
        point.device,
        variant.inplace,
        backward=planned_bwd is not None,
    )
    if note is not None:
        extra["cuda_graph_note"] = note
    graph_calls = 1
    if graph:
        try:
            copies = _rotate_copies(call_inputs, point) if cache == "rotate" else 1
            subjects[0], graph_calls = graph_subject(
                subjects[0], torch.cuda, cache == "cold", copies
            )
        except GraphCaptureError as exc:
            return _skip(point, f"CUDA graph capture failed: {exc}", extra=extra, **base)
        extra["cuda_graph"] = {"calls_per_replay": graph_calls}
        if cache == "rotate":
            extra["cuda_graph"]["rotate_copies"] = copies
    if options.gate is not None:
        subjects = [gated(s, options.gate, point.device) for s in subjects]
    timing_from = time.perf_counter()
    policy, (main,) = time_subjects(point, subjects, policy, options.should_stop)
    main = per_call(main, graph_calls) if graph else main
    if recheck is not None and (timed := held_output(subjects[0].loop)) is not None:
        wrong = timed_output_wrong(timed[0], recheck, workload, variant, point)
        if wrong is not None:
            return _error(point, wrong, max_rel_error=max_rel_error, extra=extra, **base)
    after_from = time.perf_counter()
    extra["cost"] = {
        "before_timing_s": timing_from - options.started,
        "timing_s": after_from - timing_from,
    }
    if options.gate is not None or not options.check:
        # Once per point, in its first process (as the check): the allocation is the
        # same in every process, and the profiler's pass cost ~60 ms of each one here.
        peak = None
    elif planned_bwd is not None:
        peak = peak_memory(planned_bwd.once, (), point.device, False)
    else:
        peak = peak_memory(fn, call_inputs, point.device, variant.inplace)
    if options.profile_dir is not None and options.gate is None:
        if planned_bwd is not None:
            extra["profile"] = profile_point(planned_bwd.once, (), point, options.profile_dir)
        else:
            args = _fresh(call_inputs) if variant.inplace else call_inputs
            extra["profile"] = profile_point(fn, args, point, options.profile_dir)
    work = {
        name: _work(getattr(workload, name), point, warnings)
        for name in ("bytes", "flops", "items")
    }
    if options.check:  # once per point: later processes keep the first one's (see Options)
        workmodel.fill(workload, point, inputs, mode, work, warnings, extra)
    extra["cost"]["after_timing_s"] = time.perf_counter() - after_from
    return ok_result(
        point,
        main,
        policy,
        warnings,
        bytes_per_call=work["bytes"],
        flop_per_call=work["flops"],
        items_per_call=work["items"],
        max_rel_error=max_rel_error,
        peak_memory_bytes=peak,
        extra=extra,
        **base,
    )


def _variant_restriction(variant: Variant, point: Point) -> str | None:
    kind = point.device.partition(":")[0]
    if variant.numpy and kind != "cpu":
        return f"variant {variant.name!r} uses NumPy, which runs on the CPU only"
    if variant.devices is not None and kind not in variant.devices:
        return f"variant {variant.name!r} runs on {', '.join(variant.devices)} only"
    if variant.dtypes is not None and point.dtype not in variant.dtypes:
        return f"variant {variant.name!r} supports {', '.join(variant.dtypes)} only"
    return None


def _as_tuple(inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _prepare(variant: Variant) -> Callable[..., Any]:
    if variant.compile:
        # A fresh compile per point: nothing dynamo cached for an earlier point of this
        # process is reused, and dynamic=False specialises the program on this point's
        # shapes (otherwise a second size recompiles once as a dynamic-shape kernel, and
        # the sizes after it time that program, not one compiled for them).
        torch._dynamo.reset()
        return torch.compile(variant.fn, dynamic=False)
    return variant.fn


def _policy_for(workload: Workload, options: Options) -> Policy:
    """The run's policy with the workload's budget; cold cache: one call per sample."""
    policy = options.policy
    if workload.budget_s is not None:
        policy = replace(policy, max_time_s=workload.budget_s)
    if (workload.cache or options.cache) == "cold":
        policy = replace(policy, fixed_calls=1)
    return policy


def _subjects(
    variant: Variant,
    fn: Callable[..., Any],
    inputs: tuple[Any, ...],
    point: Point,
    cache: str,
    outputs: str = DEFAULT_OUTPUTS,
) -> list[Subject]:
    pre = devices.cache_flusher(point.device, torch) if cache == "cold" else None
    if cache == "rotate":
        copies = _rotate_copies(inputs, point)
        sets = [inputs, *(_fresh(inputs) for _ in range(copies - 1))]
        return [Subject(variant.name, make_rotating_loop(fn, sets, outputs), pre)]
    return [Subject(variant.name, make_loop(fn, inputs, outputs), pre)]


def _rotate_copies(inputs: tuple[Any, ...], point: Point) -> int:
    """Copies of the inputs that, cycled through, span 2x the LLC."""
    llc = devices.last_level_cache_bytes(point.device, torch)
    return min(MAX_ROTATE_COPIES, max(2, -(-2 * llc // max(inplace.nbytes(inputs), 1))))


def _work(fn: Callable[[Point], float] | None, point: Point, warnings: list[str]) -> float | None:
    if fn is None:
        return None
    try:
        return float(fn(point))
    except Exception as exc:
        warnings.append(f"work model failed: {type(exc).__name__}: {exc}")
        return None
