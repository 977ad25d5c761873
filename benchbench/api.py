"""``benchbench.bench`` and ``benchbench.compare``: one call to measure, one to judge.

For scripts and notebooks, in the spirit of ``torch.utils.benchmark.Timer(...)
.blocked_autorange()`` and ``triton.testing.do_bench(fn)``, measured by the same point
pipeline as ``benchbench run`` (:func:`benchbench.measure.pipeline.time_subjects`: the
device's clock and synchronisation, warm-up, calibration to samples of at least 1 ms,
adaptive stopping on the median's interval) and judged by the same verdict as
``benchbench compare`` (:mod:`benchbench.analysis.verdict`).

Where the call can be rebuilt in another process (a function importable by name, such as
``torch.sqrt``, and arguments that pickle, on the CPU) each round runs in a fresh Python
process (started afresh, not forked: it shares no state with the caller), as a run's
rounds do, and the interval is over the processes' medians. Otherwise
(a lambda, a function defined in a notebook, a GPU tensor) every sample comes from this
process, and the result says so (``isolation``).
"""

from __future__ import annotations

import functools
import html
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchbench.core.defaults import ALPHA, BENCH_ROUNDS, MIN_EFFECT, POLICY_MAX_TIME_S
from benchbench.core.errors import UsageError
from benchbench.core.units import format_time

if TYPE_CHECKING:
    from benchbench.analysis.verdict import Estimate
    from benchbench.core.stats import Stats


class BenchError(UsageError, ValueError):
    """A wrong argument to :func:`bench` or :func:`compare`: a :class:`UsageError` (exit
    code 2 in the CLI) that is also a ``ValueError``, as Python callers expect."""


#: ``isolation`` of a measurement whose rounds ran in fresh processes.
FRESH_PROCESSES = "fresh processes"
#: ``isolation`` of a measurement taken in the calling process.
IN_PROCESS = "in-process"


@dataclass(frozen=True)
class Measurement:
    """What :func:`bench` measured: every per-call sample, and the statistics of them.

    ``median_s``, ``ci_low_s`` and ``ci_high_s`` are the median time per call and its
    95 % interval (over the processes' medians when there were several); ``processes``
    says how many processes took the samples and ``isolation`` whether they were fresh
    ones or the calling process. ``items_per_s``, ``bytes_per_s`` and ``flop_per_s`` are
    set when a work model was given to :func:`bench`.
    """

    name: str
    device: str
    per_call_s: tuple[float, ...]
    process_samples: tuple[int, ...]
    isolation: str
    converged: bool
    warnings: tuple[str, ...] = ()
    items: float | None = None
    bytes: float | None = None
    flops: float | None = None

    @functools.cached_property
    def stats(self) -> Stats:
        """The samples' statistics (:class:`benchbench.core.stats.Stats`)."""
        from benchbench.core.stats import Stats

        return Stats.from_samples(self.per_call_s, 1, self.process_samples)

    @property
    def median_s(self) -> float:
        return self.stats.median_s

    @property
    def ci_low_s(self) -> float:
        return self.stats.ci_low_s

    @property
    def ci_high_s(self) -> float:
        return self.stats.ci_high_s

    @property
    def processes(self) -> int:
        return self.stats.processes

    @property
    def samples(self) -> int:
        return len(self.per_call_s)

    def _rate(self, work: float | None) -> float | None:
        return None if work is None else work / self.median_s

    @property
    def items_per_s(self) -> float | None:
        return self._rate(self.items)

    @property
    def bytes_per_s(self) -> float | None:
        return self._rate(self.bytes)

    @property
    def flop_per_s(self) -> float | None:
        return self._rate(self.flops)

    def _throughputs(self) -> list[str]:
        rates = [
            (self.items_per_s, "items/s"),
            (self.bytes_per_s, "B/s"),
            (self.flop_per_s, "FLOP/s"),
        ]
        return [f"{_si(rate)}{unit}" for rate, unit in rates if rate is not None]

    def _fields(self) -> list[tuple[str, str]]:
        fields = [
            ("median", format_time(self.median_s)),
            (
                "95% interval",
                f"{format_time(self.ci_low_s)} to {format_time(self.ci_high_s)}",
            ),
            ("processes", f"{self.processes} ({self.isolation})"),
            ("samples", str(self.samples)),
        ]
        fields += [("throughput", t) for t in self._throughputs()]
        if not self.converged:
            fields.append(("note", "the interval did not reach the target within the budget"))
        return fields

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in self._fields())
        return f"<Measurement {self.name} on {self.device}: {parts}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self._fields()
        )
        title = html.escape(f"{self.name} on {self.device}")
        return f"<table><caption>{title}</caption>{rows}</table>"


@dataclass(frozen=True)
class Comparison:
    """:func:`compare`'s answer: ``b`` over ``a``, with ``benchbench compare``'s verdict.

    ``ratio`` is b's median time over a's (above 1: b is slower) with its ``1 - alpha``
    interval; ``verdict`` is ``faster``, ``slower``, ``same`` or ``not significant``.
    """

    a: Measurement
    b: Measurement
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    min_effect: float

    def __repr__(self) -> str:
        return (
            f"<Comparison {self.b.name} vs {self.a.name}: {self.verdict}, ratio "
            f"{self.ratio:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}], p {self.p_value:.3g} "
            f"(min effect {self.min_effect:.0%})>"
        )

    def _repr_html_(self) -> str:
        rows = [
            ("a", f"{self.a.name}: {format_time(self.a.median_s)}"),
            ("b", f"{self.b.name}: {format_time(self.b.median_s)}"),
            ("ratio b / a", f"{self.ratio:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"),
            ("p-value", f"{self.p_value:.3g}"),
            ("verdict", f"{self.verdict} (min effect {self.min_effect:.0%})"),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in rows
        )
        return f"<table>{body}</table>"


def _si(value: float) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g} "


def _check_device(device: str, torch: Any) -> str:
    from benchbench.measure import timers

    try:
        torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise BenchError(
            f"bench(): device {device!r} is not a device name; give 'cpu', 'cuda', "
            "'cuda:N' or 'mps'"
        ) from exc
    reason = timers.unavailable_reason(device, torch)
    if reason is not None:
        raise BenchError(f"bench(): device {device!r} is not available here: {reason}")
    return device


def _measure_here(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: dict[str, object],
    device: str,
    budget_s: float,
    threads: int | None = None,
) -> tuple[tuple[float, ...], bool, tuple[str, ...]]:
    """One process's samples of ``fn(*args, **kwargs)``: per-call times, converged,
    warnings."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)

    from benchbench.core.values import Point
    from benchbench.measure.loops import make_loop
    from benchbench.measure.pipeline import ok_result, time_subjects
    from benchbench.measure.policy import Policy, Subject

    call = functools.partial(fn, **kwargs) if kwargs else fn
    tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
    point = Point(
        suite="bench",
        workload="bench",
        variant="fn",
        size=int(tensor.numel()) if tensor is not None else 1,
        shape=tuple(tensor.shape) if tensor is not None and tensor.dim() > 0 else (1,),
        dtype=str(tensor.dtype).removeprefix("torch.") if tensor is not None else "float32",
        device=device,
    )
    policy = Policy(max_time_s=budget_s)
    used, (measured,) = time_subjects(point, [Subject("fn", make_loop(call, args))], policy)
    result = ok_result(point, measured, used)
    per_call = tuple(s / result.calls_per_sample for s in result.samples_s)
    return per_call, bool(result.converged), tuple(result.warnings)


_CHILD = (
    "import pickle, sys\n"
    "from benchbench.api import _measure_here\n"
    "with open(sys.argv[1], 'rb') as f: request = pickle.load(f)\n"
    "answer = _measure_here(*request)\n"
    "with open(sys.argv[2], 'wb') as f: pickle.dump(answer, f)\n"
    "sys.stdout.flush(); sys.stderr.flush()\n"
    "import os; os._exit(0)  # torch's teardown costs ~1 s of CPU and says nothing\n"
)


def _measure_in_fresh_process(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: dict[str, object],
    device: str,
    budget_s: float,
    threads: int,
) -> tuple[tuple[float, ...], bool, tuple[str, ...]]:
    """:func:`_measure_here` in a new Python process; the request and the answer travel
    as pickles through two temporary files."""
    from benchbench.core.errors import MeasurementError

    with tempfile.TemporaryDirectory(prefix="benchbench-") as folder:
        request, answer = os.path.join(folder, "request"), os.path.join(folder, "answer")
        with open(request, "wb") as f:
            pickle.dump((fn, args, kwargs, device, budget_s, threads), f)
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, request, answer],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not os.path.exists(answer):
            tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise MeasurementError(
                f"bench(): the measuring process exited {done.returncode}: {tail[0]}"
            )
        with open(answer, "rb") as f:
            result: tuple[tuple[float, ...], bool, tuple[str, ...]] = pickle.load(f)
        return result


def _rebuildable(fn: Callable[..., object], args: tuple[object, ...], kwargs: Any) -> bool:
    """Whether a fresh process can rebuild the call: ``fn`` importable by name and the
    arguments picklable."""
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", "") or ""
    if module in ("__main__", "") or "<" in qualname or module.startswith("__"):
        return False
    try:
        pickle.dumps((fn, args, kwargs))
    except Exception:
        return False
    return True


def bench(
    fn: Callable[..., object],
    *args: object,
    device: str | None = None,
    name: str | None = None,
    rounds: int = BENCH_ROUNDS,
    budget_s: float = POLICY_MAX_TIME_S,
    items: float | None = None,
    bytes: float | None = None,  # the work model's name in suites and results
    flops: float | None = None,
    threads: int | None = None,
    **kwargs: object,
) -> Measurement:
    """Measure ``fn(*args, **kwargs)`` and return a :class:`Measurement`.

    :param device: where to time (``cpu``, ``cuda``, ``cuda:N``, ``mps``): tensor
        arguments are moved there. Default: the device of the first tensor argument,
        else the CPU. A device this machine does not have is a :class:`UsageError`.
    :param name: the name shown (default: the function's name).
    :param rounds: processes to measure in (fresh ones when the call can be rebuilt in
        one; otherwise every sample is taken in this process), as ``run --rounds``.
    :param budget_s: sampling time in all, split across the rounds, as ``run --budget``.
    :param threads: torch's threads while measuring (default: the caller's
        ``torch.get_num_threads()``, in every process), as ``run --threads``.
    :param items: items per call (elements, tokens...), for ``items_per_s``; ``bytes``
        and ``flops`` likewise. Without them no throughput is given.
    :raises BenchError: (a ``ValueError``) ``fn`` is not callable, or the device is not
        present.
    """
    if not callable(fn):
        raise BenchError(
            f"bench() needs a callable first, got {type(fn).__name__} {fn!r}: "
            "pass the function and its arguments, bench(torch.sqrt, x), not its result"
        )
    if rounds < 1:
        raise BenchError(f"bench(): rounds must be at least 1, got {rounds}")
    if budget_s <= 0:
        raise BenchError(f"bench(): budget_s must be positive, got {budget_s}")
    import torch

    from benchbench.measure import timers

    where = _check_device(device or timers.device_of(args, torch), torch)
    if device is not None:
        args = tuple(a.to(where) if isinstance(a, torch.Tensor) else a for a in args)
    label = name or getattr(fn, "__name__", None) or repr(fn)
    if threads is not None and threads < 1:
        raise BenchError(f"bench(): threads must be at least 1, got {threads}")
    threads = threads or torch.get_num_threads()
    per_round = budget_s / rounds
    fresh = rounds > 1 and where == "cpu" and _rebuildable(fn, args, kwargs)
    parts: list[tuple[tuple[float, ...], bool, tuple[str, ...]]] = []
    if fresh:
        for _ in range(rounds):
            parts.append(
                _measure_in_fresh_process(fn, args, dict(kwargs), where, per_round, threads)
            )
    else:
        previous = torch.get_num_threads()
        try:
            parts.append(_measure_here(fn, args, dict(kwargs), where, budget_s, threads))
        finally:
            torch.set_num_threads(previous)
    per_call = tuple(s for samples, _, _ in parts for s in samples)
    warnings = tuple(dict.fromkeys(w for _, _, ws in parts for w in ws))
    return Measurement(
        name=label,
        device=where,
        per_call_s=per_call,
        process_samples=tuple(len(p[0]) for p in parts) if fresh else (),
        isolation=FRESH_PROCESSES if fresh else IN_PROCESS,
        converged=all(c for _, c, _ in parts),
        warnings=warnings,
        items=items,
        bytes=bytes,
        flops=flops,
    )


def compare(
    a: Measurement, b: Measurement, min_effect: float = MIN_EFFECT, alpha: float = ALPHA
) -> Comparison:
    """Judge ``b`` against ``a`` by ``benchbench compare``'s verdict: the ratio of their
    medians (b over a) with its interval, and ``faster``, ``slower``, ``same`` or ``not
    significant`` beyond ``min_effect`` at ``alpha`` (by default
    :data:`benchbench.core.defaults.MIN_EFFECT` and :data:`~benchbench.core.defaults.ALPHA`)."""
    for side, value in (("a", a), ("b", b)):
        if not isinstance(value, Measurement):
            raise BenchError(
                f"compare(): {side} must be a Measurement from benchbench.bench(), "
                f"got {type(value).__name__}"
            )
    from benchbench.analysis.verdict import estimate_stats, mark

    found: Estimate = estimate_stats(a.stats, b.stats, paired=False, alpha=alpha)
    return Comparison(
        a=a,
        b=b,
        ratio=found.ratio,
        ci_low=found.ci_low,
        ci_high=found.ci_high,
        p_value=found.p_value,
        verdict=mark(found, min_effect),
        min_effect=min_effect,
    )
