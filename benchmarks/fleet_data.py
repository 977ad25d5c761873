"""A generated year of a fleet's nightly runs, written through the store's own write path.

20 machines x 2,000 points x 365 nights (about 15 million measurements at scale 1).
Each (machine, point) series has a base level from a ``t = t0 + bytes / rate`` model and
the machine's speed, a slow random-walk drift (0.2 % a night), occasional steps (a
machine-wide one on about 4 nights a year that moves 30 % of its points, and a point's
own on about one night in 1,000), night-to-night log-normal noise (1-4 %, larger for
small sizes), nights a machine is down (3 %) and points that fail (0.1 %). Each
measurement has 10 raw samples from 3 worker processes (4 + 3 + 3, the default 3
rounds), each process with its own offset, and the ``extra`` / ``warmup`` / telemetry
documents ``benchbench run`` writes beside them, so that the store's size per
measurement is what a real run's is with few samples.

Used by ``benchmarks/store_bench.py --fleet-year``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import multiprocessing
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchbench.core.values import Point, Result
from benchbench.machine.environment import Environment
from benchbench.store import Store

MACHINES, POINTS, NIGHTS = 20, 2000, 365
#: Machines from this index on run the CUDA points (a mixed fleet: 14 CPU, 6 GPU boxes).
FIRST_GPU = 14
SAMPLES = (4, 3, 3)  # samples per worker process: 3 rounds, 10 samples
T0 = dt.datetime(2026, 1, 1, 1, 0, tzinfo=dt.timezone.utc)
WORKLOADS = (
    "add", "mul", "sqrt", "rsqrt", "exp", "log", "sin", "tanh", "sigmoid", "gelu",
    "relu", "softmax", "layer_norm", "sum", "mean", "amax", "cumsum", "sort", "topk",
    "matmul", "bmm", "conv1d", "index_select", "gather", "copy",
)  # fmt: skip
VARIANTS = ("torch", "compiled")
DTYPES = ("float32", "bfloat16")
SIZES = tuple(2**k for k in range(10, 30))  # 1 Ki to 512 Mi elements: 20 sizes


@dataclass(frozen=True)
class FleetShape:
    """How many machines, points per run and nights a fill writes."""

    machines: int
    points: int
    nights: int

    @property
    def measurements(self) -> int:
        """Upper bound (before down nights): machines x points x nights."""
        return self.machines * self.points * self.nights

    @classmethod
    def scaled(cls, scale: float, scale_of: str) -> FleetShape:
        """``scale`` multiplies the points per run (``scale_of="points"``: every series
        keeps its 365 nights) or the nights (``"nights"``: every run keeps 2,000 points)."""
        if not 0 < scale <= 1:
            raise SystemExit(f"--scale must be in (0, 1], got {scale}")
        if scale_of == "points":
            return cls(MACHINES, max(1, round(POINTS * scale)), NIGHTS)
        return cls(MACHINES, POINTS, max(8, round(NIGHTS * scale)))


def fleet_points(count: int, device: str) -> list[Point]:
    """``count`` points spread evenly over the 2,000-point grid (25 workloads x 2 variants
    x 2 dtypes x 20 sizes), so that a small fill still spans workloads and sizes."""
    grid = [
        (w, v, d, s) for w in WORKLOADS for v in VARIANTS for d in DTYPES for s in SIZES
    ]  # fmt: skip
    chosen = np.linspace(0, len(grid) - 1, count).round().astype(int) if count > 1 else [0]
    return [
        Point("fleet", w, f"{v}.{w}", s, (s,), d, device)
        for w, v, d, s in (grid[int(i)] for i in chosen)
    ]


def environment(machine: int) -> Environment:
    gpu = machine >= FIRST_GPU
    fields = {
        "machine": f"fleet-{machine:02d}",
        "cpu_model": "AMD EPYC 9654" if machine % 2 else "Intel Xeon Platinum 8480+",
        "cpu_count": 96,
        "threads": 8,
        "gpus": ["NVIDIA H100 80GB HBM3"] if gpu else [],
        "torch": "2.13.0",
        "cuda": "12.8" if gpu else None,
        "python": "3.12.8",
    }
    info = {"hostname": f"fleet-{machine:02d}.lab", "kernel": "6.8.0", "ram_bytes": 2**39}
    return Environment(fields=fields, info=info)


def levels(points: list[Point], nights: int, machine: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-call time of every (point, night) of one machine (median level, no noise yet),
    and each point's night-to-night noise (log-normal sigma)."""
    rng = np.random.default_rng(1000 + machine)
    sizes = np.array([p.size for p in points], dtype=np.float64)
    gpu = points[0].device == "cuda"
    rate = (2e11 if gpu else 2e10) * (0.8 + 0.05 * (machine % 8))  # bytes/s
    t0 = (8e-6 if gpu else 2e-6) * rng.uniform(0.7, 1.3, len(points))
    base = (t0 + 4 * sizes / rate) * rng.uniform(0.5, 3.0, len(points))
    drift = np.cumsum(rng.normal(0, 0.002, (len(points), nights)), axis=1)
    steps = np.zeros((len(points), nights))
    for night in rng.choice(nights, size=max(1, nights // 90), replace=False):
        moved = rng.random(len(points)) < 0.3  # a machine-wide change (driver, kernel)
        steps[moved, night:] += rng.normal(0, 0.08)
    own = rng.random((len(points), nights)) < 1e-3  # one point's own change
    steps += np.cumsum(own * rng.choice([-1, 1], own.shape) * rng.uniform(0.05, 0.3), axis=1)
    noise = np.where(sizes < 2**16, 0.04, 0.01) * rng.uniform(0.8, 1.2, len(points))
    return base[:, None] * np.exp(drift + steps), noise


def night_results(
    points: list[Point], level: np.ndarray, noise: np.ndarray, rng: np.random.Generator
) -> list[Result]:
    """One run's results: 10 samples in 3 processes per point; 0.1 % of points fail."""
    count = len(points)
    night = level * np.exp(rng.normal(0, noise))
    offsets = np.repeat(np.exp(rng.normal(0, noise[:, None] / 2, (count, 3))), SAMPLES, axis=1)
    per_call = night[:, None] * offsets * np.exp(rng.normal(0, 0.01, (count, sum(SAMPLES))))
    calls = np.maximum(1, np.round(1e-3 / night)).astype(int)
    samples = (per_call * calls[:, None]).tolist()
    cuts = np.cumsum((0, *SAMPLES))
    medians = np.stack(
        [np.median(per_call[:, a:b], axis=1) for a, b in itertools.pairwise(cuts)], 1
    )
    failed = rng.random(count) < 1e-3
    telemetry = {
        "duration_s": 0.31, "n_samples": 6,
        "metrics": {"cpu_freq_mhz": {"min": 2400.0, "mean": 2587.5, "max": 2600.0, "n": 6},
                    "load_1m": {"min": 0.9, "mean": 1.1, "max": 1.3, "n": 6}},
        "busy_processes": [], "gpu_throttle_reasons": {}, "gpu_processes": [],
        "sampler_cpu_s": 0.0006, "cpus": [0, 1], "measured_cpu_s": 0.3,
    }  # fmt: skip
    out = []
    for i, p in enumerate(points):
        if failed[i]:
            out.append(Result(point=p, status="error", reason="RuntimeError: worker crashed "
                              "(exit code -11) while measuring", duration_s=0.5))  # fmt: skip
            continue
        c = int(calls[i])
        process_medians = medians[i].tolist()
        extra = {
            "gc": "collected, disabled while timing",
            "tolerance": {"rtol": 1.3e-06, "atol": 1e-05},
            "nonfinite": 0,
            "outputs": "keep",
            "processes": [
                {
                    "calls_per_sample": c,
                    "samples": k,
                    "median_s": m,
                    "stop_reason": "time cap reached",
                }
                for k, m in zip(SAMPLES, process_medians, strict=True)
            ],
        }
        out.append(
            Result(
                point=p,
                status="ok",
                samples_s=tuple(samples[i]),
                calls_per_sample=c,
                warmup={"first_call_s": 3e-5, "calls": 10.0 * c, "time_s": 0.1},
                converged=True,
                stop_reason="3 processes: CI within 1.0% of the median",
                threads=8,
                bytes_per_call=8.0 * p.size,
                max_rel_error=2.7e-9,
                max_abs_error=2.9e-6,
                peak_memory_bytes=8 * p.size,
                telemetry=telemetry,
                extra=extra,
                duration_s=0.3,
                process_samples=SAMPLES,
            )
        )
    return out


def sha(night: int) -> str:
    """The commit of the code under test on ``night`` (one nightly build a night)."""
    return hashlib.sha1(f"nightly-{night}".encode()).hexdigest()


def write_night(
    store: Store, night: int, series: list[tuple[Environment, list[Point], Any, Any]]
) -> int:
    """Every machine's run of ``night`` (a machine is down on 3 % of nights), one
    ``Store.write_results`` transaction per run, as ``benchbench import`` of a bundle
    or a run's bulk write stores it. Returns the measurements written."""
    written = 0
    for machine, (env, points, level, noise) in enumerate(series):
        rng = np.random.default_rng((night, machine))
        if night > 0 and rng.random() < 0.03:
            continue  # the machine was down
        started = T0 + dt.timedelta(days=night, minutes=7 * machine)
        run_id = str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | night << 8 | machine))
        store.create_run(
            {
                "id": run_id, "group_id": run_id, "kind": "nightly",
                "label": f"nightly-{started:%Y-%m-%d}", "status": "finished",
                "started_at": started, "finished_at": started + dt.timedelta(hours=2),
                "suites": [{"name": "fleet", "hash": "6e170bf57dce9d1e"}],
                "harness_version": "0.1.0", "git_sha": sha(night), "git_branch": "main",
                "git_dirty": False, "tags": ["nightly"], "config": {"rounds": 3},
                "environment_id": env.id,
            }
        )  # fmt: skip
        written += store.write_results(run_id, night_results(points, level[:, night], noise, rng))
    return written


def fill(
    store: Store,
    shape: FleetShape,
    nights: range,
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
) -> dict[str, float]:
    """Write ``nights`` of the fleet; returns wall seconds and measurements written.

    ``jobs`` > 1 writes in that many processes, each its share of the nights (every run
    is generated from its own seed, so the store is the same whatever the split)."""
    for machine in range(shape.machines):
        store.save_environment(environment(machine))
    if jobs > 1:
        start = time.perf_counter()
        shares = [(store.url, shape, nights[i::jobs]) for i in range(jobs)]
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            written = sum(pool.starmap(_fill_share, shares))
        return {"fill_s": time.perf_counter() - start, "measurements": written, "jobs": jobs}
    series = []
    for machine in range(shape.machines):
        env = environment(machine)
        points = fleet_points(shape.points, "cuda" if machine >= FIRST_GPU else "cpu")
        level, noise = levels(points, shape.nights, machine)
        series.append((env, points, level, noise))
    start, written = time.perf_counter(), 0
    for night in nights:
        written += write_night(store, night, series)
        if progress and night % 30 == 29:
            progress(f"night {night + 1}: {written} measurements, "
                     f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    return {"fill_s": time.perf_counter() - start, "measurements": written}


def _fill_share(url: str, shape: FleetShape, nights: range) -> int:
    from benchbench.store import open_store

    def progress(text: str) -> None:
        print(f"[{nights.start}::{nights.step}] {text}", file=sys.stderr, flush=True)

    return int(fill(open_store(url), shape, nights, progress)["measurements"])
