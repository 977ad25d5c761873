"""The harness's own trustworthiness and cost (BENCHMARKS.md, "Foundation (issue 2)").

    python benchmarks/harness_bench.py floor accuracy agreement cost

floor      per-call time reported for an empty callable vs `timeit` (best of 5), 5 rounds
           interleaved in one process.
accuracy   busy-waits of 10 µs, 100 µs, 1 ms: median of the reported medians over 5 runs.
agreement  torch.sqrt / torch.add at 2^16 and 2^20 vs torch.utils.benchmark's
           Timer.blocked_autorange(), interleaved in one process, 5 rounds. Timer runs
           with one thread unless told (num_threads=1 is its default): it is given
           torch's thread count, the one benchbench measures with.
cost       wall time per point and spread (max/min of the medians) over 5 repetitions,
           for benchbench's engine, Timer.adaptive_autorange(threshold=0.01) and
           `python -m pyperf timeit --fast`, on a subset of the quick suite's points.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import torch
import torch.utils.benchmark as tbench

from benchbench.measure.loops import make_loop
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy, Subject, measure
from benchbench.measure.timers import CpuTimer
from benchbench.suite.inputs import SetupContext
from benchbench.suite.load import load_suite

ROOT = Path(__file__).resolve().parents[1]


def engine_median(fn, args=(), policy: Policy | None = None, pre=None) -> float:
    (result,) = measure([Subject("f", make_loop(fn, args), pre)], CpuTimer(), policy or Policy())
    return result.stats.median_s


def point_median(workload, point) -> tuple[float, float]:
    """benchbench's whole per-point path in-process: (median per call, wall seconds)."""
    started = time.perf_counter()
    result = measure_point(workload, point, Options())
    wall = time.perf_counter() - started
    return statistics.median(s / result.calls_per_sample for s in result.samples_s), wall


def quick_point(suite, workload_name: str, variant: str, n: int):
    """A quick-suite point, its inputs as a namespace, and the statement calling it."""
    workload = suite.get(workload_name)
    point = next(p for p in workload.points() if p.variant == variant and p.size == n)
    inputs = workload.setup(SetupContext(point))
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    names = ["x", "y"][: len(inputs)]
    namespace = {"torch": torch, **dict(zip(names, inputs, strict=True))}
    return workload, point, namespace, f"{variant}({', '.join(names)})"


def floor() -> None:
    def empty() -> None:
        return None

    rows = []
    for _ in range(5):
        bb = engine_median(empty)
        timer = timeit.Timer(empty)
        number, _ = timer.autorange()
        ti = min(timer.repeat(repeat=5, number=number)) / number
        rows.append((bb, ti))
    print("## harness floor: empty callable, ns per call")
    print("| round | benchbench median | timeit best of 5 | ratio |")
    print("|---|---|---|---|")
    for i, (bb, ti) in enumerate(rows):
        print(f"| {i + 1} | {bb * 1e9:.1f} | {ti * 1e9:.1f} | {bb / ti:.3f} |")
    ratio = statistics.median(bb / ti for bb, ti in rows)
    print(f"\nmedian ratio {ratio:.3f} (goal <= 1.1)\n")


def spin(ns: int):
    clock = time.perf_counter_ns

    def wait() -> None:
        end = clock() + ns
        while clock() < end:
            pass

    return wait


def metronome(ns: int):
    """Busy-waits until a deadline that advances by exactly ``ns`` per call.

    Back-to-back calls therefore last ``ns`` each on average, whatever the cost of
    reading the clock (~100 ns here) and of the call itself: a workload of known
    length. A call that falls behind (preempted) restarts its deadline from now, and
    so does the first call of every sample (``restart``, run untimed before each).
    """
    clock = time.perf_counter_ns
    state = {"deadline": 0}

    def restart() -> None:
        state["deadline"] = 0

    def wait() -> None:
        now = clock()
        deadline = state["deadline"] + ns
        if deadline < now:
            deadline = now + ns
        state["deadline"] = deadline
        while clock() < deadline:
            pass

    wait.restart = restart  # type: ignore[attr-defined]
    return wait


def accuracy() -> None:
    print("## accuracy: busy-waits of known length")
    print("| workload | length | medians of 5 runs (µs) | median of medians | error |")
    print("|---|---|---|---|---|")
    for name, make in (("metronome", metronome), ("naive spin", spin)):
        for ns in (10_000, 100_000, 1_000_000):
            medians = []
            for _ in range(5):
                fn = make(ns)
                medians.append(engine_median(fn, pre=getattr(fn, "restart", None)))
            med = statistics.median(medians)
            shown = ", ".join(f"{m * 1e6:.2f}" for m in medians)
            error = med / (ns * 1e-9) - 1
            print(f"| {name} | {ns / 1000:g} µs | {shown} | {med * 1e6:.2f} | {error:+.2%} |")
    print()


def agreement() -> None:
    suite = load_suite(ROOT / "suites" / "quick.py")
    print("## agreement with torch.utils.benchmark Timer.blocked_autorange (interleaved)")
    print("| point | benchbench median (µs) | Timer median (µs) | ratio |")
    print("|---|---|---|---|")
    for workload_name, variant in (("sqrt", "torch.sqrt"), ("add", "torch.add")):
        for n in (2**16, 2**20):
            workload, point, namespace, stmt = quick_point(suite, workload_name, variant, n)
            bb_medians, timer_medians = [], []
            for _ in range(5):
                bb_medians.append(point_median(workload, point)[0])
                timer = tbench.Timer(stmt, globals=namespace, num_threads=torch.get_num_threads())
                timer_medians.append(timer.blocked_autorange(min_run_time=0.5).median)
            bb, tt = statistics.median(bb_medians), statistics.median(timer_medians)
            print(f"| {point.label} | {bb * 1e6:.2f} | {tt * 1e6:.2f} | {bb / tt:.3f} |")
    print()


COST_POINTS = [
    ("sqrt", "torch.sqrt", 2**10),
    ("sqrt", "torch.sqrt", 2**16),
    ("sqrt", "torch.sqrt", 2**22),
    ("add", "torch.add", 2**16),
    ("sum", "torch.sum", 2**20),
    ("matmul", "torch.matmul", 128 * 128),
]


def _pyperf(stmt: str, setup: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pyperf",
                "timeit",
                "--fast",
                "-q",
                "-o",
                str(out),
                "-s",
                setup,
                stmt,
            ],
            check=True,
            capture_output=True,
        )
        wall = time.perf_counter() - started
        data = json.loads(out.read_text())
    values = [v for run in data["benchmarks"][0]["runs"] for v in run.get("values", [])]
    return statistics.median(values), wall


def cost() -> None:
    suite = load_suite(ROOT / "suites" / "quick.py")
    print("## cost of a trustworthy number (5 repetitions per tool per point)")
    print("| point | tool | wall s/point (median) | spread max/min of medians |")
    print("|---|---|---|---|")
    for workload_name, variant, n in COST_POINTS:
        workload, point, namespace, stmt = quick_point(suite, workload_name, variant, n)
        names = [k for k in namespace if k != "torch"]
        shape = ", ".join(map(str, point.shape))
        setup = "import torch\ng = torch.Generator().manual_seed(0)\n" + "\n".join(
            f"{name} = torch.rand(({shape},), generator=g) + 0.5" for name in names
        )
        results: dict[str, list[tuple[float, float]]] = {
            "benchbench": [],
            "torch Timer": [],
            "pyperf --fast": [],
        }
        for _ in range(5):
            results["benchbench"].append(point_median(workload, point))
            timer = tbench.Timer(stmt, globals=namespace, num_threads=torch.get_num_threads())
            started = time.perf_counter()
            m = timer.adaptive_autorange(threshold=0.01)
            results["torch Timer"].append((m.median, time.perf_counter() - started))
            results["pyperf --fast"].append(_pyperf(stmt, setup))
        for tool, pairs in results.items():
            medians = [m for m, _ in pairs]
            walls = [w for _, w in pairs]
            spread = max(medians) / min(medians)
            print(f"| {point.label} | {tool} | {statistics.median(walls):.2f} | {spread:.3f} |")
    print()


if __name__ == "__main__":
    today = time.strftime("%Y-%m-%d %H:%M")
    print(f"date: {today}, torch {torch.__version__}, threads {torch.get_num_threads()}\n")
    for name in sys.argv[1:] or ["floor", "accuracy", "agreement", "cost"]:
        globals()[name]()
