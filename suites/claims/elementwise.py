"""The claims the ``elementwise`` suite's points answer (``suites/elementwise.py``).

SEEDS A (CPU versus GPU by size, NumPy trails), B (in place saves memory, a lambda
adds no speed) and D (mps and ROCm reachable, profilers and asynchronous CUDA).
"""

from benchbench.analysis.claims import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURED,
    UNMEASURABLE,
    Claim,
    Finding,
    Rows,
    above,
    all_of,
    ratio_of_medians,
    speedup,
)


def _devices_claim(rows: Rows) -> Finding:
    gpu = rows.one("sqrt", "torch.sqrt", device="cuda")
    if isinstance(gpu, Finding):
        return gpu
    found = []  # (size, cpu/gpu ratio, its 95 % interval) at the sizes measured on both
    for row in rows.find("sqrt", "torch.sqrt", device="cuda"):
        cpu = rows.one("sqrt", "torch.sqrt", device="cpu", size=row["size"])
        if row["status"] == "ok" and not isinstance(cpu, Finding):
            found.append((row["size"], *ratio_of_medians(cpu, row)))
    if not found:
        return Finding(
            UNMEASURABLE,
            reason="no size has both a cpu and a cuda point of sqrt:torch.sqrt; run "
            "elementwise with --device cpu,cuda",
        )
    found.sort()
    (_, _, small), (_, _, large) = found[0], found[-1]
    # How far apart at best and at worst: max(r, 1/r) over the sizes, bounded by the CIs.
    lowest = max(max(lo, 1 / hi) for _, _, (lo, hi) in found)
    highest = max(max(hi, 1 / lo) for _, _, (lo, hi) in found)
    apart = True if lowest > 17 else (False if highest <= 17 else None)
    small_cpu = above((1 / small[1], 1 / small[0]), 1.0)  # gpu/cpu above 1: the CPU wins
    large_gpu = above(large, 1.0)
    figure = ", ".join(
        f"n={n}: cpu/gpu {r:.3g}x (95% CI {lo:.3g}-{hi:.3g})" for n, r, (lo, hi) in found
    )
    spread = max(max(r, 1 / r) for _, r, _ in found)
    return Finding(
        all_of((apart, small_cpu, large_gpu)),
        figure,
        spread,
        reason="> 17x apart, CPU wins small, GPU wins large (each from its 95% interval)",
    )


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
    (n0, r0, ci0), (n1, r1, ci) = found
    trails = above(ci, 1.0)
    # The gap grows when the largest size's interval lies above the smallest's.
    grows = True if ci[0] > ci0[1] else (False if ci[1] < ci0[0] else None)
    verdict = all_of((trails, grows))
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


claims = [
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
    # Two parts: Apple GPUs through mps, AMD GPUs through cuda. A cuda point shows the
    # ROCm part only on a ROCm build of torch (the environment's ``rocm``); on an NVIDIA
    # GPU it shows nothing about AMD.
    mps = rows.one("sqrt", "torch.sqrt", device="mps")
    cuda = rows.one("sqrt", "torch.sqrt", device="cuda")
    rocm = rows.environment.get("rocm")
    seen = []
    if not isinstance(mps, Finding):
        seen.append("torch.sqrt measured on mps")
    if not isinstance(cuda, Finding) and rocm:
        seen.append(f"torch.sqrt measured on cuda under ROCm {rocm}")
    if len(seen) == 2:
        return Finding(HOLDS, "; ".join(seen), 2.0)
    missing = []
    if isinstance(mps, Finding):
        missing.append(f"the mps part: {mps.reason}")
    if isinstance(cuda, Finding):
        missing.append(f"the ROCm part: {cuda.reason}")
    elif not rocm:
        missing.append("the ROCm part: the cuda points ran on a CUDA (not ROCm) build of torch")
    reason = "; ".join(missing) + " (one machine shows at most one part)"
    verdicts = [f.verdict if isinstance(f, Finding) else UNMEASURABLE for f in (mps, cuda)]
    verdict = NOT_MEASURED if set(verdicts) == {NOT_MEASURED} else UNMEASURABLE
    return Finding(verdict, "; ".join(seen), float(len(seen)), reason=reason)


def _profiler_async(rows: Rows) -> Finding:
    gpu = rows.one("sqrt", "torch.sqrt", device="cuda")
    if isinstance(gpu, Finding):
        return gpu
    profiled = (gpu.get("extra") or {}).get("profile")
    if not profiled:
        return Finding(
            NOT_MEASURED,
            reason="run `benchbench run elementwise --tag quick --device cuda --profile "
            "--filter 'sqrt:torch.sqrt'` to profile the CUDA point",
        )
    calls = profiled["calls"]
    cpu_s = sum(op["self_cpu_s"] for op in profiled["top"]) / calls
    device_s = sum(op["self_device_s"] for op in profiled["top"]) / calls
    if device_s <= 0:
        return Finding(
            UNMEASURABLE,
            reason="the trace holds no device time: it recorded no CUDA activity",
        )
    lo, hi = gpu.get("ci_low_s"), gpu.get("ci_high_s")
    figure = (
        f"profiled self CPU {cpu_s:.3g} s/call, device {device_s:.3g} s/call; measured with "
        f"CUDA events {gpu['median_s']:.3g} s/call"
    )
    if lo is None or hi is None:
        return Finding(INCONCLUSIVE, figure, reason="the point has no interval of its median")
    figure += f" (95% CI {lo:.3g}-{hi:.3g})"
    # The CPU side misreports when its time per call lies outside the interval of the
    # time the GPU took; it does not when it lies inside.
    verdict = HOLDS if not lo <= cpu_s <= hi else FAILS
    return Finding(
        verdict, figure, cpu_s, (lo, hi), reason="CPU-side time outside the measured interval"
    )


claims += [
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
