"""elementwise: sqrt and rsqrt in every form people write them (SEEDS A and B).

Forms: ``torch.sqrt(x)``, in place ``x.sqrt_()``, ``torch.sqrt(x, out=o)``, NumPy;
``torch.rsqrt`` called directly and through a lambda, ``x.rsqrt_()``,
``1 / torch.sqrt(x)``; on 1-D and 2-D tensors, on every device (an absent one is
skipped with the reason). ``torch.sqrt`` and ``torch.rsqrt`` are passed as they
are, so "through a lambda" is the only form with an extra Python frame. The
``out=`` forms write into a buffer allocated on their first call (the reference
check, untimed); finding it costs one attribute read per call.

``dropout scale`` is the everyday chain ``mask.bernoulli_(keep); mask.div_(keep);
x * mask``. Its generator is reseeded on every call (about 1 µs, next to 10 µs for
the smallest size) so the float64 reference draws the same mask and the result is
checked like any other.

The ``quick`` workloads are small (float32, three sizes); the ``sweep`` workloads
(``nightly``) cover 2^10 to 2^24 elements in four dtypes. ``chain`` (``full``: a
cold ``torch.compile`` takes 20-90 s here, hence its points' 300 s timeout) asks
whether compiling ``sqrt(x * x + 1) * 0.5`` beats three eager kernels; the compile
time is stored as ``extra.compile_s`` (the first call, timed alone), never in the samples.
"""

import numpy as np
import torch

from benchbench import Suite, Variant, pow2
from benchbench.analysis.claims import (
    HOLDS,
    INCONCLUSIVE,
    Claim,
    Finding,
    Rows,
    ratio_of_medians,
    speedup,
)

suite = Suite("elementwise", description="sqrt, rsqrt, dropout-style scaling")

QUICK = ("quick", "nightly", "full")
NIGHTLY = ("nightly", "full")
DEVICES = ("cpu", "cuda", "mps")
QUICK_SIZES = pow2(12, 20, step=4)  # 4 Ki, 64 Ki, 1 Mi elements
SWEEP_SIZES = pow2(10, 24, step=2)
SWEEP_DTYPES = ("float32", "float64", "float16", "bfloat16")
NUMPY_DTYPES = ("float16", "float32", "float64")  # NumPy has no bfloat16
SHAPES_2D = [(64, 64), (256, 256), (1024, 1024)]


def positive(ctx):
    """x in [0.5, 1.5): inside the domain of sqrt and rsqrt (no NaN slow path)."""
    return ctx.uniform(0.5, 1.5)


class WithOut:
    """``fn(x, out=buffer)``, the buffer made on the first call for that shape/dtype/device."""

    def __init__(self, fn):
        self.fn = fn
        self.buffer = torch.empty(0)

    def __call__(self, x):
        buffer = self.buffer
        if buffer.shape != x.shape or buffer.dtype != x.dtype or buffer.device != x.device:
            buffer = self.buffer = torch.empty_like(x)
        return self.fn(x, out=buffer)


RSQRT_LAMBDA = lambda x: torch.rsqrt(x)  # noqa: E731 - the form the claim is about


def unary_bytes(p):
    return 2 * p.numel * p.itemsize  # read x, write the result


SQRT = [
    Variant("torch.sqrt", torch.sqrt),
    Variant("x.sqrt_()", torch.Tensor.sqrt_, inplace=True),
    Variant("torch.sqrt(out=)", WithOut(torch.sqrt)),
    Variant("numpy.sqrt", np.sqrt, numpy=True, dtypes=NUMPY_DTYPES),
]
RSQRT = [
    Variant("torch.rsqrt", torch.rsqrt),
    Variant("lambda: torch.rsqrt", RSQRT_LAMBDA),
    Variant("x.rsqrt_()", torch.Tensor.rsqrt_, inplace=True),
    Variant("torch.rsqrt(out=)", WithOut(torch.rsqrt)),
    Variant("1 / torch.sqrt(x)", lambda x: 1 / torch.sqrt(x)),
    Variant("1 / numpy.sqrt", lambda x: 1 / np.sqrt(x), numpy=True, dtypes=NUMPY_DTYPES),
]

for name, variants in (("sqrt", SQRT), ("rsqrt", RSQRT)):
    common = dict(
        setup=positive,
        variants=variants,
        devices=DEVICES,
        bytes=unary_bytes,
        flops=lambda p: p.numel,
        items=lambda p: p.numel,
    )
    suite.workload(name, sizes=QUICK_SIZES, tags=QUICK, **common)
    suite.workload(f"{name} 2-D", sizes=SHAPES_2D, tags=NIGHTLY, **common)
    suite.workload(f"{name} sweep", sizes=SWEEP_SIZES, dtypes=SWEEP_DTYPES, tags=NIGHTLY, **common)

KEEP = 0.9  # dropout p = 0.1
DROPOUT_SEED = 1234


def dropout_setup(ctx):
    x = ctx.uniform(0.5, 1.5)
    return x, torch.empty_like(x), torch.Generator(device=x.device)


def bernoulli_div(x, mask, generator):
    generator.manual_seed(DROPOUT_SEED)
    mask.bernoulli_(KEEP, generator=generator)
    mask.div_(KEEP)
    return x * mask


for name, sizes, tags in (
    ("dropout scale", QUICK_SIZES, QUICK),
    ("dropout scale sweep", SWEEP_SIZES, NIGHTLY),
):
    suite.workload(
        name,
        setup=dropout_setup,
        variants=[Variant("bernoulli_ + div_ + mul", bernoulli_div)],
        sizes=sizes,
        devices=DEVICES,
        tags=tags,
        bytes=lambda p: 4 * p.numel * p.itemsize,  # write mask, rw mask, read x + write out
        items=lambda p: p.numel,
    )


def chain(x):
    return torch.sqrt(x * x + 1.0) * 0.5


suite.workload(
    "chain",
    setup=positive,
    variants=[
        Variant("eager", chain),
        Variant("torch.compile", chain, compile=True),
    ],
    sizes=[2**16, 2**22],
    devices=DEVICES,
    tags=("full",),
    bytes=unary_bytes,  # fused: read x once, write once (eager moves 3x that)
    flops=lambda p: 4 * p.numel,
    description="sqrt(x * x + 1) * 0.5: three eager kernels versus one compiled one",
)


def _devices_claim(rows: Rows) -> Finding:
    gpu = rows.one("sqrt", "torch.sqrt", device="cuda")
    if isinstance(gpu, Finding):
        return gpu
    ratios = []
    for row in rows.find("sqrt", "torch.sqrt", device="cuda"):
        cpu = rows.one("sqrt", "torch.sqrt", device="cpu", size=row["size"])
        if row["status"] == "ok" and not isinstance(cpu, Finding):
            ratios.append((row["size"], ratio_of_medians(cpu, row)[0]))
    ratios.sort()
    spread = max(max(r, 1 / r) for _, r in ratios)
    small_cpu, large_gpu = ratios[0][1] < 1, ratios[-1][1] > 1
    figure = ", ".join(f"n={n}: cpu/gpu {r:.3g}x" for n, r in ratios)
    verdict = HOLDS if spread > 17 and small_cpu and large_gpu else "does not hold"
    return Finding(verdict, figure, spread, reason="> 17x apart, CPU wins small, GPU wins large")


def _numpy_claim(rows: Rows) -> Finding:
    sizes = sorted({r["size"] for r in rows.find("sqrt", "numpy.sqrt", device="cpu")})
    if not sizes:
        return Finding("not measured", reason="no stored point sqrt:numpy.sqrt")
    found = []
    for size in (sizes[0], sizes[-1]):
        numpy_row = rows.one("sqrt", "numpy.sqrt", device="cpu", size=size)
        torch_row = rows.one("sqrt", "torch.sqrt", device="cpu", size=size)
        if isinstance(numpy_row, Finding):
            return numpy_row
        if isinstance(torch_row, Finding):
            return torch_row
        found.append((size, *ratio_of_medians(numpy_row, torch_row)))
    (n0, r0, _), (n1, r1, ci) = found
    trails = ci[0] > 1
    grows = r1 > r0
    verdict = (
        HOLDS if trails and grows else ("does not hold" if ci[1] < 1 or not grows else INCONCLUSIVE)
    )
    figure = (
        f"numpy/torch = {r0:.3g}x at n={n0}, {r1:.3g}x (95% CI {ci[0]:.3g}-{ci[1]:.3g}) at n={n1}"
    )
    return Finding(verdict, figure, r1, ci, reason="NumPy slower at the largest size, gap growing")


def _inplace_memory(rows: Rows) -> Finding:
    out_of_place = rows.one("rsqrt", "torch.rsqrt", device="cpu")
    if isinstance(out_of_place, Finding):
        return out_of_place
    inplace = rows.one("rsqrt", "x.rsqrt_()", device="cpu", size=out_of_place["size"])
    if isinstance(inplace, Finding):
        return inplace
    a, b = out_of_place["peak_memory_bytes"], inplace["peak_memory_bytes"]
    if a is None or b is None:
        return Finding("not measurable here", reason="peak memory was not recorded")
    figure = f"peak memory of one call at n={inplace['size']}: {a} B torch.rsqrt, {b} B x.rsqrt_()"
    return Finding(HOLDS if b < a else "does not hold", figure, float(b - a), reason="")


suite.claims += [
    Claim(
        "A-devices",
        "A",
        "CPU and GPU sqrt throughput differ by more than 17x depending on size; small "
        "tensors are faster on the CPU, GPUs win once tensors are large enough",
        "elementwise/sqrt: torch.sqrt on cpu and cuda at every size",
        "elementwise",
        ("sqrt",),
        _devices_claim,
    ),
    Claim(
        "A-numpy",
        "A",
        "numpy.sqrt trails torch.sqrt as arrays grow",
        "elementwise/sqrt: numpy.sqrt vs torch.sqrt, smallest and largest size, cpu",
        "elementwise",
        ("sqrt",),
        _numpy_claim,
    ),
    Claim(
        "B-inplace",
        "B",
        "In-place rsqrt_ saves memory",
        "elementwise/rsqrt: peak memory of one call, x.rsqrt_() vs torch.rsqrt",
        "elementwise",
        ("rsqrt",),
        _inplace_memory,
    ),
    Claim(
        "B-lambda",
        "B",
        "Calling torch.rsqrt through a lambda adds no speed",
        "elementwise/rsqrt: torch.rsqrt vs the same through a lambda (largest size, cpu)",
        "elementwise",
        ("rsqrt",),
        # The lambda is not faster: direct/lambda stays below 1.05x.
        speedup("rsqrt", "torch.rsqrt", "lambda: torch.rsqrt", low=0.0, high=1.05, device="cpu"),
    ),
]


def _devices_reachable(rows: Rows) -> Finding:
    found = {}
    for device in ("mps", "cuda"):
        row = rows.one("sqrt", "torch.sqrt", device=device)
        found[device] = row
    ok = [d for d, r in found.items() if not isinstance(r, Finding)]
    if ok:
        return Finding(HOLDS, f"torch.sqrt measured on {', '.join(ok)}", float(len(ok)))
    reasons = "; ".join(f.reason for f in found.values() if isinstance(f, Finding))
    verdicts = {f.verdict for f in found.values() if isinstance(f, Finding)}
    verdict = "not measured" if verdicts == {"not measured"} else "not measurable here"
    return Finding(verdict, reason=reasons)


def _profiler_async(rows: Rows) -> Finding:
    gpu = rows.one("sqrt", "torch.sqrt", device="cuda")
    if isinstance(gpu, Finding):
        return gpu
    profiled = (gpu.get("extra") or {}).get("profile")
    if not profiled:
        return Finding(
            "not measured",
            reason="run `benchbench run elementwise --tag quick --device cuda --profile "
            "--filter 'sqrt:torch.sqrt'` to profile the CUDA point",
        )
    cpu_s = sum(op["self_cpu_s"] for op in profiled["top"])
    device_s = sum(op["self_device_s"] for op in profiled["top"])
    figure = (
        f"profiled self CPU {cpu_s:.3g} s vs device {device_s:.3g} s over {profiled['calls']} calls"
    )
    return Finding(HOLDS if abs(cpu_s - device_s) > 0.1 * device_s else "does not hold", figure)


suite.claims += [
    Claim(
        "D-devices",
        "D",
        "Apple GPUs run through the mps device (torch.backends.mps.is_available / is_built) "
        "and AMD GPUs through the cuda device (torch.version.hip)",
        "elementwise/sqrt: torch.sqrt on mps and cuda",
        "elementwise",
        ("sqrt",),
        _devices_reachable,
    ),
    Claim(
        "D-profiler",
        "D",
        "CPU-side profilers misreport asynchronous CUDA work; profile with CUDA activity",
        "elementwise/sqrt on cuda with run --profile: self CPU vs self device time",
        "elementwise",
        ("sqrt",),
        _profiler_async,
    ),
]
