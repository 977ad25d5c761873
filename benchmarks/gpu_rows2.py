"""The verdicts of the second GPU acceptance (benchmarks/gpu_acceptance2.py): pure
functions of numbers, unit-tested on fake ones (tests/unit/test_gpu_acceptance2.py).
Nothing here touches a GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_datasheet import Datasheet
from gpu_driver import FAIL, NOT_AVAILABLE, PASS, Row, within

from benchbench.measure.gpu import UNTIMED_SHARE

AB_TOLERANCE = 0.02  # ab's lockstep median vs the same point run solo
#: A probe figure against the datasheet's at the clock NVML read: a compute peak at
#: half of it or less, or above it by more than the clock reading's slack, is a wrong
#: probe (or a wrong clock); memory can only fall short of its datasheet.
COMPUTE_BAND = (0.5, 1.05)
MEMORY_BAND = (0.6, 1.02)
#: The sum of a breakdown's calls against the whole callable (the issue's bounds); a
#: training step's fwd_bwd against its fwd + bwd the same.
COVERAGE_BAND = (0.7, 1.3)
#: Where a captured whole is declared on one device only (the zoo's: the CPU).
WHOLE_ELSEWHERE = "runs only there"


def ab_row(lockstep_s: float, solo_s: float, flagged: int, exit_code: int) -> Row:
    """ab A/A: nothing flagged, exit 0, the lockstep median within 2 % of the solo one."""
    passed = within(lockstep_s, solo_s, AB_TOLERANCE) and flagged == 0 and exit_code == 0
    numbers = (
        f"lockstep {lockstep_s * 1e6:.2f} µs vs solo {solo_s * 1e6:.2f} µs "
        f"({lockstep_s / solo_s - 1:+.2%}); {flagged} flagged, exit {exit_code}"
    )
    return Row("ab A/A", PASS if passed else FAIL, numbers)


@dataclass(frozen=True)
class ProbeFigures:
    """The probe's device bandwidth and peaks (TF32 from a plain matmul: the probe
    times float32 matmuls at torch's default precision, without TF32) and the SM clock
    NVML read under a matmul's load."""

    bandwidth_bytes_per_s: float
    flop_per_s: Mapping[str, float]  # float32, tf32, bfloat16
    sm_mhz: float | None


def _band_row(name: str, ratio: float, band: tuple[float, float], numbers: str) -> Row:
    low, high = band
    status = PASS if low <= ratio <= high else FAIL
    return Row(name, status, f"{numbers} ({ratio:.1%}; band {low:.0%}-{high:.0%})")


def datasheet_rows(figures: ProbeFigures, sheet: Datasheet | None, why: str) -> list[Row]:
    """Bandwidth and each peak beside the datasheet's dense figure (compute at the SM
    clock NVML read)."""
    names = ["probe bandwidth vs datasheet"] + [
        f"{kind} peak vs datasheet" for kind in ("float32", "tf32", "bfloat16")
    ]
    if sheet is None:
        return [Row(n, NOT_AVAILABLE, why) for n in names]
    bandwidth = figures.bandwidth_bytes_per_s
    rows = [
        _band_row(
            names[0],
            bandwidth / sheet.memory_bytes_per_s,
            MEMORY_BAND,
            f"{bandwidth / 1e9:.0f} GB/s vs {sheet.board} {sheet.memory_bytes_per_s / 1e9:.0f}",
        )
    ]
    for name, kind in zip(names[1:], ("float32", "tf32", "bfloat16"), strict=True):
        measured = figures.flop_per_s.get(kind)
        if measured is None or figures.sm_mhz is None:
            missing = "no SM clock from NVML" if figures.sm_mhz is None else f"no {kind} figure"
            rows.append(Row(name, NOT_AVAILABLE, missing))
            continue
        expected = sheet.at_clock(kind, figures.sm_mhz)
        numbers = (
            f"{measured / 1e12:.1f} TFLOP/s vs {expected / 1e12:.1f} at {figures.sm_mhz:.0f} MHz "
            f"({sheet.board}: {sheet.peak_flop_per_s[kind] / 1e12:.1f} at "
            f"{sheet.quoted_clock_mhz(kind):.0f} MHz)"
        )
        rows.append(_band_row(name, measured / expected, COMPUTE_BAND, numbers))
    return rows


def peak_row(percents: Sequence[tuple[str, float | None]]) -> Row:
    """The quick suite's % of peak (against the stored probe) never above 100 %."""
    known = [(label, p) for label, p in percents if p is not None]
    if not known:
        return Row("quick % peak", NOT_AVAILABLE, "no % of peak: no probe in the store")
    above = sorted(((p, label) for label, p in known if p > 100.0), reverse=True)
    top_percent, top_label = max((p, label) for label, p in known)
    numbers = f"{len(known)} points with a % of peak, highest {top_percent:.1f} % ({top_label})"
    if above:
        numbers += f"; {len(above)} above 100 %: " + ", ".join(
            f"{lb} {p:.0f} %" for p, lb in above[:3]
        )
    return Row("quick % peak", FAIL if above else PASS, numbers)


def compare_row(
    statuses: Sequence[Sequence[str]], points: Sequence[Mapping[str, Any]], exit_code: int
) -> Row:
    """Two ``run quick`` of the same code: neither has a failed point, and ``compare``
    between them flags nothing (no point slower or faster) and exits 0."""
    errors = [sum(1 for s in run if s == "error") for run in statuses]
    flagged = [p for p in points if p.get("mark") in ("slower", "faster", "failing")]
    ratios = sorted(p["ratio"] for p in points if p.get("ratio") is not None)
    spread = f"ratios {ratios[0]:.3f}-{ratios[-1]:.3f}" if ratios else "no ratios"
    numbers = (
        f"{len(points)} points compared, {len(flagged)} flagged, {spread}; "
        f"errors per run {errors}; compare exit {exit_code}"
    )
    if flagged:
        first = flagged[0]
        numbers += f"; first: {first.get('label')} {first.get('mark')} {first.get('ratio')}"
    passed = bool(points) and not flagged and not any(errors) and exit_code == 0
    return Row("quick compare (A/A)", PASS if passed else FAIL, numbers)


def coverage_row(name: str, breakdowns: Sequence[Mapping[str, Any]]) -> Row:
    """``breakdown`` of a captured model on CUDA: coverage (sum of its calls / the
    whole) between 0.7 and 1.3."""
    found = [b for b in breakdowns if str(b.get("device", "")).startswith("cuda")]
    if not found:
        return Row(name, FAIL, f"no CUDA breakdown among {len(breakdowns)}")
    parts, passed = [], True
    low, high = COVERAGE_BAND
    for b in found:
        coverage, whole = b.get("coverage"), b.get("whole_s")
        ok = coverage is not None and low <= coverage <= high
        passed = passed and ok
        shown = "none" if coverage is None else f"{coverage:.2f}"
        whole_text = "no whole" if whole is None else f"whole {whole * 1e6:.1f} µs"
        parts.append(
            f"{b.get('capture')}: coverage {shown} (sum {b['sum_s'] * 1e6:.1f} µs, {whole_text}, "
            f"{len(b.get('calls') or [])} calls)"
        )
    return Row(name, PASS if passed else FAIL, "; ".join(parts))


def backward_row(results: Sequence[Mapping[str, Any]]) -> Row:
    """Every fwd / bwd / fwd_bwd point ok on CUDA, and per workload fwd_bwd between 0.7
    and 1.3 of fwd + bwd (a training step is its forward and its backward)."""
    by: dict[str, dict[str, float]] = {}
    bad = [f"{r['workload']} {r['params'].get('mode')}: {r['status']}: {r.get('reason')}"
           for r in results if r["status"] != "ok"]  # fmt: skip
    for r in results:
        if r["status"] == "ok":
            by.setdefault(r["workload"], {})[r["params"].get("mode", "fwd")] = r["median_s"]
    parts, passed = [], not bad and bool(by)
    for workload, modes in by.items():
        if not {"fwd", "bwd", "fwd_bwd"} <= set(modes):
            passed = False
            parts.append(f"{workload}: modes {sorted(modes)}")
            continue
        ratio = modes["fwd_bwd"] / (modes["fwd"] + modes["bwd"])
        passed = passed and COVERAGE_BAND[0] <= ratio <= COVERAGE_BAND[1]
        parts.append(
            f"{workload}: fwd {modes['fwd'] * 1e6:.1f}, bwd {modes['bwd'] * 1e6:.1f}, "
            f"fwd_bwd {modes['fwd_bwd'] * 1e6:.1f} µs (fwd_bwd / (fwd + bwd) {ratio:.2f})"
        )
    if bad:
        parts.append("not ok: " + "; ".join(bad[:3]))
    return Row("backward points", PASS if passed else FAIL, "; ".join(parts))


def zoo_row(results: Sequence[Mapping[str, Any]]) -> Row:
    """The zoo on CUDA: no point fails; the only skips are the CPU-captured wholes."""
    ok = sum(1 for r in results if r["status"] == "ok")
    errors = [r for r in results if r["status"] == "error"]
    skipped = [r for r in results if r["status"] == "skipped"]
    odd = [r for r in skipped if WHOLE_ELSEWHERE not in str(r.get("reason"))]
    numbers = f"{ok} ok, {len(skipped)} skipped (wholes captured on the CPU), {len(errors)} failed"
    for kind, rows in (("failed", errors), ("unexpected skip", odd)):
        if rows:
            numbers += f"; first {kind}: {rows[0]['workload']}: {rows[0].get('reason')}"
    passed = ok > 0 and not errors and not odd
    return Row("zoo on CUDA", PASS if passed else FAIL, numbers)


@dataclass(frozen=True)
class CompileCase:
    """One zoo model whole on CUDA, eager and through ``torch.compile``."""

    name: str
    eager_s: float | None
    compiled_s: float | None
    compile_s: float | None
    reason: str | None = None


def zoo_compile_row(cases: Sequence[CompileCase]) -> Row:
    """Eager against compiled, the compile time apart from the steady-state time: every
    case measured both ways with its compile time, and the calls after which compiling
    pays (compile time / time saved a call) where it saves time."""
    parts, passed = [], bool(cases)
    for c in cases:
        if c.eager_s is None or c.compiled_s is None or not c.compile_s:
            passed = False
            parts.append(f"{c.name}: not measured: {c.reason}")
            continue
        saved = c.eager_s - c.compiled_s
        pays = f"pays after {c.compile_s / saved:,.0f} calls" if saved > 0 else "never pays"
        parts.append(
            f"{c.name}: eager {c.eager_s * 1e3:.3f} ms, compiled {c.compiled_s * 1e3:.3f} ms "
            f"(x{c.eager_s / c.compiled_s:.2f}), compile {c.compile_s:.1f} s, {pays}"
        )
    return Row("zoo eager vs compile", PASS if passed else FAIL, "; ".join(parts))


def side_stream_row(
    side_share: float | None, side_s: float, same_share: float | None, same_s: float
) -> Row:
    """Work put on another stream inside the timed call is flagged (``untimed_share``
    above the engine's 5 % threshold), the same work on the timed stream is not (it is
    in the events' time: its share is measured and at most the threshold)."""
    flagged = side_share is not None and side_share > UNTIMED_SHARE
    passed = flagged and same_share is not None and same_share <= UNTIMED_SHARE
    numbers = (
        f"side stream: {side_s * 1e6:.1f} µs a call, untimed share {side_share}; "
        f"same stream: {same_s * 1e6:.1f} µs a call, untimed share {same_share}"
    )
    return Row("side stream", PASS if passed else FAIL, numbers)
