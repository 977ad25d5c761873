"""The run-to-run term of a machine, calibrated: what a suite with no history of its own
takes (``benchbench probe --run-to-run``).

A run's interval is its processes' (:mod:`benchbench.core.stats`); between runs a shared
machine adds a level of its own (Kalibera & Jones, ISMM 2013: the variance of a run's
mean has a run term and a process term). :mod:`benchbench.analysis.rerun` reads that level
from the suite's earlier runs; a suite's first runs in a store have none. The calibration
measures it once for the environment: a few runs, back to back, of a fixed set of points
(:data:`FILTER` of the ``quick`` suite), each in fresh processes as ``run`` measures.

**The estimate.** For each pair of consecutive calibration runs and each point both
measured in several processes, the log ratio ``d`` of the medians and the two standard
errors; if runs added a level of standard deviation ``s`` (in log units), ``d`` over
``sqrt(se_a² + se_b² + 2 s²)`` would follow Student's t, whose median ``|t|`` is
``t_0.75``. :func:`run_level` is the ``s`` at which the points' median of that ratio is
``t_0.75`` (0 when runs scatter no more than their intervals say): the rule of the factor
of a suite's own history, with the run level added to each point's variance rather than
multiplying it, because the calibration's points are not the suite's: a run level in log
units carries from one set of points to another, a multiple of a point's own process
spread does not.

**Where it goes.** A point of a run whose suite holds no earlier pair of runs takes the
factor ``sqrt(1 + s² / se²)`` (its own ``se``): its interval is then ``t · sqrt(se² +
s²)`` wide (:meth:`Calibration.own`). A suite's own history, once it holds a pair, comes
first: it is the suite's, on this machine, at the hours it runs. What is stored is each
calibration run's points (log headline, standard error, processes), so the estimate is
derived on read, as a run's statistics are.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.core.errors import StoreError
from benchbench.core.stats import t_quantile

#: The points a calibration measures: of the ``quick`` suite, every variant at 4 Ki and 1 Mi
#: elements and the 64x64 matmul (15 points, ~13 s a run on a 2-core VM).
SUITE = "quick"
FILTER = r"n=(4096|1048576|64x64)\)"
#: The device a calibration measures, and the only one whose points take it.
DEVICE = "cpu"
#: The version of the stored document (:meth:`Calibration.to_dict`).
VERSION = 1
#: Matched points a calibration needs over its pairs.
MIN_SCORES = 10

#: A run's points as the term reads them: benchmark id -> (log headline, its standard
#: error, processes) (:func:`benchbench.analysis.rerun.points`).
Points = Mapping[Any, tuple[float, float, int]]


def _pairs(runs: Sequence[Points]) -> list[tuple[float, float, int]]:
    """Each point of each consecutive pair: (log ratio, summed variance, degrees of freedom)."""
    out = []
    for first, then in itertools.pairwise(runs):
        for key, (log_b, se_b, k_b) in then.items():
            old = first.get(key)
            if old is not None and old[1] ** 2 + se_b**2 > 0:
                out.append((log_b - old[0], old[1] ** 2 + se_b**2, old[2] + k_b - 2))
    return out


def run_level(runs: Sequence[Points]) -> tuple[float, int] | None:
    """The run level's standard deviation in log units, and the matched points it was
    read from; None below :data:`MIN_SCORES` points. Solved by bisection: the points'
    median ``|d| / sqrt(v + 2 s²)`` falls as ``s`` grows."""
    scores = _pairs(runs)
    if len(scores) < MIN_SCORES:
        return None
    expected = t_quantile(max(1.0, statistics.median(d for _, _, d in scores)), 0.5)

    def median_t(level: float) -> float:
        return statistics.median(abs(x) / math.sqrt(v + 2 * level * level) for x, v, _ in scores)

    if median_t(0.0) <= expected:
        return 0.0, len(scores)
    low, high = 0.0, max(abs(x) for x, _, _ in scores)
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if median_t(middle) > expected else (low, middle)
    return (low + high) / 2, len(scores)


@dataclass(frozen=True)
class Calibration:
    """A calibration's runs (each its points), when it was taken, and the run level read
    from them (:func:`run_level`)."""

    runs: tuple[Mapping[Any, tuple[float, float, int]], ...]
    measured_at: str
    level: float
    points: int

    @classmethod
    def of(cls, runs: Sequence[Points], measured_at: str) -> Calibration | None:
        """The calibration of ``runs`` (oldest first), None when too few points matched."""
        found = run_level(runs)
        if found is None:
            return None
        return cls(tuple(dict(r) for r in runs), measured_at, found[0], found[1])

    @property
    def pairs(self) -> int:
        return max(0, len(self.runs) - 1)

    def own(self, points: Points) -> dict[Any, float]:
        """Each several-process point's factor, ``sqrt(1 + s² / se²)``."""
        level = self.level * self.level
        return {
            key: math.sqrt(1.0 + level / (se * se)) for key, (_, se, _) in points.items() if se > 0
        }

    @property
    def words(self) -> str:
        """``machine calibrated 2026-12-06: ±1.2 % a run``."""
        level = math.expm1(self.level) * 100
        return f"machine calibrated {self.measured_at[:10]}: ±{level:.1f} % a run"

    def to_dict(self) -> dict[str, Any]:
        """The stored document: the runs' points, not the level (derived on read)."""
        return {
            "calibration_version": VERSION,
            "measured_at": self.measured_at,
            "suite": SUITE,
            "filter": FILTER,
            "runs": [[[str(k), *v] for k, v in run.items()] for run in self.runs],
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Calibration | None:
        """A stored document read back (None when its points no longer make one)."""
        if not isinstance(doc, Mapping) or doc.get("calibration_version") != VERSION:
            raise StoreError(
                f"run-to-run calibration: calibration_version "
                f"{doc.get('calibration_version') if isinstance(doc, Mapping) else None!r} "
                f"is not {VERSION}; run 'benchbench probe --run-to-run' again"
            )
        try:
            runs = [
                {str(k): (float(log), float(se), int(n)) for k, log, se, n in run}
                for run in doc["runs"]
            ]
            return cls.of(runs, str(doc["measured_at"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(
                f"run-to-run calibration: malformed document ({type(exc).__name__}: {exc}); "
                "run 'benchbench probe --run-to-run' again"
            ) from exc


def device_key(device: str) -> str:
    """The profile table's device column for ``device``'s calibration (``cpu#run-to-run``):
    beside the device's ceilings, never read as them."""
    return f"{device.partition(':')[0]}#run-to-run"


def calibration_of(
    store: Any, run: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> Calibration | None:
    """The newest calibration of ``run``'s environment in ``store``, or None: also when a
    point of ``rows`` is on another device than the calibration's, the CPU (a GPU's
    kernels do not move with the host's run level)."""
    env_id = run.get("environment_id")
    if env_id is None or any(r.get("device", "cpu") != DEVICE for r in rows):
        return None
    from benchbench.store.profiles import latest_profile

    row = latest_profile(store, str(env_id), device_key(DEVICE))
    return Calibration.from_dict(row["data"]) if row is not None else None
