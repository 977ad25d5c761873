"""precision: speed and error of reduced precision, and numerically unstable forms.

SEEDS A (float16 ``sqrt``), C (autocast, softmax, cross-entropy) and D (matmul
math modes, batched versus sliced ``bmm``).

Workloads whose departure from the float64 reference *is* the measurement use the
``record`` check mode (accuracy, NaN/Inf counts stored; the point is never
rejected): the naive softmax and cross-entropy (NaN/Inf above a logit of ~88.7 in
float32 is the expected outcome), ``sqrt magnitude`` (float16 flushes 1e-8 to zero
before ``sqrt`` runs) and ``bmm difference`` (the reference is zero; the stored
``max_abs_error`` is the batched-versus-sliced difference). Every other variant is
checked against float64 with the dtype's tolerance.

``autocast step`` is measured forward, backward and as a training step (``modes``:
``fwd``, ``bwd``, ``fwd_bwd``); the autocast claim reads the step, ``fwd_bwd``. Its
gradients are checked against float64 gradients of the float32 forward.

CUDA-only math modes (TF32, reduced-precision reductions, float16 autocast) are
skipped on other devices with the reason; their flags are set in ``setup`` and
restored in ``teardown``, so no point leaks a global mode into the next.
"""

import torch
import torch.nn.functional as F

from benchbench import Skip, Suite, Variant
from benchbench.analysis.claims import read_claims

suite = Suite("precision", description="reduced precision, math modes, numerical stability")

QUICK = ("quick", "nightly", "full")
NIGHTLY = ("nightly", "full")

# -- matmul math modes ---------------------------------------------------------------

_MATMUL = torch.backends.cuda.matmul
_FLAGS = {
    "allow_tf32": ("allow_tf32", True),
    "reduced reduction on": (None, True),
    "reduced reduction off": (None, False),
}
_saved: list[tuple[str, bool]] = []


def _reduction_flag(dtype):
    if dtype == torch.float16:
        return "allow_fp16_reduced_precision_reduction"
    return "allow_bf16_reduced_precision_reduction"


#: This CPU has no fast float16 GEMM: 512^2 takes 0.3 s, 1024^2 7 s per call here.
CPU_FLOAT16_MAX_N = 512


def matmul_setup(ctx):
    n = ctx.shape[0]
    if ctx.device.type == "cpu" and ctx.point.dtype == "float16" and n > CPU_FLOAT16_MAX_N:
        raise Skip(
            f"float16 matmul on the CPU has no fast kernel here (7 s for 1024^2); "
            f"the CPU sweep stops at {CPU_FLOAT16_MAX_N}^2"
        )
    a = ctx.uniform(0.5, 1.5)
    b = ctx.uniform(0.5, 1.5)
    variant = ctx.point.variant
    if variant in _FLAGS:
        flag, value = _FLAGS[variant]
        flag = flag or _reduction_flag(ctx.dtype)
        if ctx.device.type != "cuda":
            raise Skip(
                f"torch.backends.cuda.matmul.{flag} is a CUDA math mode; "
                f"{ctx.device.type} matmuls ignore it"
            )
        _saved.append((flag, getattr(_MATMUL, flag)))
        setattr(_MATMUL, flag, value)
    return a, b


def restore_flags(*_inputs):
    while _saved:
        flag, value = _saved.pop()
        setattr(_MATMUL, flag, value)


for name, sizes, tags in (
    ("matmul", [(256, 256)], QUICK),
    ("matmul sweep", [(n, n) for n in (128, 512, 1024, 2048)], NIGHTLY),
):
    suite.workload(
        name,
        setup=matmul_setup,
        teardown=restore_flags,
        variants=[
            Variant("torch.matmul", torch.matmul),
            # TF32 rounds the inputs to float16's 10-bit mantissa: float16's tolerance.
            Variant("allow_tf32", torch.matmul, dtypes=("float32",), rtol=1e-3),
            Variant("reduced reduction on", torch.matmul, dtypes=("float16", "bfloat16")),
            Variant("reduced reduction off", torch.matmul, dtypes=("float16", "bfloat16")),
        ],
        sizes=sizes,
        dtypes=("float32", "float16", "bfloat16"),
        devices=("cpu", "cuda"),
        tags=tags,
        bytes=lambda p: 3 * p.numel * p.itemsize,
        flops=lambda p: 2 * p.shape[0] ** 3,
        reduction_size=lambda p: p.shape[1],  # each output sums n products
        description="square n x n @ n x n, inputs in [0.5, 1.5)",
    )

# -- automatic mixed precision ---------------------------------------------------------


def autocast_setup(ctx):
    if ctx.point.variant == "autocast float16" and ctx.device.type != "cuda":
        raise Skip("float16 autocast is the CUDA case; on the CPU bfloat16 autocast is measured")
    batch, width, hidden = ctx.shape
    scale = 1.0 / width
    x = ctx.uniform(0.5, 1.5, shape=(batch, width))
    w1 = ctx.uniform(0.0, scale, shape=(width, hidden)).requires_grad_()
    w2 = ctx.uniform(0.0, scale, shape=(hidden, width)).requires_grad_()
    return x, w1, w2


def forward(x, w1, w2):
    return torch.relu(x @ w1) @ w2


def autocast_forward(device_type, dtype):
    def under_autocast(x, w1, w2):
        with torch.autocast(device_type, dtype=dtype):
            return forward(x, w1, w2)

    return under_autocast


#: Matmuls per mode: the forward's two; the backward's three (dW2, dH, dW1: the data x
#: gets no gradient, so no dX). 2 * batch * width * hidden FLOPs each.
AUTOCAST_MATMULS = {"fwd": 2, "bwd": 3, "fwd_bwd": 5}

suite.workload(
    "autocast step",
    setup=autocast_setup,
    variants=[
        Variant("float32", forward),
        Variant("autocast bfloat16", autocast_forward("cpu", torch.bfloat16), devices=("cpu",)),
        Variant("autocast float16", autocast_forward("cuda", torch.float16)),
    ],
    sizes=[(256, 512, 512)],
    dtypes=("float32",),
    devices=("cpu", "cuda"),
    # The claim is about training: fwd_bwd is the step (forward under autocast, backward
    # outside it, as the AMP recipe runs it); bwd is the backward alone.
    modes=("fwd", "bwd", "fwd_bwd"),
    tags=QUICK,
    reference=forward,
    # Under autocast the matmuls round to bfloat16 (8-bit mantissa: 2^-8 = 0.4 % per
    # rounding); the outputs and gradients of a float32 point carry that error. All
    # values and the gradient fed in are positive (no cancellation), so 5e-2 still
    # rejects a wrong computation.
    rtol={"float32": 5e-2},
    flops=lambda p: AUTOCAST_MATMULS[p["mode"]] * 2 * p.shape[0] * p.shape[1] * p.shape[2],
    description="relu(x @ w1) @ w2 with weights w1, w2; mode fwd_bwd is one training step; "
    "shape = (batch, width, hidden)",
)

# -- softmax and cross-entropy -------------------------------------------------------


def logits(ctx):
    """Rows of logits in [-10, 0) whose first entry is the point's ``peak``."""
    x = ctx.uniform(-10.0, 0.0)
    x[:, 0] = ctx["peak"]
    return x


def naive_softmax(x):
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def stable_softmax(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


PEAKS = {"peak": [10.0, 88.0, 89.0]}  # exp(88) = 1.7e38 < float32 max 3.4e38 < exp(89)

suite.workload(
    "softmax",
    setup=logits,
    variants=[
        Variant("torch.softmax", lambda x: torch.softmax(x, dim=-1)),
        Variant("max-subtracted", stable_softmax),
        Variant("naive exp / sum", naive_softmax, check="record"),
    ],
    sizes=[(64, 1024)],
    params=PEAKS,
    tags=QUICK,
    bytes=lambda p: 2 * p.numel * p.itemsize,
    description="softmax over rows; the naive form overflows exp above a logit of ~88.7",
)


def xent_setup(ctx):
    return logits(ctx), ctx.randint(0, ctx.shape[1], shape=(ctx.shape[0],))


def naive_xent(x, target):
    return -torch.log(naive_softmax(x)).gather(1, target.unsqueeze(1)).squeeze(1)


def logsumexp_xent(x, target):
    return torch.logsumexp(x, dim=-1) - x.gather(1, target.unsqueeze(1)).squeeze(1)


suite.workload(
    "cross entropy",
    setup=xent_setup,
    variants=[
        Variant("F.cross_entropy", lambda x, t: F.cross_entropy(x, t, reduction="none")),
        Variant("logsumexp", logsumexp_xent),
        Variant("naive -log softmax", naive_xent, check="record"),
    ],
    sizes=[(64, 1024)],
    params=PEAKS,
    tags=QUICK,
    bytes=lambda p: p.numel * p.itemsize,
    description="per-row cross-entropy loss",
)

# -- batched versus sliced bmm ---------------------------------------------------------


def bmm_setup(ctx):
    return ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)


BMM_SHAPES = [(8, 64, 64), (8, 256, 256)]
suite.workload(
    "bmm",
    setup=bmm_setup,
    variants=[
        Variant("(A @ B)[0]", lambda a, b: (a @ b)[0]),
        Variant("A[0] @ B[0]", lambda a, b: a[0] @ b[0]),
    ],
    sizes=BMM_SHAPES,
    tags=QUICK,
    flops=lambda p: 2 * p.numel * p.shape[1],
    description="the first matrix of a batched product, computed batched or sliced",
)
suite.workload(
    "bmm difference",
    setup=bmm_setup,
    variants=[Variant("(A @ B)[0] - A[0] @ B[0]", lambda a, b: (a @ b)[0] - a[0] @ b[0])],
    sizes=BMM_SHAPES,
    tags=QUICK,
    reference=lambda a, b: torch.zeros_like(a[0]),
    check="record",  # the stored max_abs_error is the batched-vs-sliced difference
    description="zero in exact arithmetic; not bitwise zero when the two paths round differently",
)

# -- sqrt across the input range -------------------------------------------------------

MAGNITUDES = [10.0**e for e in range(-10, 11, 2)]


def magnitude_setup(ctx):
    """x spread log-uniformly over [m, 10 m), rounded to the dtype; the exact values too.

    The reference takes the float64 values *before* rounding, so a float16 input of
    1e-8 (below its smallest subnormal, 6e-8) that became 0 counts as wrong.
    """
    m = ctx["magnitude"]
    exact = ctx.log_uniform(m, 10 * m, dtype=torch.float64).cpu()
    return exact.to(ctx.dtype).to(ctx.device), exact


suite.workload(
    "sqrt magnitude",
    setup=magnitude_setup,
    variants=[Variant("torch.sqrt", lambda x, exact: torch.sqrt(x))],
    sizes=[4096],
    dtypes=("float16", "bfloat16", "float32", "float64"),
    params={"magnitude": MAGNITUDES},
    tags=QUICK,
    reference=lambda x, exact: torch.sqrt(exact),
    check="record",
    budget_s=0.05,  # an accuracy sweep: the time is incidental
    derive=False,  # the float64 ``exact`` input feeds the reference only: not bytes moved
    description="relative error of sqrt per dtype for inputs in [m, 10 m)",
)

# The claims these points answer: suites/claims/precision.py (no torch there, so that
# `benchbench claims` reads them without loading this file).
suite.claims += read_claims(__file__)
