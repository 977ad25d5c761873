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
from benchbench.analysis.claims import read_claims

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

# The claims these points answer: suites/claims/elementwise.py (no torch there, so that
# `benchbench claims` reads them without loading this file).
suite.claims += read_claims(__file__)
