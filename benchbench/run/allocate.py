"""Spending a run's budget where the uncertainty is (Kalibera & Jones, ISMM 2013).

A point's headline interval is two-level (:class:`~benchbench.core.stats.Stats`): its
width comes from how much the processes' medians disagree (between) and how precise
each median is (within). After the first rounds the runner knows both, per point, and
what a process costs: its fixed part (fork, inputs, warm-up, calibration, the check)
and its samples. Then:

- **how many samples a process should take**: the variance of the point's estimate is
  ``s_b^2 / k + s_w^2 / (k n)`` for ``k`` processes of ``n`` samples, and a process costs
  ``c_p + n c_s``; for a given cost the variance is smallest at
  ``n* = sqrt(c_p s_w^2 / (c_s s_b^2))`` (Kalibera & Jones's optimum for two
  levels): when processes disagree far more than samples do, a new process buys more
  than more samples in the same one;
- **which point gets the next process**: the one whose interval is furthest from the
  target (largest ``half-width / target``), one process at a time, re-judged after each;
- **until when**: every point is within target, or has :attr:`Rounds.max_count`
  processes, or the run's sampling budget left cannot pay for the next process's samples.

The run's **sampling budget** is ``--budget`` (seconds of samples per point) times the
points, stated when the run starts. The first rounds spend :data:`FIRST_SHARE` of it
(each process ``budget * FIRST_SHARE / rounds``); what they leave goes to the points that
need it. No process is started unless what is left covers its sampling cap with
:data:`HEADROOM`, so the samples of a run do not add up to more than its budget (the
fixed cost of processes is outside it, and measured: ``extra.processes[k].wall_s``).

This module is pure: :func:`spread_of` reads a merged result, :func:`next_process`
chooses; :class:`benchbench.run.visits.Visits` takes the processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchbench.core.stats import Stats, split_processes
from benchbench.core.values import Result

#: Share of a run's sampling budget the first rounds spend; the rest is allocated.
FIRST_SHARE = 0.5
#: A process is started only when the budget left covers this many times its cap: the
#: engine ends a process at its cap once it has its minimum samples, so one may take a
#: sample or so past it (a 10-sample process of samples 1.0-1.5 ms apart: 1.5x).
HEADROOM = 1.5
#: Fewest and most samples a process is planned for (the engine's own stopping rule
#: still ends a process early when its median is precise enough).
MIN_SAMPLES, MAX_SAMPLES = 10, 400


@dataclass(frozen=True)
class Spread:
    """Where a point's uncertainty is, from its processes so far.

    ``rel_half_width``: the two-level interval's half-width over the median;
    ``within_var`` and ``between_var``: variances of log per-call times within a process
    (pooled) and of the processes' log medians beyond what ``within_var`` explains;
    ``process_cost_s``: a process's mean cost besides its samples; ``sample_s``: one
    sample's time (median).
    """

    processes: int
    rel_half_width: float
    within_var: float
    between_var: float
    process_cost_s: float
    sample_s: float

    def samples_per_process(self) -> int:
        """``n*`` of the module docstring, within [MIN_SAMPLES, MAX_SAMPLES]."""
        if self.between_var <= 0 or self.sample_s <= 0:
            return MAX_SAMPLES  # the processes agree: only samples can narrow it
        ratio = self.process_cost_s * self.within_var / (self.sample_s * self.between_var)
        return int(min(MAX_SAMPLES, max(MIN_SAMPLES, math.ceil(math.sqrt(max(ratio, 0.0))))))

    def next_cap_s(self) -> float:
        """The sampling time to give the point's next process."""
        return self.samples_per_process() * self.sample_s


def spread_of(result: Result, walls_s: Sequence[float] = ()) -> Spread | None:
    """The spread of a merged result (None when it has no samples to judge).

    ``walls_s``: each process's wall time as the runner saw it (fork to answer), from
    which its samples' time is taken to leave its fixed cost.
    """
    if result.status != "ok" or not result.samples_s:
        return None
    stats = Stats.from_samples(result.samples_s, result.calls_per_sample, result.process_samples)
    parts = [
        np.log(np.asarray(part, dtype=np.float64))
        for part in split_processes(stats.per_call_s, result.process_samples)
    ]
    within = [float(np.var(p, ddof=1)) for p in parts if p.size > 1]
    within_var = float(np.mean(within)) if within else 0.0
    counts = [p.size for p in parts]
    medians = np.log(np.asarray(stats.process_medians_s, dtype=np.float64))
    between_var = 0.0
    if medians.size > 1:
        # A median of n samples varies by ~ (pi / 2) s_w^2 / n on its own.
        own = (math.pi / 2) * within_var * float(np.mean([1.0 / max(1, c) for c in counts]))
        between_var = max(0.0, float(np.var(medians, ddof=1)) - own)
    sample_s = float(np.median(result.samples_s))
    sampled = [sum(part) for part in split_processes(result.samples_s, result.process_samples)]
    costs = [max(0.0, w - s) for w, s in zip(walls_s, sampled, strict=False)]
    return Spread(
        processes=stats.processes,
        rel_half_width=stats.rel_ci_half_width,
        within_var=within_var,
        between_var=between_var,
        process_cost_s=float(np.mean(costs)) if costs else 0.0,
        sample_s=sample_s,
    )


def next_process(
    spreads: Mapping[int, Spread], target: float, left_s: float, max_processes: int
) -> tuple[int, float] | None:
    """The job to give one more process and that process's sampling cap in seconds, or
    None when every job is within ``target``, at ``max_processes``, or its next
    process's cap (times :data:`HEADROOM`) exceeds ``left_s`` (the run's sampling budget
    left)."""
    wanting = [
        (spread.rel_half_width / target, index, spread)
        for index, spread in spreads.items()
        if spread.processes < max_processes
        and not (spread.rel_half_width <= target)  # NaN (one process) wants more too
    ]
    for _distance, index, spread in sorted(wanting, key=_furthest):
        cap = spread.next_cap_s()
        if cap * HEADROOM <= left_s:
            return index, cap
    return None


def _furthest(item: tuple[float, int, Spread]) -> tuple[float, int]:
    distance, index, _spread = item
    return (-(distance if math.isfinite(distance) else math.inf), index)


#: Why a point that wanted more processes got none: the run's budget was spent.
BUDGET_SPENT = "budget spent"


def why_stopped(spread: Spread | None, target: float, max_processes: int) -> str:
    """Why a point got (or needs) no more processes: its words for the ``not converged``
    warning; :data:`BUDGET_SPENT` when it still wants one."""
    if spread is None or spread.rel_half_width <= target:
        return "target met"
    if spread.processes >= max_processes:
        return f"at most {max_processes} processes"
    return BUDGET_SPENT
