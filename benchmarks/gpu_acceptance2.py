"""The second GPU acceptance: what had not run on hardware, and the figures a user compares.

Run from the repository root on a CUDA machine (the wheels it lacks first: see
docs/gpu.md, "Running the acceptance"):

    python benchmarks/gpu_acceptance2.py --group 1      # then --group 2 ... --group 5
    python benchmarks/gpu_acceptance2.py --only side-stream,ab
    python benchmarks/gpu_acceptance2.py --list

Each group's limits add up to 5 minutes at most. Each row is written as it finishes to
``OUT/acceptance2.jsonl`` and ``OUT/acceptance2.md`` with the GPU's clocks, temperature
and power while it ran (benchmarks/gpu_driver.py); the agreement table goes to
``OUT/agreement.md``, ready to paste into docs/gpu.md; the rows' store (runs, probe) is
``OUT/acceptance2.db``. Exit 1 when a row fails; without CUDA it says so and exits 0.
It never changes the accelerator's settings.

The rows (``--list`` gives groups, limits and checks):

- ``agreement``: 10 ops x 3 device-bound sizes, our cold mode beside
  ``triton.testing.do_bench`` (median, L2 flushed) and our warm mode beside
  ``torch.utils.benchmark.Timer``: within 5 % of do_bench at 27 of 30 cells.
- ``ab``: ``benchbench ab`` A/A at 2^24 (48 µs, device-bound): nothing flagged, the
  lockstep median within 2 % of the point run solo in fresh workers.
- ``side-stream``: a 200 µs kernel on another stream inside the timed call is flagged
  (``untimed_share``); the same kernel on the timed stream is not.
- ``probe``: the full ``benchbench probe`` (stored), device bandwidth and FP32 / TF32
  / BF16 peaks beside the datasheet's dense figures at the SM clock NVML read.
- ``quick``: two ``run quick`` and ``compare`` between them (quiet), and the quick
  suite's % of peak against that probe never above 100 %.
- ``backward``: fwd / bwd / fwd_bwd points on CUDA, fwd_bwd within 0.7-1.3 of fwd + bwd.
- ``captured``: docs/examples/transformer_layer.py captured on CUDA, run, and
  ``breakdown`` coverage within 0.7-1.3.
- ``zoo``: ``run zoo --tag quick --budget 0.1`` on CUDA: no failed point.
- ``zoo-compile-bert`` (``-vit``, ``-resnet``): a zoo model whole built on CUDA, eager
  against ``torch.compile``, the compile time apart from the steady-state time.
"""

from __future__ import annotations

import os

# Before torch loads: this process asks NVML whether CUDA is there (nothing initialised).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import contextlib
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchbench from this checkout, not an installed one
sys.path.insert(1, str(ROOT / "benchmarks"))

import gpu_agreement  # noqa: E402
import gpu_driver  # noqa: E402
import gpu_rows2 as rows  # noqa: E402
import torch  # noqa: E402
from gpu_acceptance import (  # noqa: E402
    event_seconds,
    one_point,
    one_visible_gpu,
    per_call_s,
    run_suites,
)
from gpu_datasheet import lookup  # noqa: E402
from gpu_driver import Row, Spec  # noqa: E402

from benchbench.suite.model_zoo import VIT_TOKENS, ModelCase, Shape  # noqa: E402


def store_url() -> str:
    return str(gpu_driver.out_folder() / "acceptance2.db")


def cli(args: Sequence[str], timeout_s: float, ok: Sequence[int] = (0,)) -> tuple[int, str]:
    """(exit code, stdout) of ``python -m benchbench ARGS`` run from the repository root.
    The command and its workers run in a session of their own, killed whole when this
    row stops (its limit, an error): nothing is left holding the GPU. RuntimeError with
    the end of its stderr on an exit code outside ``ok``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchbench", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout_s)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    if process.returncode not in ok:
        raise RuntimeError(f"benchbench {args[0]} exit {process.returncode}: {err.strip()[-600:]}")
    print(f"  benchbench {' '.join(args[:2])}: {err.strip()[-300:]}", file=sys.stderr)
    return process.returncode, out


# -- agreement ------------------------------------------------------------------------


def engine_seconds(device: str) -> Any:
    """Our median per call of an agreement op at a size, in a cache mode."""

    def engine(op: gpu_agreement.Op, n: int, cache: str) -> float:
        def setup(ctx: Any) -> tuple[Any, ...]:
            return gpu_agreement.inputs(torch, op, n, str(ctx.device))

        point = one_point(
            device, n, op.fn, budget_s=0.3, setup=setup, dtype=op.dtype, cache=cache,
            variant={"check": False},
        )  # fmt: skip
        return per_call_s(point)

    return engine


def measure_agreement(device: str) -> list[Row]:
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    cells = []
    engine = engine_seconds(device)
    heading = (
        f"Agreement on {torch.cuda.get_device_name(torch.device(device))}, torch "
        f"{torch.__version__}, {time.strftime('%Y-%m-%d')}"
    )
    table = gpu_driver.out_folder() / "agreement.md"
    for op in gpu_agreement.ops(torch):
        for n in op.sizes:
            cells.append(gpu_agreement.measure_cell(torch, op, n, device, engine, do_bench))
            table.write_text(gpu_agreement.markdown(cells, heading))  # a cut-off row keeps them
    passed, numbers = gpu_agreement.verdict(cells)
    if do_bench is None:
        return [Row("agreement", gpu_driver.NOT_AVAILABLE, "triton is not importable; " + numbers)]
    return [Row("agreement", gpu_driver.PASS if passed else gpu_driver.FAIL, numbers)]


# -- ab and the side stream -----------------------------------------------------------

AB_SUITE = """
import torch
from benchbench import Suite, Variant

suite = Suite("acceptance_ab")
suite.workload(
    "sqrt",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.sqrt", torch.sqrt)],
    sizes=[2**24],
    devices=("cuda",),
)
"""


def measure_ab(device: str) -> list[Row]:
    with tempfile.TemporaryDirectory() as folder, one_visible_gpu(device):
        suite = Path(folder) / "acceptance_ab.py"
        suite.write_text(AB_SUITE)
        command = ["ab", str(suite), "--device", "cuda", "--base", sys.executable]
        command += ["--head", sys.executable, "--rounds", "4"]
        command += ["--store", str(Path(folder) / "ab.db"), "--format", "json"]
        code, out = cli(command, 110, ok=(0, 3))
        points = json.loads(out)["points"]
        # Solo: the same point by `benchbench run`, in fresh workers as ab's are.
        solo = run_suites([suite], "cuda", folder, rounds=4)
    flagged = sum(1 for p in points if p["mark"] in ("slower", "faster"))
    sides = [m for p in points for m in (p["base_median_s"], p["contender_median_s"]) if m]
    print(f"  ab: base and head medians {sides}", file=sys.stderr)
    return [rows.ab_row(statistics.median(sides), per_call_s(solo[0]), flagged, code)]


def measure_side_stream(device: str) -> list[Row]:
    """``torch.sqrt`` of 2^24 floats (~48 µs) plus a 200 µs sleep kernel, the sleep on
    another stream, then on the timed stream."""
    from benchbench.measure.gpu import sleep_cycles_per_s

    cycles = int(200e-6 * sleep_cycles_per_s(torch.cuda, torch.cuda._sleep))
    side = torch.cuda.Stream(device=device)

    def on_side(x: torch.Tensor) -> torch.Tensor:
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
        return torch.sqrt(x)

    def on_timed(x: torch.Tensor) -> torch.Tensor:
        torch.cuda._sleep(cycles)
        return torch.sqrt(x)

    results = [one_point(device, 2**24, fn, budget_s=1.0) for fn in (on_side, on_timed)]
    torch.cuda.synchronize()
    shares = [r.extra.get("untimed_share") for r in results]
    print(f"  side stream: warnings {[r.warnings for r in results]}", file=sys.stderr)
    return [
        rows.side_stream_row(shares[0], per_call_s(results[0]), shares[1], per_call_s(results[1]))
    ]


# -- the probe and two quick runs ------------------------------------------------------


def tf32_and_clock(device: str) -> tuple[float, float | None]:
    """A plain 8192² TF32 matmul's best FLOP/s, and the median SM clock NVML read while
    it ran (the clock the datasheet's figures are scaled to)."""
    n = 8192
    a = torch.rand(n, n, device=device)
    b, c = torch.rand_like(a), torch.empty_like(a)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    reader = gpu_driver.nvml_reader(torch, device)
    try:
        sampler = gpu_driver.GpuSampler(reader, period_s=0.05) if reader else None
        with sampler or contextlib.nullcontext():
            seconds = event_seconds(lambda: torch.mm(a, b, out=c), 300, best=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    sm = (sampler.state().get("sm_mhz") or {}).get("median") if sampler else None
    return 2 * n**3 / seconds, sm


def measure_probe(device: str) -> list[Row]:
    with one_visible_gpu(device):
        _code, out = cli(["probe", "--device", "cuda", "--store", store_url(), "--json"], 140)
    profile = json.loads(out)["profile"]
    tf32, sm_mhz = tf32_and_clock(device)
    peaks = profile["peak_flop_per_s"]
    figures = rows.ProbeFigures(
        bandwidth_bytes_per_s=profile["memory_bytes_per_s"]["copy"],
        flop_per_s={"float32": peaks["float32"], "tf32": tf32, "bfloat16": peaks["bfloat16"]},
        sm_mhz=sm_mhz,
    )
    props = torch.cuda.get_device_properties(torch.device(device))
    sheet, why = lookup(props.name, props.multi_processor_count)
    found = rows.datasheet_rows(figures, sheet, why)
    took = f"full probe {profile['duration_s']:.0f} s; "
    return [Row(found[0].name, found[0].status, took + found[0].numbers), *found[1:]]


def measure_quick(device: str) -> list[Row]:
    stamp = time.strftime("%H%M%S")
    labels = [f"quick-a-{stamp}", f"quick-b-{stamp}"]
    statuses = []
    # Three rounds, not two: `compare` of two 2-round runs of the quick suite's sqrt
    # points raised OverflowError on the CPU (analysis/detectable.py, math.expm1 of a
    # 1-degree-of-freedom t quantile times se_log).
    with one_visible_gpu(device):
        for label in labels:
            command = ["run", "quick", "--device", "cuda", "--store", store_url()]
            command += ["--label", label, "--rounds", "3", "--budget", "0.1", "--format", "json"]
            doc = json.loads(cli(command, 65, ok=(0, 1))[1])
            statuses.append([r["status"] for r in doc["results"]])
        command = ["compare", *labels, "--store", store_url(), "--format", "json"]
        code, out = cli(command, 20, ok=(0, 3))
        command = ["show", labels[1], "--store", store_url(), "--format", "json"]
        shown = json.loads(cli(command, 20)[1])
    percents = [(_label(r), r.get("percent_of_peak")) for r in shown["results"]]
    return [
        rows.compare_row(statuses, json.loads(out)["points"], code),
        rows.peak_row(percents),
    ]


def _label(result: dict[str, Any]) -> str:
    return f"{result['workload']}:{result['variant']}[{result['dtype']}](n={result['size']})"


# -- backward points, a captured model, the zoo -----------------------------------------

BACKWARD_SUITE = """
import torch
import torch.nn.functional as F
from benchbench import Suite, Variant

MODES = ("fwd", "bwd", "fwd_bwd")
suite = Suite("acceptance_backward")
suite.workload(
    "gelu",
    setup=lambda ctx: ctx.uniform(-1, 1),
    variants=[Variant("F.gelu", F.gelu)],
    sizes=[2**24],
    devices=("cuda",),
    modes=MODES,
)
suite.workload(
    "linear",
    setup=lambda ctx: (
        ctx.uniform(-1, 1, shape=(8192, 4096)),
        ctx.uniform(-0.02, 0.02, shape=(4096, 4096)).requires_grad_(),
    ),
    variants=[Variant("F.linear", F.linear)],
    sizes=[4096],
    devices=("cuda",),
    modes=MODES,
)
"""

#: The example, made on CUDA in the worker that calls it: a suite file loads this module
#: in the runner and its zygote, which must not start CUDA (forked workers would fail).
CAPTURE_TARGET = """
import importlib.util

_spec = importlib.util.spec_from_file_location("transformer_layer", {example!r})
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)
_on_cuda = []


def forward(x):
    if not _on_cuda:
        example.layer.to("cuda")
        _on_cuda.append(True)
    return example.forward(x)


def make_inputs():
    return tuple(t.to("cuda") for t in example.make_inputs())
"""


def measure_backward(device: str) -> list[Row]:
    suite = gpu_driver.out_folder() / "acceptance_backward.py"
    suite.write_text(BACKWARD_SUITE)
    with one_visible_gpu(device):
        command = ["run", str(suite), "--device", "cuda", "--store", store_url()]
        doc = json.loads(cli([*command, "--rounds", "2", "--format", "json"], 55, ok=(0, 1))[1])
    return [rows.backward_row(doc["results"])]


def measure_captured(device: str) -> list[Row]:
    folder = gpu_driver.out_folder()
    target = folder / "transformer_on_cuda.py"
    target.write_text(
        CAPTURE_TARGET.format(example=str(ROOT / "docs" / "examples" / "transformer_layer.py"))
    )
    ops = folder / "transformer_ops_cuda.py"
    label = f"captured-{time.strftime('%H%M%S')}"
    with one_visible_gpu(device):
        cli(["capture", f"{target}:forward", "--args-from", "make_inputs", "-o", str(ops)], 60)
        # No --device: the capture declared its points on the device it saw ("cuda:0"),
        # and its whole runs only there (``--device cuda`` would make every point
        # "cuda" and skip the whole).
        command = ["run", str(ops), "--store", store_url(), "--label", label]
        cli([*command, "--rounds", "3", "--format", "json"], 100, ok=(0, 1))
        _code, out = cli(["breakdown", label, "--store", store_url(), "--format", "json"], 20)
    return [rows.coverage_row("captured transformer layer", json.loads(out)["breakdowns"])]


def measure_zoo(device: str) -> list[Row]:
    with one_visible_gpu(device):
        # One round: 135 points, and every worker loads the zoo (from its capture cache).
        command = ["run", "zoo", "--device", "cuda", "--tag", "quick", "--budget", "0.1"]
        command += ["--rounds", "1", "--store", store_url(), "--format", "json"]
        doc = json.loads(cli(command, 280, ok=(0, 1))[1])
    return [rows.zoo_row(doc["results"])]


def measure_zoo_compile(model: str, batch: int, tokens: int) -> Callable[[str], list[Row]]:
    """The row for one zoo model whole built on the GPU, eager and compiled (one row a
    model: each compile is tens of seconds, and a row cut at its limit keeps nothing)."""

    def measure(device: str) -> list[Row]:
        case = ModelCase(model, Shape(batch, tokens), torch.float32, "fwd")
        with torch.device(device):
            x = case.inputs()  # the model and its input made on the GPU
        points = [
            one_point(device, 1, case.run, budget_s=0.1, setup=_given(x),
                      variant={"check": False, "compile": compiled})
            for compiled in (False, True)
        ]  # fmt: skip
        eager, compiled = (per_call_s(p) if p.status == "ok" else None for p in points)
        reason = "; ".join(f"{p.status}: {p.reason}" for p in points if p.status != "ok")
        name = f"{model} b{batch}" + (f" s{tokens}" if model == "bert" else "")
        found = rows.CompileCase(
            name, eager, compiled, points[1].extra.get("compile_s"), reason or None
        )
        return [rows.zoo_compile_row([found])]

    return measure


def _given(x: torch.Tensor) -> Callable[[Any], torch.Tensor]:
    """A setup that hands every call the input made beside its model."""

    def setup(_ctx: Any) -> torch.Tensor:
        return x

    return setup


#: name -> the row. Groups of 5 minutes at most, the rows the issue's targets hang on
#: first: a 15-minute lease (its start included) runs groups 1 and 2 and reruns a row;
#: 3 to 5 are for the next one.
SPECS: dict[str, Spec] = {
    "agreement": Spec(measure_agreement, 140, 1, "cold within 5 % of do_bench at 27/30 cells"),
    "ab": Spec(measure_ab, 120, 1, "A/A at 2^24: nothing flagged, lockstep within 2 % of solo"),
    "side-stream": Spec(measure_side_stream, 30, 1, "side-stream work flagged, timed not"),
    "probe": Spec(measure_probe, 150, 2, "full probe beside the datasheet at NVML's clock"),
    "quick": Spec(measure_quick, 150, 2, "two quick runs compare quiet; % peak <= 100"),
    "backward": Spec(measure_backward, 60, 3, "fwd/bwd/fwd_bwd ok, fwd_bwd ~ fwd + bwd"),
    "captured": Spec(measure_captured, 130, 3, "transformer layer on CUDA, coverage 0.7-1.3"),
    "zoo-compile-bert": Spec(
        measure_zoo_compile("bert", 8, 128), 110, 3, "BERT layer eager vs compile, compile apart"
    ),
    "zoo": Spec(measure_zoo, 290, 4, "run zoo --tag quick --budget 0.1 on CUDA: none failed"),
    "zoo-compile-vit": Spec(
        measure_zoo_compile("vit", 8, VIT_TOKENS), 110, 5, "ViT block eager vs compile"
    ),
    "zoo-compile-resnet": Spec(
        measure_zoo_compile("resnet50-stage1", 8, 0), 150, 5, "ResNet stage eager vs compile"
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    return gpu_driver.main(
        argv,
        SPECS,
        description=(__doc__ or "").splitlines()[0],
        name="acceptance2",
        heading="GPU acceptance 2",
    )


if __name__ == "__main__":
    raise SystemExit(main())
