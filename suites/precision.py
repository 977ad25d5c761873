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
from benchbench.analysis.claims import HOLDS, Claim, Finding, Rows

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

# -- claims --------------------------------------------------------------------------


def _float16_sqrt(rows: Rows) -> Finding:
    half = rows.one("sqrt magnitude", "torch.sqrt", dtype="float16", magnitude=1e-8)
    if isinstance(half, Finding):
        return half
    single = rows.one("sqrt magnitude", "torch.sqrt", dtype="float32", magnitude=1e-8)
    if isinstance(single, Finding):
        return single
    e16, e32 = half["max_rel_error"], single["max_rel_error"]
    figure = (
        f"inputs in [1e-8, 1e-7): max rel error float16 {e16:.3g}, float32 {e32:.3g} "
        "(float16 smallest subnormal 6e-8, smallest normal 6.1e-5)"
    )
    # Off by more than 10x from below means the result is under a tenth of the true
    # value: a relative error of at least 0.9.
    verdict = HOLDS if e16 >= 0.9 and e32 <= 1e-6 else "does not hold"
    return Finding(verdict, figure, e16, reason="float16 rel error >= 0.9, float32 <= 1e-6")


def _overflow(workload: str, naive: str, stable: str):
    def evaluate(rows: Rows) -> Finding:
        counts = {}
        for variant in (naive, stable):
            for peak in (88.0, 89.0):
                row = rows.one(workload, variant, peak=peak, dtype="float32")
                if isinstance(row, Finding):
                    return row
                counts[variant, peak] = (row.get("extra") or {}).get("nonfinite")
        if None in counts.values():
            return Finding("not measurable here", reason="NaN/Inf counts were not recorded")
        figure = (
            f"NaN/Inf per 64 rows at peak logit 88 / 89: {naive} {counts[naive, 88.0]} / "
            f"{counts[naive, 89.0]}, {stable} {counts[stable, 88.0]} / {counts[stable, 89.0]}"
        )
        holds = (
            counts[naive, 88.0] == 0
            and counts[naive, 89.0] > 0
            and counts[stable, 88.0] == counts[stable, 89.0] == 0
        )
        return Finding(HOLDS if holds else "does not hold", figure, float(counts[naive, 89.0]))

    return evaluate


def _matmul_precision(rows: Rows) -> Finding:
    errors = {}
    for dtype in ("float32", "float16", "bfloat16"):
        row = rows.one("matmul", "torch.matmul", dtype=dtype, device="cpu")
        if isinstance(row, Finding):
            return row
        errors[dtype] = row["max_rel_error"]
    figure = ", ".join(f"{d} {e:.3g}" for d, e in errors.items()) + " max rel error vs float64"
    holds = errors["float32"] < errors["float16"] and errors["float32"] < errors["bfloat16"]
    return Finding(HOLDS if holds else "does not hold", figure, errors["float16"])


def _cuda_only(workload: str, variant: str, baseline: str, dtype: str):
    def evaluate(rows: Rows) -> Finding:
        on = rows.one(workload, variant, device="cuda", dtype=dtype)
        if isinstance(on, Finding):
            return on
        off = rows.one(workload, baseline, device="cuda", dtype=dtype, size=on["size"])
        if isinstance(off, Finding):
            return off
        ratio = off["median_s"] / on["median_s"]
        figure = (
            f"{baseline}/{variant} = {ratio:.3g}x; max rel error {on['max_rel_error']:.3g} "
            f"vs {off['max_rel_error']:.3g}"
        )
        holds = ratio > 1 and on["max_rel_error"] >= off["max_rel_error"]
        return Finding(HOLDS if holds else "does not hold", figure, ratio)

    return evaluate


def _autocast(rows: Rows) -> Finding:
    step = "fwd_bwd"  # the training step: forward and backward
    cpu = rows.one("autocast step", "autocast bfloat16", device="cpu", mode=step)
    cpu_note = ""
    if not isinstance(cpu, Finding):
        base = rows.one("autocast step", "float32", device="cpu", mode=step)
        if not isinstance(base, Finding):
            ratio = base["median_s"] / cpu["median_s"]
            cpu_note = f"; CPU bfloat16 autocast: float32/autocast = {ratio:.3g}x"
    gpu = rows.one("autocast step", "autocast float16", device="cuda", mode=step)
    if isinstance(gpu, Finding):
        return Finding(gpu.verdict, cpu_note.lstrip("; "), reason=gpu.reason)
    base = rows.one("autocast step", "float32", device="cuda", mode=step)
    if isinstance(base, Finding):
        return base
    ratio = base["median_s"] / gpu["median_s"]
    return Finding(
        HOLDS if ratio > 1 else "does not hold",
        f"CUDA float32/autocast float16 = {ratio:.3g}x{cpu_note}",
        ratio,
        reason="up to 2x: holds when autocast is faster",
    )


def _bmm(rows: Rows) -> Finding:
    found = [r for r in rows.find("bmm difference") if r["status"] == "ok"]
    if not found:
        return rows.one("bmm difference")  # type: ignore[return-value]
    # Runs stored before the max_abs_error column kept it in ``extra``.
    diffs = {
        r["size"]: r.get("max_abs_error")
        if r.get("max_abs_error") is not None
        else (r.get("extra") or {}).get("max_abs_error", 0.0)
        for r in found
    }
    figure = ", ".join(f"n={n}: max |diff| {d:.3g}" for n, d in sorted(diffs.items()))
    verdict = HOLDS if any(d > 0 for d in diffs.values()) else "does not hold"
    return Finding(
        verdict, figure, max(diffs.values()), reason="holds if any difference is nonzero"
    )


suite.claims += [
    Claim(
        "A-float16-sqrt",
        "A",
        "sqrt of 1e-8 in float16 is off by more than 10x, and float32 fixes it",
        "precision/sqrt magnitude at magnitude 1e-8, float16 and float32",
        "precision",
        ("sqrt magnitude",),
        _float16_sqrt,
    ),
    Claim(
        "C-autocast",
        "C",
        "autocast can cut training-step time by up to half on modern GPUs",
        "precision/autocast step, mode fwd_bwd: float32 vs autocast float16 on cuda "
        "(bfloat16 on cpu)",
        "precision",
        ("autocast step",),
        _autocast,
    ),
    Claim(
        "C-softmax",
        "C",
        "naive softmax returns NaN for logits above about 88.7 in float32; the "
        "max-subtracted form does not",
        "precision/softmax at peak logits 88 and 89: NaN/Inf counts",
        "precision",
        ("softmax",),
        _overflow("softmax", "naive exp / sum", "max-subtracted"),
    ),
    Claim(
        "C-cross-entropy",
        "C",
        "naive cross-entropy (log of a naive softmax) breaks where the logsumexp form does not",
        "precision/cross entropy at peak logits 88 and 89: NaN/Inf counts",
        "precision",
        ("cross entropy",),
        _overflow("cross entropy", "naive -log softmax", "logsumexp"),
    ),
    Claim(
        "D-matmul-dtypes",
        "D",
        "float16 and bfloat16 matmuls are less accurate than float32 against float64",
        "precision/matmul: max rel error per dtype, cpu",
        "precision",
        ("matmul",),
        _matmul_precision,
    ),
    Claim(
        "D-tf32",
        "D",
        "TF32 (allow_tf32) speeds up float32 matmuls on CUDA at reduced precision",
        "precision/matmul: allow_tf32 vs default, float32 on cuda",
        "precision",
        ("matmul",),
        _cuda_only("matmul", "allow_tf32", "torch.matmul", "float32"),
    ),
    Claim(
        "D-reduced-reduction",
        "D",
        "reduced-precision reductions in float16 matmuls are faster and less accurate",
        "precision/matmul: reduced reduction on vs off, float16 on cuda",
        "precision",
        ("matmul",),
        _cuda_only("matmul", "reduced reduction on", "reduced reduction off", "float16"),
    ),
    Claim(
        "D-bmm",
        "D",
        "batched and sliced computation are not bitwise identical: (A @ B)[0] vs A[0] @ B[0]",
        "precision/bmm difference: max |difference|",
        "precision",
        ("bmm difference",),
        _bmm,
    ),
]
