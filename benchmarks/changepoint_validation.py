"""Validate benchbench.analysis.changepoint on synthetic histories; print a markdown table.

Each series has 100 points at level 1.0 with multiplicative noise of 2 %
(``value = level * exp(noise)``, so values stay positive):

- normal: sigma 2 %;
- student-t3: 2 % times a Student t with 3 degrees of freedom (heavy tails:
  1.5 % of points beyond 10 %);
- laplace: standard deviation 2 %.

Series kinds: ``flat``; ``step +10%`` / ``step -10%`` at a random index in [10, 90];
``creep`` of +1 % per point over 20 points starting at a random index in [10, 70],
then flat at +20 %; ``tail creep``: the same ramp over the last 20 points.

Columns: *detection* = share of series where the injected change is found (steps:
a change point of the right sign within 3 points; creeps: a worsening ``Creep``
whose start and end are within 5 points of the ramp's); *median loc. error* of the
found ones, in points; *false alerts* = share of series with a regression
(``regressions()``) not explained by the injected change (for ``step -10%``, any
regression); *CPU/series* = mean CPU time (``time.process_time``) of ``analyze()``
per series: the machines we run on are shared, and CPU time is what another
process's load disturbs least.

Run from the repository root: ``PYTHONPATH=. python benchmarks/changepoint_validation.py``
(``--series 1000 --seed 20240601`` are the defaults).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from benchbench.analysis.changepoint import SeriesAnalysis, analyze, regressions

N_POINTS = 100
NOISE_REL = 0.02
TOLERANCE = 3
CREEP_TOLERANCE = 5

Noise = Callable[[np.random.Generator, int], np.ndarray]
NOISES: dict[str, Noise] = {
    "normal": lambda rng, n: rng.normal(0.0, NOISE_REL, n),
    "student-t3": lambda rng, n: NOISE_REL * rng.standard_t(3, n),
    "laplace": lambda rng, n: rng.laplace(0.0, NOISE_REL / np.sqrt(2.0), n),
}


def make_series(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, int, int]:
    """Noise-free levels and the injected change: (levels, first index, last index)."""
    i = np.arange(N_POINTS)
    if kind == "flat":
        return np.ones(N_POINTS), -1, -1
    if kind in ("step +10%", "step -10%"):
        k = int(rng.integers(10, 91))
        return np.where(i >= k, 1.10 if kind == "step +10%" else 0.90, 1.0), k, k
    k = int(rng.integers(10, 71)) if kind == "creep" else N_POINTS - 20
    # +1 % per point: the value at k is already 1.01, the ramp ends at k + 19 (1.20).
    return 1.0 + 0.01 * np.clip(i - k + 1, 0, 20), k - 1, k + 19


def score(kind: str, a: SeriesAnalysis, first: int, last: int) -> tuple[float | None, bool]:
    """(location error if the change was found else None, false alert?)."""
    worse = regressions(a)
    if kind == "flat":
        return None, bool(worse)
    if kind.startswith("step"):
        up = kind == "step +10%"
        near = [abs(c.index - first) for c in a.change_points if (c.rel_change > 0) == up]
        near = [d for d in near if d <= TOLERANCE]
        extra = [c for c in worse if not up or abs(c.index - first) > TOLERANCE]
        return (min(near) if near else None), bool(extra)
    hits = [
        abs(c.start - first)
        for c in a.creeps
        if c.rel_change > 0
        and abs(c.start - first) <= CREEP_TOLERANCE
        and abs(c.end - last) <= CREEP_TOLERANCE
    ]
    extra = [c for c in worse if not first - TOLERANCE <= c.index <= last + TOLERANCE]
    return (min(hits) if hits else None), bool(extra)


def run(n_series: int, seed: int) -> list[str]:
    """Analyse every kind x noise and return the markdown table's lines."""
    lines = [
        "| series | noise | detection | median loc. error | false alerts | CPU/series |",
        "|---|---|---:|---:|---:|---:|",
    ]
    kinds = ["flat", "step +10%", "step -10%", "creep", "tail creep"]
    for kind in kinds:
        for noise_name, noise in NOISES.items():
            rng = np.random.default_rng([seed, kinds.index(kind), list(NOISES).index(noise_name)])
            errors: list[float] = []
            false_alerts = 0
            elapsed = 0.0
            for _ in range(n_series):
                levels, first, last = make_series(kind, rng)
                values = levels * np.exp(noise(rng, N_POINTS))
                t0 = time.process_time()
                a = analyze(values)
                elapsed += time.process_time() - t0
                error, false_alert = score(kind, a, first, last)
                if error is not None:
                    errors.append(error)
                false_alerts += false_alert
            detection = "n/a" if kind == "flat" else f"{len(errors) / n_series:.1%}"
            loc = f"{statistics.median(errors):.0f}" if errors else "n/a"
            lines.append(
                f"| {kind} | {noise_name} | {detection} | {loc} | "
                f"{false_alerts / n_series:.1%} | {elapsed / n_series * 1e3:.2f} ms |"
            )
    return lines


def time_long_series(seed: int, n_points: int = 365, repeats: int = 200) -> tuple[float, float]:
    """Mean (wall, CPU) seconds of analyze() on 2 %-noise series of ``n_points``.

    Half the series are flat, half have a +10 % step at a random index, so that the
    merge and creep stages run too.
    """
    rng = np.random.default_rng(seed)
    series = []
    for r in range(repeats):
        k = int(rng.integers(n_points // 10, n_points - n_points // 10))
        levels = np.where((np.arange(n_points) >= k) & (r % 2 == 1), 1.10, 1.0)
        series.append(levels * np.exp(rng.normal(0.0, NOISE_REL, n_points)))
    wall, cpu = time.perf_counter(), time.process_time()
    for values in series:
        analyze(values)
    return (time.perf_counter() - wall) / repeats, (time.process_time() - cpu) / repeats


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000, help="series per row")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    for line in run(args.series, args.seed):
        print(line)
    print()
    wall, cpu = time_long_series(args.seed)
    print(
        f"analyze() of a 365-point series: {wall * 1e3:.2f} ms wall, {cpu * 1e3:.2f} ms CPU (mean)"
    )


if __name__ == "__main__":
    main()
