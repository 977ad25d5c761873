"""The claims the ``precision`` suite's points answer (``suites/precision.py``).

SEEDS A (float16 ``sqrt``), C (autocast, softmax, cross-entropy) and D (matmul
errors per dtype, TF32, reduced-precision reductions, batched versus sliced ``bmm``).
"""

from benchbench.analysis.claims import HOLDS, Claim, Finding, Rows, faster, ratio_of_medians


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
        ratio, ci, quicker = faster(off, on)
        figure = (
            f"{baseline}/{variant} = {ratio:.3g}x (95% CI {ci[0]:.3g}-{ci[1]:.3g}); max rel "
            f"error {on['max_rel_error']:.3g} vs {off['max_rel_error']:.3g}"
        )
        coarser = on["max_rel_error"] >= off["max_rel_error"]
        verdict = quicker if coarser else "does not hold"
        return Finding(verdict, figure, ratio, ci, reason="faster (CI > 1x) and less precise")

    return evaluate


def _autocast(rows: Rows) -> Finding:
    step = "fwd_bwd"  # the training step: forward and backward
    cpu = rows.one("autocast step", "autocast bfloat16", device="cpu", mode=step)
    cpu_note = ""
    if not isinstance(cpu, Finding):
        base = rows.one("autocast step", "float32", device="cpu", mode=step)
        if not isinstance(base, Finding):
            ratio, ci = ratio_of_medians(base, cpu)
            cpu_note = (
                f"; CPU bfloat16 autocast: float32/autocast = {ratio:.3g}x "
                f"(95% CI {ci[0]:.3g}-{ci[1]:.3g})"
            )
    gpu = rows.one("autocast step", "autocast float16", device="cuda", mode=step)
    if isinstance(gpu, Finding):
        return Finding(gpu.verdict, cpu_note.lstrip("; "), reason=gpu.reason)
    base = rows.one("autocast step", "float32", device="cuda", mode=step)
    if isinstance(base, Finding):
        return base
    ratio, ci, verdict = faster(base, gpu)
    return Finding(
        verdict,
        f"CUDA float32/autocast float16 = {ratio:.3g}x (95% CI {ci[0]:.3g}-{ci[1]:.3g})" + cpu_note,
        ratio,
        ci,
        reason="up to 2x: holds when autocast is faster (CI > 1x)",
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


claims = [
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
