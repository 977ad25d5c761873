"""The claims the ``elementwise`` suite's points answer (``suites/elementwise.py``).

SEEDS A (CPU versus GPU by size, NumPy trails), B (in place saves memory, a lambda
adds no speed) and D (mps and ROCm reachable, profilers and asynchronous CUDA).
"""

from benchbench.analysis.claims import (
    HOLDS,
    INCONCLUSIVE,
    Claim,
    Finding,
    Rows,
    ratio_of_medians,
    speedup,
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
