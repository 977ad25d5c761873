"""GPU acceptance: benchbench's CUDA paths against plain measurements, on a real GPU.

Run from the repository root on a CUDA machine (the wheels it lacks first, see
benchmarks/gpu_wheels.sh and docs/gpu.md, "Running the acceptance"):

    python benchmarks/gpu_acceptance.py [--group 1|2] [--only ROW[,ROW]] [--list]
        [--device cuda:0] [--out DIR]

It prints its plan (each row and its time limit) first, then each row as it finishes
(row, pass / FAIL / n/a, the numbers behind it), and writes each row to
``DIR/acceptance.jsonl`` and ``DIR/acceptance.md`` as it goes, with the GPU's clocks,
temperature and power while it ran (``DIR`` defaults to ``$OUT``, else nothing is
written; benchmarks/gpu_driver.py), so a run cut short still leaves what it did. A row
that raises or runs past its limit is a FAIL with the reason; the others still run.
Exit 1 when a row fails, else 0. On a machine without CUDA it prints "no CUDA device:
..." and exits 0: a skip, not a failure. It never changes the accelerator's settings
(no ``--lock-clocks``). The second acceptance's rows (``ab`` among them) are in
benchmarks/gpu_acceptance2.py.

The rows, each a function below, in order (``--list`` shows their groups and limits):

- ``nvml``: the SM clock and its reference clock read through NVML, the clock-event
  reasons read, and every visible CUDA device's UUID found in NVML.
- ``faults``: one run (one zygote, forked workers) of a fault suite (ok, device-side
  assert, out of memory, graph-capture failure, wrong result, ok) and the
  ``collectives`` suite: each fault costs its point only, collectives skips nccl on one
  GPU with its reason.
- ``sleep kernels``: ``torch.cuda._sleep`` kernels of ~10 µs, 200 µs and 2 ms: the
  engine within 2 % of a hand-written loop of back-to-back calls between one event pair,
  none flagged launch-bound, warm-up within 1.5 s.
- ``sqrt large``: ``torch.sqrt`` at 2^24 and 2^26 float32: warm within 3 % of the hand
  loop, cold within 5 % of ``triton.testing.do_bench`` (which flushes L2 per call), CUDA
  graph within 5 % of ``do_bench_cudagraph``.
- ``sqrt 2^10``: eager flagged launch-bound, graph faster than eager, rotate + graph
  keeps rotating.
- ``compile``: ``torch.compile`` with a fresh cache: ``compile_s`` recorded, the result
  accurate.
- ``profile trace``: a Chrome trace with CUDA kernel rows.
- ``probe``: ``probe --quick`` bandwidth and bf16 peak beside a plain copy and matmul.
- ``quick``: the ``quick`` suite on CUDA with no failed point; GPU telemetry and
  ``doctor`` naming the device.

The pass/fail logic of every row is unit-tested on fake numbers
(tests/unit/test_gpu_acceptance.py).
"""

from __future__ import annotations

import os

# Before torch loads: this process asks NVML whether CUDA is there (nothing initialised).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchbench from this checkout, not an installed one
sys.path.insert(1, str(ROOT / "benchmarks"))

import gpu_driver  # noqa: E402
import torch  # noqa: E402
from gpu_driver import FAIL, NOT_AVAILABLE, PASS, Row, Spec, within  # noqa: E402

from benchbench.measure.gpu import LAUNCH_BOUND_SHARE  # noqa: E402

LOOP_TOLERANCE = 0.02  # the engine vs a hand loop of back-to-back calls (sleep kernels)
WARM_TOLERANCE = 0.03  # warm sqrt vs the hand loop
TRITON_TOLERANCE = 0.05  # cold vs do_bench, graph vs do_bench_cudagraph
WARMUP_LIMIT_S = 1.5  # the design's 0.1-1 s warm-up, with room for one sync
JUDGED_KERNEL_S = 20e-6  # shorter kernels: listed, not judged against do_bench
PROBE_TOLERANCE = 0.15
GIB = 2**30


def nvml_row(
    sm_mhz: int | None, reference_mhz: int | None, reasons: list[str] | None, uuids: dict[str, bool]
) -> Row:
    """NVML read-only: clocks and reasons readable, every CUDA UUID found in NVML."""
    missing = [u for u, found in uuids.items() if not found]
    passed = bool(sm_mhz) and bool(reference_mhz) and reasons is not None and not missing
    numbers = (
        f"SM {sm_mhz} MHz, reference {reference_mhz} MHz, reasons {reasons}; "
        f"{len(uuids) - len(missing)}/{len(uuids)} CUDA UUIDs found in NVML"
    )
    if missing:
        numbers += f" (missing: {', '.join(missing)})"
    return Row("nvml", PASS if passed else FAIL, numbers)


#: What each fault variant of the fault suite must end as: (status, words in its reason).
FAULTS: dict[str, tuple[str, str]] = {
    "ok_first": ("ok", ""),
    "device_assert": ("error", "device-side assert"),
    "out_of_memory": ("error", "out of memory"),
    "capture_fails": ("skipped", "graph"),
    "wrong_result": ("error", "wrong result"),
    "ok_last": ("ok", ""),
}


def faults_row(outcomes: dict[str, tuple[str, str | None]]) -> Row:
    """variant -> (status, reason) of the fault suite: each fault costs its point only."""
    wrong = []
    for variant, (status, words) in FAULTS.items():
        got, reason = outcomes.get(variant, ("missing", None))
        if got != status or words.lower() not in (reason or "").lower():
            wrong.append(f"{variant}: {got}: {reason}")
    numbers = ", ".join(f"{v}: {outcomes.get(v, ('missing',))[0]}" for v in FAULTS)
    if wrong:
        numbers += "; unexpected: " + "; ".join(wrong)
    return Row("faults", FAIL if wrong else PASS, numbers)


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


def collectives_row(outcomes: Sequence[tuple[str, str | None]]) -> Row:
    """(status, reason) of every collectives point on one visible GPU."""
    nccl = [(s, r) for s, r in outcomes if s == "skipped" and "nccl with" in (r or "")]
    skipped = [r or "" for _s, r in nccl]
    others_ok = all(s == "ok" for s, r in outcomes if (s, r) not in nccl)
    passed = bool(skipped) and others_ok
    first = skipped[0] if skipped else (outcomes[0][1] if outcomes else "no points")
    numbers = f"{len(skipped)}/{len(outcomes)} skipped (nccl), the rest ok: {others_ok}: {first}"
    return Row("collectives", PASS if passed else FAIL, numbers)


def timing_row(
    name: str,
    pairs: Sequence[tuple[str, float, float | None]],
    tolerance: float,
    judged_from_s: float = 0.0,
) -> Row:
    """(what, engine_s, other_s or None) per kernel: the engine within ``tolerance`` of
    the other for kernels of ``judged_from_s`` and more."""
    if all(other is None for _w, _e, other in pairs):
        return Row(name, NOT_AVAILABLE, "triton is not importable")
    parts, passed = [], True
    for what, engine_s, other_s in pairs:
        if other_s is None:
            continue
        judged = other_s >= judged_from_s
        ok = within(engine_s, other_s, tolerance)
        passed = passed and (ok or not judged)
        note = "" if judged else " (not judged)"
        parts.append(
            f"{what}: {engine_s * 1e6:.2f} vs {other_s * 1e6:.2f} µs "
            f"({engine_s / other_s - 1:+.1%}){note}"
        )
    return Row(f"{name} (±{tolerance:.0%})", PASS if passed else FAIL, "; ".join(parts))


def sleep_row(kernels: Sequence[tuple[str, float, float, float | None, float]]) -> Row:
    """(what, engine_s, loop_s, launch share, warmup_s) per sleep kernel: within 2 % of
    the back-to-back loop, not launch-bound, warm-up within its limit."""
    parts, passed = [], True
    for what, engine_s, loop_s, share, warmup_s in kernels:
        bound = share is None or share >= LAUNCH_BOUND_SHARE
        ok = within(engine_s, loop_s, LOOP_TOLERANCE) and not bound and warmup_s <= WARMUP_LIMIT_S
        passed = passed and ok
        shown = "none" if share is None else f"{share:.1%}"
        parts.append(
            f"{what}: {engine_s * 1e6:.2f} vs {loop_s * 1e6:.2f} µs "
            f"({engine_s / loop_s - 1:+.2%}), launch share {shown}, warm-up {warmup_s:.2f} s"
        )
    return Row("sleep kernels", PASS if passed and kernels else FAIL, "; ".join(parts))


def small_row(
    eager_s: float, graph_s: float, eager_share: float | None, rotate_graph: dict[str, Any]
) -> Row:
    """2^10: eager flagged launch-bound (most of its time launch gap), graph faster,
    rotate + graph capturing whole cycles of its input copies."""
    graph = rotate_graph.get("cuda_graph") or {}
    copies, per_replay = graph.get("rotate_copies"), graph.get("calls_per_replay")
    rotating = bool(copies) and bool(per_replay) and per_replay % copies == 0
    bound = eager_share is not None and eager_share >= LAUNCH_BOUND_SHARE
    passed = graph_s < eager_s and bound and rotating
    share = "none" if eager_share is None else f"{eager_share:.0%}"
    numbers = (
        f"eager {eager_s * 1e6:.2f} µs (launch share {share}: "
        f"{'flagged' if bound else 'NOT flagged'}), graph {graph_s * 1e6:.2f} µs; "
        f"rotate+graph: {per_replay} calls per replay over {copies} copies"
    )
    return Row("sqrt 2^10", PASS if passed else FAIL, numbers)


def clock_row(extra: dict[str, Any]) -> Row:
    """The clock guard read the SM clock under load: no ``gpu_idle``, nothing discarded,
    the clock well above idle."""
    mhz, reasons = extra.get("sm_clock_mhz"), list(extra.get("throttle_reasons") or [])
    passed = bool(mhz) and mhz >= 1000 and "gpu_idle" not in reasons
    numbers = (
        f"SM {mhz} MHz under load ({extra.get('sm_clock_from')}), reasons {reasons}, "
        f"discarded {extra.get('discarded_samples')}"
    )
    return Row("clock guard", PASS if passed else FAIL, numbers)


def cycles_row(seen: Sequence[tuple[str, int, float | None]]) -> Row:
    """Cycles per call of sleep kernels of 100 µs and more within 2 % of the cycles they
    spin; a shorter one is listed with the kernel's fixed cost it also counts (on an
    H100 a 10 µs sleep took ~1.8 µs more than its spin: the figure is device time x SM
    clock, and that time is part of a call)."""
    parts, passed = [], bool(seen)
    for what, asked, got in seen:
        judged = not what.endswith(" µs") or float(what.split()[0]) >= 100
        ok = got is not None and within(got, asked, 0.02)
        passed = passed and (ok or (got is not None and not judged))
        shown = "none" if got is None else f"{got:.0f}"
        parts.append(f"{what}: {shown} vs {asked} cycles{'' if judged else ' (not judged)'}")
    return Row("cycles per call", PASS if passed else FAIL, "; ".join(parts))


def compile_row(compile_s: float | None, max_rel_error: float | None, status: str) -> Row:
    passed = status == "ok" and compile_s is not None and compile_s > 0
    numbers = f"status {status}, compile_s {compile_s}, max_rel_error {max_rel_error}"
    return Row("compile", PASS if passed else FAIL, numbers)


def probe_row(name: str, probe: float, plain: float, unit: str, scale: float) -> Row:
    """A probe figure within 15 % of the plain measurement of the same ceiling."""
    ok = within(probe, plain, PROBE_TOLERANCE)
    numbers = (
        f"probe {probe / scale:.0f} {unit}, plain {plain / scale:.0f} {unit} "
        f"({probe / plain - 1:+.1%})"
    )
    return Row(name, PASS if ok else FAIL, numbers)


def trace_row(kernel_rows: int, trace: str) -> Row:
    status = PASS if kernel_rows > 0 else FAIL
    return Row("profile trace", status, f"{kernel_rows} CUDA kernel rows in {Path(trace).name}")


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


def loop_seconds(fn: Callable[[], object], target_s: float = 0.02, repeats: int = 11) -> float:
    """Per call: the median over ``repeats`` of N back-to-back calls between one event
    pair, N chosen so that one pair spans ~``target_s`` (the plainest device time)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    one = event_seconds(fn, 5)
    calls = max(1, int(target_s / max(one, 1e-7)))
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / calls)
    return statistics.median(times)


def one_point(
    device: str,
    n: int,
    fn: Callable[..., Any] = torch.sqrt,
    budget_s: float = 2.0,
    setup: Callable[[Any], Any] | None = None,
    dtype: str = "float32",
    **options: Any,
) -> Any:
    """The engine's result for ``fn`` of ``n`` float32 values in [0.5, 1.5) on ``device``
    (or of what ``setup(ctx)`` makes, in ``dtype``), measured in this process."""
    from benchbench.measure.point import Options, measure_point
    from benchbench.measure.policy import Policy
    from benchbench.suite.declare import Suite, Variant

    variant_options = options.pop("variant", {})
    workload = Suite("acceptance").workload(
        "w",
        setup=setup or (lambda ctx: ctx.uniform(0.5, 1.5)),
        variants=[Variant("v", fn, **variant_options)],
        sizes=[n],
        dtypes=(dtype,),
        devices=(device,),
    )
    return measure_point(
        workload, workload.points()[0], Options(policy=Policy(max_time_s=budget_s), **options)
    )


def run_suites(suites: Sequence[Path], device: str, folder: str, rounds: int = 1) -> list[Any]:
    """Every result of one ``benchbench run SUITES --device DEVICE --rounds N``: a
    zygote a round, a forked worker per point and round."""
    from benchbench.measure.policy import Policy
    from benchbench.run.rounds import Rounds
    from benchbench.run.runner import RunConfig, run
    from benchbench.store import open_store
    from benchbench.suite.load import Selection

    config = RunConfig(
        suites=tuple(suites),
        selection=Selection(devices=(device,)),
        policy=Policy(max_time_s=0.3),
        rounds=Rounds.fixed(rounds),
    )
    store = open_store(str(Path(folder) / "acceptance.db"))
    return list(run(config, store, progress=log_progress).results)


def log_progress(event: str, info: dict[str, Any]) -> None:
    """The runner's events on stderr, one short line each (what a cut-off run did)."""
    brief = {k: v for k, v in info.items() if isinstance(v, (str, int, float)) and k != "error"}
    print(f"  {time.strftime('%H:%M:%S')} {event} {json.dumps(brief)[:200]}", file=sys.stderr)


def measure_nvml(device: str) -> list[Row]:
    from benchbench.machine.nvml import load_nvml, read, sm_clock_reader
    from benchbench.machine.sensors import decode_throttle_reasons

    nvml, why = load_nvml()
    if nvml is None:
        return [Row("nvml", FAIL, why)]
    index = torch.device(device).index or 0
    uuid = str(torch.cuda.get_device_properties(index).uuid)
    handle = read(nvml.nvmlDeviceGetHandleByUUID, f"GPU-{uuid}")
    nvml_index = read(nvml.nvmlDeviceGetIndex, handle) if handle is not None else None
    reader = sm_clock_reader(nvml, nvml_index if nvml_index is not None else index)
    reading = reader() if reader else None
    uuids = {}
    for i in range(torch.cuda.device_count()):
        u = f"GPU-{torch.cuda.get_device_properties(i).uuid}"
        uuids[u] = read(nvml.nvmlDeviceGetHandleByUUID, u) is not None
    reasons = (
        decode_throttle_reasons(reading.reasons_mask)
        if reading and reading.reasons_mask is not None
        else None
    )
    from benchbench.machine.nvml import visible_cuda_uuids

    began = time.perf_counter()
    seen = visible_cuda_uuids()
    child_s = time.perf_counter() - began
    uuids[f"runner's child view {seen} in {child_s:.1f} s"] = bool(seen) and all(
        f"GPU-{u}" in uuids for u in seen.values()
    )
    row = nvml_row(
        reading.sm_mhz if reading else None,
        reading.reference_mhz if reading else None,
        reasons,
        uuids,
    )
    graphics = read(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_GRAPHICS", 0))
    app = read(nvml.nvmlDeviceGetApplicationsClock, handle, getattr(nvml, "NVML_CLOCK_SM", 1))
    default = read(
        nvml.nvmlDeviceGetDefaultApplicationsClock, handle, getattr(nvml, "NVML_CLOCK_SM", 1)
    )
    top = read(nvml.nvmlDeviceGetMaxClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1))
    info = (
        f"; torch index {index} is NVML index {nvml_index}; graphics {graphics} MHz, "
        f"app {app}, default app {default}, max {top} MHz"
    )
    return [Row(row.name, row.status, row.numbers + info)]


FAULT_SUITE = """
import torch
from benchbench import Suite, Variant

def device_assert(x):
    return x[torch.tensor([x.numel() + 7], device=x.device)]  # out of bounds: device assert

def out_of_memory(x):
    return torch.empty(1 << 50, dtype=torch.uint8, device=x.device)  # a petabyte

def capture_fails(x):
    torch.cuda.synchronize()  # a synchronize cannot be captured in a graph
    return torch.sqrt(x)

def wrong_result(x):
    return torch.sqrt(x) + 1.0

suite = Suite("acceptance_faults")
suite.workload(
    "faults",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[
        Variant("ok_first", torch.sqrt),
        Variant("device_assert", device_assert),
        Variant("out_of_memory", out_of_memory),
        Variant("capture_fails", capture_fails, cuda_graph=True),
        Variant("wrong_result", wrong_result),
        Variant("ok_last", torch.sqrt),
    ],
    reference=torch.sqrt,
    sizes=[1024],
)
"""


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


def measure_faults(device: str) -> list[Row]:
    """The fault suite and the collectives suite in one run (one zygote)."""
    from benchbench.suite.load import resolve_suite

    with tempfile.TemporaryDirectory() as folder, one_visible_gpu(device):
        faults = Path(folder) / "acceptance_faults.py"
        faults.write_text(FAULT_SUITE)
        results = run_suites([faults, resolve_suite("collectives")], "cuda", folder)
    return [
        faults_row(
            {
                r.point.variant: (r.status, r.reason)
                for r in results
                if r.point.suite != "collectives"
            }
        ),
        collectives_row([(r.status, r.reason) for r in results if r.point.suite == "collectives"]),
    ]


def measure_quick(device: str) -> list[Row]:
    from benchbench.suite.load import resolve_suite

    with tempfile.TemporaryDirectory() as folder, one_visible_gpu(device):
        results = run_suites([resolve_suite("quick")], "cuda", folder)
    gpu_metrics = sorted(
        {k for r in results for k in (r.telemetry or {}).get("metrics", r.telemetry or {})
         if str(k).startswith("gpu")}
    )  # fmt: skip
    print(f"  quick: telemetry GPU metrics {gpu_metrics[:8]}", file=sys.stderr)
    doctor = subprocess.run(
        [sys.executable, "-m", "benchbench", "doctor", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    named = "cuda:0" in doctor.stdout
    return [
        quick_suite_row([(r.point.label, r.status, r.reason) for r in results]),
        Row(
            "telemetry and doctor",
            PASS if gpu_metrics and named else FAIL,
            f"{len(gpu_metrics)} GPU telemetry metrics ({', '.join(gpu_metrics[:4])}); "
            f"doctor exit {doctor.returncode}, names cuda:0: {named}",
        ),
    ]


def measure_sleep(device: str) -> list[Row]:
    from benchbench.measure.gpu import sleep_cycles_per_s

    rate = sleep_cycles_per_s(torch.cuda, torch.cuda._sleep)
    kernels = []
    cycles_seen: list[tuple[str, int, float | None]] = []
    for what, seconds in (("10 µs", 10e-6), ("200 µs", 200e-6), ("2 ms", 2e-3)):
        cycles = int(seconds * rate)

        def sleep(x: torch.Tensor, cycles: int = cycles) -> torch.Tensor:
            torch.cuda._sleep(cycles)
            return x

        result = one_point(device, 1024, sleep, budget_s=1.0, variant={"check": False})
        cycles_seen.append((what, cycles, result.extra.get("cycles_per_call")))
        engine_s = per_call_s(result)
        loop_s = loop_seconds(lambda cycles=cycles: torch.cuda._sleep(cycles))
        guard = {k: result.extra.get(k) for k in ("throttle_reasons", "discarded_samples")}
        print(f"  sleep {what}: warm-up {dict(result.warmup)}, {guard}", file=sys.stderr)
        kernels.append(
            (
                what,
                engine_s,
                loop_s,
                result.extra.get("launch_overhead"),
                float(result.warmup.get("time_s", 0.0)),
            )
        )
    return [sleep_row(kernels), cycles_row(cycles_seen)]


def measure_sqrt_large(device: str) -> list[Row]:
    try:
        from triton.testing import do_bench, do_bench_cudagraph
    except ImportError:
        do_bench = do_bench_cudagraph = None
    warm, cold, graph = [], [], []
    for n in (2**24, 2**26):
        what = f"2^{n.bit_length() - 1}"
        x = torch.rand(n, device=device) + 0.5

        def sqrt(x: torch.Tensor = x) -> torch.Tensor:
            return torch.sqrt(x)

        warm_point = one_point(device, n)
        if n == 2**24:
            clock = clock_row(warm_point.extra)
        warm.append((what, per_call_s(warm_point), loop_seconds(sqrt)))
        cold_s = per_call_s(one_point(device, n, cache="cold"))
        graph_s = per_call_s(one_point(device, n, variant={"cuda_graph": True}))
        if do_bench is None:
            cold.append((what, cold_s, None))
            graph.append((what, graph_s, None))
            continue
        cold.append((what, cold_s, float(do_bench(sqrt, return_mode="median")) * 1e-3))
        with torch.cuda.stream(torch.cuda.Stream()):
            reference = float(do_bench_cudagraph(sqrt, return_mode="median")) * 1e-3
        graph.append((what, graph_s, reference))
    return [
        clock,
        timing_row("warm vs loop", warm, WARM_TOLERANCE),
        timing_row("cold vs do_bench", cold, TRITON_TOLERANCE, JUDGED_KERNEL_S),
        timing_row("graph vs do_bench_cudagraph", graph, TRITON_TOLERANCE, JUDGED_KERNEL_S),
    ]


def measure_small(device: str) -> list[Row]:
    eager = one_point(device, 2**10)
    graph = one_point(device, 2**10, variant={"cuda_graph": True})
    rotating = one_point(device, 2**10, cache="rotate", variant={"cuda_graph": True})
    print(
        f"  2^10 rotate+graph: {rotating.status} {dict(rotating.extra.get('cuda_graph') or {})}",
        file=sys.stderr,
    )
    return [
        small_row(
            per_call_s(eager),
            per_call_s(graph),
            eager.extra.get("launch_overhead"),
            {"cuda_graph": rotating.extra.get("cuda_graph")},
        )
    ]


def measure_compile(device: str) -> list[Row]:
    """Two compile points in a row, each with a cache folder of its own, removed after."""
    before = set(Path(tempfile.gettempdir()).glob("benchbench-compile-*"))
    first = one_point(device, 2**20, variant={"compile": True}, budget_s=0.5)
    second = one_point(device, 2**20, variant={"compile": True}, budget_s=0.5)
    left = set(Path(tempfile.gettempdir()).glob("benchbench-compile-*")) - before
    row = compile_row(first.extra.get("compile_s"), first.max_rel_error, first.status)
    again = second.extra.get("compile_s")
    passed = row.status == PASS and second.status == "ok" and bool(again) and not left
    # The first includes Inductor's one-time start in this process (imports, workers).
    numbers = f"{row.numbers}; second point compile_s {again}; cache folders left: {len(left)}"
    return [Row("compile", PASS if passed else FAIL, numbers)]


def measure_trace(device: str) -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        result = one_point(device, 2**20, profile_dir=folder, budget_s=0.5)
        trace = result.extra["profile"]["trace"]
        events = json.loads(Path(trace).read_text()).get("traceEvents", [])
        kernels = sum(1 for e in events if str(e.get("cat", "")).lower() == "kernel")
        return [trace_row(kernels, trace)]


def measure_probe(device: str) -> list[Row]:
    from benchbench.machine.probe import run_probe

    profile = run_probe(device, quick=True)
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


#: name -> the row: what it measures, its time limit, its group (limits of 5 minutes a
#: group at most; every row, ab at 2^20 included, took 197 s on an H100), what it checks.
SPECS: dict[str, Spec] = {
    "nvml": Spec(measure_nvml, 20, 1, "clocks and reasons read, every CUDA UUID in NVML"),
    "faults": Spec(measure_faults, 60, 1, "each fault costs its point only; nccl skipped"),
    "sleep kernels": Spec(measure_sleep, 40, 1, "engine within 2 % of a hand event loop"),
    "sqrt large": Spec(
        measure_sqrt_large, 60, 1, "warm vs loop, cold vs do_bench, graph vs cudagraph"
    ),
    "sqrt 2^10": Spec(measure_small, 30, 1, "eager flagged launch-bound, graph faster"),
    "compile": Spec(measure_compile, 60, 2, "compile_s recorded, caches of their own"),
    "profile trace": Spec(measure_trace, 30, 2, "a Chrome trace with CUDA kernel rows"),
    "probe": Spec(measure_probe, 40, 2, "probe --quick within 15 % of plain copy/matmul"),
    "quick": Spec(measure_quick, 170, 2, "quick suite on CUDA: no failed point; doctor"),
}


def main(argv: Sequence[str] | None = None) -> int:
    return gpu_driver.main(
        argv,
        SPECS,
        description=(__doc__ or "").splitlines()[0],
        name="acceptance",
        heading="GPU acceptance",
    )


if __name__ == "__main__":
    raise SystemExit(main())
