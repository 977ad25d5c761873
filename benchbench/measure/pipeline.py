"""The steps every measurement of a point shares, whoever asks for it.

Three callers measure: :func:`benchbench.measure.point.measure_point` (a suite's
point, in a worker), :func:`benchbench.measure.variants.measure_variants`
(``benchbench time`` in a worker, ``benchbench.compare_variants`` in-process) and the
pytest ``bench`` fixture (in-process). Each makes its own inputs and subjects; the
rest is here, once:

- :func:`sync` waits for the point's device;
- :func:`check_output` compares an output with its reference: (reason it is wrong,
  accuracy);
- :func:`time_subjects` runs the engine with the point's clock and the policy
  adjusted for its device (:func:`policy_for_device`); on CUDA with NVML, the SM
  clock guarded between batches (:class:`benchbench.measure.gpu.ClockGuard`);
- :func:`ok_result` turns what the engine measured into a
  :class:`~benchbench.core.values.Result`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from benchbench.core.values import Point, Result
from benchbench.machine.nvml import cuda_uuid, load_nvml, sm_clock_reader
from benchbench.measure import gpu, timers
from benchbench.measure.accuracy import Accuracy, Tolerance, as_float64, compare
from benchbench.measure.gpu import ClockGuard
from benchbench.measure.policy import Measured, Policy, Subject, warnings_for
from benchbench.measure.policy import measure as engine_measure

#: Samples per synchronize on CUDA: a ``cuda.synchronize()`` costs ~10-20 µs of host
#: time and drains the launch queue; one per 10 rounds keeps kernels back to back.
CUDA_ROUNDS_PER_BATCH = 10


def sync(device: str) -> None:
    """Wait for all work queued on ``device`` (CUDA: that device, MPS); nothing on the CPU."""
    kind = device.partition(":")[0]
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


def policy_for_device(policy: Policy, point: Point) -> Policy:
    """``policy`` as used at ``point``: batched syncs on CUDA, the shuffle seeded by the point."""
    if point.device.startswith("cuda"):
        policy = replace(policy, rounds_per_batch=CUDA_ROUNDS_PER_BATCH)
    return replace(policy, seed=point.input_seed())


def check_output(
    output: Any,
    reference: Any,
    dtype: str,
    tolerance: Tolerance | None = None,
    reference_name: str | None = None,
) -> tuple[str | None, Accuracy | None]:
    """(why ``output`` is wrong or None, its :class:`Accuracy` or None).

    The tolerance is torch's default for ``dtype`` (see
    :mod:`benchbench.measure.accuracy`) unless ``tolerance`` is given. The accuracy is
    None when nothing was compared: the reference is not a tensor, array or number
    (reason None: unchecked), or the output is not one while the reference is (a
    wrong result). ``reference_name`` names the reference in the reason (a variant
    compared with another).
    """
    against = f" against {reference_name!r}" if reference_name else ""
    try:
        as_float64(reference)
    except TypeError:
        return None, None
    try:
        accuracy = compare(output, reference, dtype, tolerance)
    except TypeError:
        what = repr(reference_name) if reference_name else "the reference"
        return f"wrong result: returns {type(output).__name__}, {what} does not", None
    if accuracy.ok:
        return None, accuracy
    return f"wrong result{against}: {accuracy.why_wrong(dtype)}", accuracy


def time_subjects(
    point: Point,
    subjects: Sequence[Subject],
    policy: Policy,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[Policy, list[Measured]]:
    """Measure ``subjects`` interleaved with the clock of ``point``'s device.

    Returns the policy as adjusted for the device (pass it to :func:`ok_result`) and
    one :class:`Measured` per subject. ``should_stop`` is the engine's cancellation hook.
    """
    policy = policy_for_device(policy, point)
    timer = timers.timer_for(point.device, torch)
    guard = clock_guard(point.device)
    if guard is not None and hasattr(timer, "before_sync"):
        timer.before_sync = guard.note  # the clock read while the GPU runs the batch
    measured = engine_measure(
        subjects, timer, policy, should_stop=should_stop or _never, guard=guard
    )
    if guard is not None:
        measured = [
            replace(
                m,
                device_extra=guard.extra(m.discarded_samples),
                device_warnings=tuple(guard.warnings()),
            )
            for m in measured
        ]
    if point.device.startswith("cuda") and not (should_stop or _never)():
        measured = [
            device_checks(s, m, point.device) for s, m in zip(subjects, measured, strict=True)
        ]
    return policy, measured


#: ``torch.cuda._sleep``'s cycles per second, per device, measured once per process.
_SLEEP_RATE: dict[str, float] = {}


def device_checks(
    subject: Subject,
    measured: Measured,
    device: str,
    cuda: Any = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> Measured:
    """``measured`` with, in ``device_extra``, its launch share and its untimed share
    (:mod:`benchbench.measure.gpu`): the subject's block timed again behind a blocking
    kernel, and beside a device-wide synchronize. Neither where a block needs its
    ``pre`` (a flush, a restore, a lockstep turn: the share is None, nothing is
    checked), nor the launch share where this torch has no ``torch.cuda._sleep``."""
    cuda = cuda if cuda is not None else torch.cuda
    sleep = getattr(cuda, "_sleep", None)
    share = None
    facts: dict[str, Any] = {}
    warnings: list[str] = []
    if subject.pre is None and subject.gate is None and measured.samples_s:
        calls = measured.calls_per_sample
        facts, warnings = gpu.untimed_facts(gpu.untimed_share(subject.loop, calls, cuda, clock))
        if sleep is not None:
            if device not in _SLEEP_RATE:
                _SLEEP_RATE[device] = gpu.sleep_cycles_per_s(cuda, sleep)
            host = statistics.median(measured.host_samples_s or (0.0,)) / calls
            rate = _SLEEP_RATE[device]
            blocked = gpu.blocked_s_per_call(subject.loop, calls, host, cuda, sleep, rate)
            share = gpu.launch_share(statistics.median(measured.samples_s) / calls, blocked)
    launch, launch_warnings = gpu.launch_facts(share)
    return replace(
        measured,
        device_extra={**measured.device_extra, **launch, **facts},
        device_warnings=(*measured.device_warnings, *launch_warnings, *warnings),
    )


def clock_guard(device: str, nvml: Any = None, uuid: str | None = None) -> ClockGuard | None:
    """The SM clock guard of a CUDA ``device``; None elsewhere or without NVML.

    The GPU is found by its UUID (``uuid``, else torch's for the device), never by
    index: NVML's index is not CUDA's under ``CUDA_VISIBLE_DEVICES`` or CUDA's
    fastest-first order.
    """
    kind, _, index = device.partition(":")
    if kind != "cuda":
        return None
    nvml = nvml if nvml is not None else load_nvml()[0]
    if nvml is None:
        return None
    read = sm_clock_reader(nvml, uuid if uuid is not None else cuda_uuid(torch, int(index or 0)))
    return ClockGuard(read) if read is not None else None


def _never() -> bool:
    return False


def ok_result(
    point: Point,
    measured: Measured,
    policy: Policy,
    warnings: Sequence[str] = (),
    **fields: Any,
) -> Result:
    """The ``ok`` result of ``point`` from what the engine measured.

    The engine's warnings (not converged, noisy, short samples) come first, then
    ``warnings``; ``threads`` is torch's thread count unless ``fields`` gives it; any
    other :class:`Result` field (work model, accuracy, extra) comes in ``fields``.
    ``extra`` gains what the engine held and counted: ``gc`` (how the garbage
    collector was handled) and ``minor_faults_per_call``; on CUDA the host time beside
    the event time (``host_samples_s``, ``host_s_per_call``), the launch share
    (``launch_overhead``, ``launch_bound``) and the untimed share (:func:`device_checks`),
    the clock guard's ``discarded_samples``, ``throttle_reasons``, and the SM clock
    under load (``sm_clock_mhz``: NVML's read during the batches, else the rate
    ``torch.cuda._sleep`` counted; ``sm_clock_from`` says which) with
    ``cycles_per_call``, the median event time per call times that clock.
    """
    host = gpu.host_extra(measured.samples_s, measured.host_samples_s, measured.calls_per_sample)
    extra = {
        "gc": measured.gc,
        "minor_faults_per_call": measured.minor_faults_per_call,
        **host,
        **({"discarded_samples": measured.discarded_samples} if host else {}),
        **measured.device_extra,
        **fields.pop("extra", {}),
    }
    if not extra.get("sm_clock_mhz") and point.device in _SLEEP_RATE:
        # No NVML clock read under load (no NVML, a ROCm GPU, MIG): the clock that
        # ``torch.cuda._sleep`` counted in this process's stream, timed by events.
        extra["sm_clock_mhz"] = _SLEEP_RATE[point.device] / 1e6
        extra["sm_clock_from"] = "torch.cuda._sleep"
    elif extra.get("sm_clock_mhz"):
        extra["sm_clock_from"] = "nvml"
    if extra.get("sm_clock_mhz"):
        extra["cycles_per_call"] = gpu.cycles_per_call(
            extra["sm_clock_mhz"], measured.stats.median_s
        )
    return Result(
        point=point,
        status="ok",
        samples_s=measured.samples_s,
        calls_per_sample=measured.calls_per_sample,
        warmup=measured.warmup,
        converged=measured.converged,
        stop_reason=measured.stop_reason,
        warnings=(
            *warnings_for(measured, policy),
            *measured.device_warnings,
            *warnings,
        ),
        extra=extra,
        **{"threads": torch.get_num_threads(), **fields},
    )


def gated(
    subject: Subject,
    gate: Callable[[], None],
    device: str = "cpu",
    synchronize: Callable[[str], None] = sync,
) -> Subject:
    """``subject`` whose every calibrated and sampled block waits for ``gate`` first (then
    its own pre); its warm-up does not (:attr:`Subject.gate`): both sides of ``ab`` warm
    up at once, and neither samples until both asked for their first turn.

    On a GPU the side's queued work finishes before it asks for its turn: the timer
    queues a batch of blocks before one synchronize, so without it the turn would pass
    while this side's kernels still run, both sides' kernels would share the GPU, and
    each side's events would time the other's work too.
    """
    on_device = device.partition(":")[0] in ("cuda", "mps")

    def wait() -> None:
        if on_device:
            synchronize(device)
        gate()

    return replace(subject, gate=wait)
