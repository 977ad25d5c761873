"""GPU acceptance: benchbench's CUDA paths against plain measurements, on a real GPU.

Run from the repository root on a CUDA machine:

    PYTHONPATH=. python benchmarks/gpu_acceptance.py [--device cuda:0]

It prints one table (row, pass / FAIL / n/a, the numbers behind it) and exits 1 when a
row fails, else 0. On a machine without CUDA it prints "no CUDA device: ..." and exits 0:
a skip, not a failure. A row that raises is a FAIL with the exception; the others still
run. The rows, each a small function below, and what passes:

- ``quick suite``: ``run quick --device cuda``, one round: no point fails; a skip only
  where a variant says it cannot run there (NumPy runs on the CPU only).
- ``engine vs events`` / ``engine vs do_bench``: the engine's median per call of
  ``torch.sqrt`` at 2^24 and 2^26 float32 elements (beyond any L2: 128 and 512 MiB
  moved per call) within 5 % of a hand-written loop of one CUDA event pair per call,
  and of ``triton.testing.do_bench`` (median) when triton imports; kernels under 20 µs
  are listed, not judged (one event pair costs a few µs).
- ``graphs vs eager``: at 2^10 elements a ``Variant(cuda_graph=True)`` is faster than
  eager, and the eager point is flagged launch-bound (``extra["launch_bound"]`` or a
  warning containing ``launch-bound``); "n/a" where this benchbench has no CUDA graphs.
- ``probe bandwidth`` / ``probe bf16 peak``: ``benchbench probe`` figures within 15 % of
  a plain 1 GiB device-to-device ``copy_`` (2 GiB moved) and of a plain 8192^3 bfloat16
  ``torch.mm``, both best of 10 event-timed calls.
- ``cold vs warm``: at a working set of L2/4 the cold-cache median is at least 10 %
  above the warm one; at 16x L2 they agree within 10 %.
- ``profile trace``: a point measured with a profile folder leaves a Chrome trace that
  holds CUDA kernel rows.
- ``device-side assert``: a suite whose middle variant indexes out of bounds: that
  point is stored failed with torch's message, the points before and after it are ok.
- ``collectives``: the collectives suite on one visible GPU: every nccl point skipped,
  its reason naming the GPUs it needs.

Not yet run on a GPU: the rows are written from the PyTorch and Triton documentation;
their pass/fail logic is unit-tested with fake numbers (tests/unit/test_gpu_acceptance.py).
"""

from __future__ import annotations

import os

# Before torch loads: this process asks NVML whether CUDA is there (nothing initialised).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

PASS, FAIL, NOT_AVAILABLE = "pass", "FAIL", "n/a"
ENGINE_TOLERANCE = 0.05  # engine vs a plain event loop or do_bench
JUDGED_KERNEL_S = 20e-6  # shorter kernels: listed, not judged
PROBE_TOLERANCE = 0.15
CACHE_DIFFER = 1.10  # cold / warm at L2/4 at least this
CACHE_AGREE = 0.10  # |cold / warm - 1| at 16x L2 at most this
GIB = 2**30


@dataclass(frozen=True)
class Row:
    """One line of the table: what was checked, pass / FAIL / n/a, the numbers behind it."""

    name: str
    status: str
    numbers: str


# -- verdicts: pure functions of numbers (unit-tested with fake ones) -----------------


def within(measured: float, plain: float, tolerance: float) -> bool:
    """``measured`` within ``tolerance`` (relative) of ``plain``."""
    return plain > 0 and abs(measured / plain - 1.0) <= tolerance


def quick_suite_row(outcomes: Sequence[tuple[str, str, str | None]]) -> Row:
    """(label, status, reason) of every point of the quick suite on CUDA."""
    errors = [(label, reason) for label, status, reason in outcomes if status == "error"]
    skips = [reason or "" for _label, status, reason in outcomes if status == "skipped"]
    unexpected = [r for r in skips if "runs on the CPU only" not in r]
    ok = sum(1 for _label, status, _reason in outcomes if status == "ok")
    numbers = f"{ok} ok, {len(skips)} skipped (NumPy), {len(errors)} failed"
    if errors:
        numbers += f"; first: {errors[0][0]}: {errors[0][1]}"
    elif unexpected:
        numbers += f"; unexpected skip: {unexpected[0]}"
    passed = ok > 0 and not errors and not unexpected
    return Row("quick suite", PASS if passed else FAIL, numbers)


def timing_row(name: str, pairs: Sequence[tuple[str, float, float | None]]) -> Row:
    """(what, engine_s, other_s or None) per kernel: the engine within 5 % of the other."""
    if all(other is None for _w, _e, other in pairs):
        return Row(name, NOT_AVAILABLE, "triton is not importable")
    parts, passed = [], True
    for what, engine_s, other_s in pairs:
        if other_s is None:
            continue
        judged = other_s >= JUDGED_KERNEL_S
        ok = within(engine_s, other_s, ENGINE_TOLERANCE)
        passed = passed and (ok or not judged)
        note = "" if judged else " (under 20 µs: not judged)"
        parts.append(
            f"{what}: {engine_s * 1e6:.1f} vs {other_s * 1e6:.1f} µs "
            f"({engine_s / other_s - 1:+.1%}){note}"
        )
    return Row(name, PASS if passed else FAIL, "; ".join(parts))


def graphs_row(
    eager_s: float | None, graph_s: float | None, eager_launch_bound: bool | None
) -> Row:
    """CUDA graphs faster than eager at the smallest size, eager flagged launch-bound;
    None anywhere: the feature is missing in this benchbench."""
    if eager_s is None or graph_s is None or eager_launch_bound is None:
        return Row("graphs vs eager", NOT_AVAILABLE, "no Variant(cuda_graph=True) results")
    passed = graph_s < eager_s and eager_launch_bound
    numbers = (
        f"eager {eager_s * 1e6:.2f} µs, graph {graph_s * 1e6:.2f} µs per call; "
        f"eager {'flagged' if eager_launch_bound else 'NOT flagged'} launch-bound"
    )
    return Row("graphs vs eager", PASS if passed else FAIL, numbers)


def probe_row(name: str, probe: float, plain: float, unit: str, scale: float) -> Row:
    """A probe figure within 15 % of the plain measurement of the same ceiling."""
    ok = within(probe, plain, PROBE_TOLERANCE)
    numbers = (
        f"probe {probe / scale:.0f} {unit}, plain {plain / scale:.0f} {unit} "
        f"({probe / plain - 1:+.1%})"
    )
    return Row(name, PASS if ok else FAIL, numbers)


def cache_row(near: tuple[float, float], far: tuple[float, float]) -> Row:
    """(warm_s, cold_s) at L2/4 and at 16x L2: they differ near, agree far."""
    near_ratio, far_ratio = near[1] / near[0], far[1] / far[0]
    passed = near_ratio >= CACHE_DIFFER and abs(far_ratio - 1.0) <= CACHE_AGREE
    numbers = (
        f"cold/warm at L2/4: {near_ratio:.2f} (>= 1.10); at 16x L2: {far_ratio:.2f} (1 ± 0.10)"
    )
    return Row("cold vs warm", PASS if passed else FAIL, numbers)


def trace_row(kernel_rows: int, trace: str) -> Row:
    status = PASS if kernel_rows > 0 else FAIL
    return Row("profile trace", status, f"{kernel_rows} CUDA kernel rows in {Path(trace).name}")


def assert_row(outcomes: dict[str, tuple[str, str | None]]) -> Row:
    """variant -> (status, reason) of the before / assert / after points."""
    status, reason = outcomes.get("assert", ("missing", None))
    others_ok = all(outcomes.get(v, ("missing",))[0] == "ok" for v in ("before", "after"))
    passed = status == "error" and "device-side assert" in (reason or "") and others_ok
    numbers = f"assert: {status}: {reason}; " + ", ".join(
        f"{v}: {outcomes.get(v, ('missing',))[0]}" for v in ("before", "after")
    )
    return Row("device-side assert", PASS if passed else FAIL, numbers)


def collectives_row(outcomes: Sequence[tuple[str, str | None]]) -> Row:
    """(status, reason) of every collectives point on one visible GPU."""
    skipped = [r for s, r in outcomes if s == "skipped" and "nccl with" in (r or "")]
    passed = bool(outcomes) and len(skipped) == len(outcomes)
    first = outcomes[0][1] if outcomes else "no points"
    return Row(
        "collectives", PASS if passed else FAIL, f"{len(skipped)}/{len(outcomes)} skipped: {first}"
    )


# -- measurements (a GPU only) ----------------------------------------------------------


def per_call_s(result: Any) -> float:
    """The median per call of an ``ok`` result (RuntimeError with its reason otherwise)."""
    if result.status != "ok":
        raise RuntimeError(f"{result.point.label}: {result.status}: {result.reason}")
    return statistics.median(result.samples_s) / result.calls_per_sample


def event_seconds(fn: Callable[[], object], calls: int, best: bool = False) -> float:
    """Median (or best) of ``calls`` single calls, each between its own event pair."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return min(times) if best else statistics.median(times)


def one_point(device: str, n: int, fn: Callable[..., Any] = torch.sqrt, **options: Any) -> Any:
    """The engine's result for ``fn`` of ``n`` float32 values in [0.5, 1.5) on ``device``."""
    from benchbench.measure.point import Options, measure_point
    from benchbench.measure.policy import Policy
    from benchbench.suite.declare import Suite, Variant

    variant_options = options.pop("variant", {})
    workload = Suite("acceptance").workload(
        "w",
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant("v", fn, **variant_options)],
        sizes=[n],
        devices=(device,),
    )
    return measure_point(
        workload, workload.points()[0], Options(policy=Policy(max_time_s=2.0), **options)
    )


def run_suite(suite: Path, device: str) -> list[Any]:
    """Every result of ``benchbench run SUITE --device DEVICE --rounds 1`` (real workers)."""
    from benchbench.measure.policy import Policy
    from benchbench.run.rounds import Rounds
    from benchbench.run.runner import RunConfig, run
    from benchbench.store import open_store
    from benchbench.suite.load import Selection

    with tempfile.TemporaryDirectory() as folder:
        config = RunConfig(
            suites=(suite,),
            selection=Selection(devices=(device,)),
            policy=Policy(max_time_s=0.5),
            rounds=Rounds.fixed(1),
        )
        return list(run(config, open_store(str(Path(folder) / "acceptance.db"))).results)


def row_quick(device: str) -> list[Row]:
    from benchbench.suite.load import resolve_suite

    results = run_suite(resolve_suite("quick"), device)
    return [quick_suite_row([(r.point.label, r.status, r.reason) for r in results])]


def row_engine(device: str) -> list[Row]:
    plain: list[tuple[str, float, float | None]] = []
    triton: list[tuple[str, float, float | None]] = []
    for n in (2**24, 2**26):
        engine_s = per_call_s(one_point(device, n))
        x = torch.rand(n, device=device) + 0.5

        def sqrt(x: torch.Tensor = x) -> torch.Tensor:
            return torch.sqrt(x)

        what = f"sqrt 2^{n.bit_length() - 1}"
        plain.append((what, engine_s, event_seconds(sqrt, 200)))
        try:
            from triton.testing import do_bench
        except ImportError:
            triton.append((what, engine_s, None))
            continue
        triton.append((what, engine_s, float(do_bench(sqrt, return_mode="median")) * 1e-3))
    return [timing_row("engine vs events", plain), timing_row("engine vs do_bench", triton)]


def row_graphs(device: str) -> list[Row]:
    from benchbench.suite.declare import Variant

    if "cuda_graph" not in {f.name for f in fields(Variant)}:
        return [graphs_row(None, None, None)]
    eager = one_point(device, 2**10)
    graph = one_point(device, 2**10, variant={"cuda_graph": True})
    if "cuda_graph" not in graph.extra or "launch_bound" not in eager.extra:
        return [graphs_row(None, None, None)]
    flagged = bool(eager.extra["launch_bound"]) or any("launch-bound" in w for w in eager.warnings)
    return [graphs_row(per_call_s(eager), per_call_s(graph), flagged)]


def row_probe(device: str) -> list[Row]:
    from benchbench.machine.probe import run_probe

    profile = run_probe(device)
    src = torch.empty(GIB, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_bytes_per_s = 2 * GIB / event_seconds(lambda: dst.copy_(src), 10, best=True)
    n = 8192
    a = torch.rand(n, n, device=device, dtype=torch.bfloat16)
    b, c = torch.rand_like(a), torch.empty_like(a)
    mm_flop_per_s = 2 * n**3 / event_seconds(lambda: torch.mm(a, b, out=c), 10, best=True)
    return [
        probe_row(
            "probe bandwidth", profile.memory_bytes_per_s["copy"], copy_bytes_per_s, "GB/s", 1e9
        ),
        probe_row(
            "probe bf16 peak", profile.peak_flop_per_s["bfloat16"], mm_flop_per_s, "TFLOP/s", 1e12
        ),
    ]


def row_cache(device: str) -> list[Row]:
    l2 = int(torch.cuda.get_device_properties(torch.device(device)).L2_cache_size)
    pairs = []
    for working_set in (l2 // 4, 16 * l2):
        n = working_set // 8  # float32 in, float32 out
        warm = per_call_s(one_point(device, n, cache="warm"))
        cold = per_call_s(one_point(device, n, cache="cold"))
        pairs.append((warm, cold))
    return [cache_row(pairs[0], pairs[1])]


def row_trace(device: str) -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        result = one_point(device, 2**20, profile_dir=folder)
        trace = result.extra["profile"]["trace"]
        events = json.loads(Path(trace).read_text()).get("traceEvents", [])
        kernels = sum(1 for e in events if str(e.get("cat", "")).lower() == "kernel")
        return [trace_row(kernels, trace)]


ASSERT_SUITE = """
import torch
from benchbench import Suite, Variant

def out_of_bounds(x):
    return x[torch.tensor([x.numel() + 7], device=x.device)]  # device-side assert

suite = Suite("acceptance_assert")
suite.workload(
    "assert",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("before", torch.sqrt), Variant("assert", out_of_bounds),
              Variant("after", torch.sqrt)],
    reference=torch.sqrt,
    sizes=[1024],
)
"""


def row_assert(device: str) -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        suite = Path(folder) / "acceptance_assert.py"
        suite.write_text(ASSERT_SUITE)
        results = run_suite(suite, device)
    return [assert_row({r.point.variant: (r.status, r.reason) for r in results})]


@contextlib.contextmanager
def one_visible_gpu(device: str) -> Iterator[None]:
    """The runner's workers see only ``device`` (its index), whatever the machine has."""
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = str(torch.device(device).index or 0)
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def row_collectives(device: str) -> list[Row]:
    from benchbench.suite.load import resolve_suite

    with one_visible_gpu(device):
        results = run_suite(resolve_suite("collectives"), "cuda")
    return [collectives_row([(r.status, r.reason) for r in results])]


ROWS: dict[str, Callable[[str], list[Row]]] = {
    "quick suite": row_quick,
    "engine": row_engine,
    "graphs vs eager": row_graphs,
    "probe": row_probe,
    "cold vs warm": row_cache,
    "profile trace": row_trace,
    "device-side assert": row_assert,
    "collectives": row_collectives,
}


def no_cuda_message() -> str | None:
    """Why this machine cannot run the acceptance, or None when it can."""
    if torch.cuda.is_available():
        return None
    built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    return (
        f"no CUDA device: torch.cuda.is_available() is False (torch {torch.__version__}, "
        f"{built}); nothing to accept here: run this script on a CUDA machine"
    )


def table(rows: Sequence[Row]) -> str:
    width = max(len(r.name) for r in rows)
    return "\n".join(f"{r.name:<{width}}  {r.status:<4}  {r.numbers}" for r in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (default cuda)")
    args = parser.parse_args(argv)
    reason = no_cuda_message()
    if reason is not None:
        print(reason)
        return 0
    rows: list[Row] = []
    for name, measure in ROWS.items():
        print(f"measuring: {name}", file=sys.stderr, flush=True)
        try:
            rows.extend(measure(args.device))
        except Exception as exc:  # one row's crash is that row's FAIL
            rows.append(Row(name, FAIL, f"{type(exc).__name__}: {exc}"))
    print(
        f"GPU acceptance on {torch.cuda.get_device_name(torch.device(args.device))}, "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    )
    print(table(rows))
    return 1 if any(r.status == FAIL for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
