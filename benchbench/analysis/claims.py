"""Published claims beside what this machine measured.

A :class:`Claim` is data: the claim as it was published, which stored measurements
answer it, and an ``evaluate`` function that turns those stored rows into a
:class:`Finding` — a figure with its confidence interval and a verdict. A built-in
suite's claims are declared in its claims file, ``suites/claims/<suite>.py``
(:func:`claims_file`), which imports no torch; the suite file exposes them as
``suite.claims`` (:func:`read_claims`), and :func:`claims_of` reads them without
loading a suite, so ``benchbench claims`` reads a store as ``show`` does, without
importing torch. Verdicts are computed from the store, never written by hand:

- ``holds`` / ``does not hold``: the whole 95 % interval is inside / outside the
  band the claim states (a ratio of medians, a count, an error bound);
- ``inconclusive``: the interval straddles the band's edge (rerun with a larger
  ``--budget`` on a quieter machine);
- ``not measurable here``: the points exist but were skipped or failed (no GPU,
  dtype not supported), with that reason;
- ``not measured``: the run holds no such points; the reason names the suite and
  tag to run.

Ratios of medians and their 95 % interval are benchbench's one estimate
(:func:`benchbench.analysis.verdict.estimate` on the two rows' per-call samples, not
paired): the figure a claim shows is the one ``benchbench compare`` would give for the
same two points. Only the band check against the published band is the claims' own.

Instruction counts (``run --metric instructions``) never decide a claim. The published
claims are about time (speedups), memory and numerical error, and a count cannot see
what makes most of them true or false: a faster memory path, a kernel that vectorises,
a GPU. So a claim reads timed points only; a run whose points of a claim were counted
and not timed gets ``not measured``, with the command that times them. Where both
points of a :func:`speedup` were counted as well as timed, the finding carries their
instruction ratio beside the time ratio (``instructions_ratio``, in the figure as
``instructions slow/fast = 1.9x``), the ratio ``benchbench compare`` would give: it
tells a speedup that comes from doing less work from one that comes from doing the
same work faster, and no verdict is read from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbench.analysis.sides import instructions, per_call, processes
from benchbench.analysis.verdict import estimate, estimate_counts
from benchbench.core.errors import SuiteError

if TYPE_CHECKING:
    from benchbench.store import Store

Row = Mapping[str, Any]

HOLDS = "holds"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"
UNMEASURABLE = "not measurable here"
NOT_MEASURED = "not measured"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, UNMEASURABLE, NOT_MEASURED)


@dataclass(frozen=True)
class Finding:
    """What the stored measurements say about one claim.

    ``instructions_ratio``: where the points a figure compares were also counted, the
    ratio of their instruction counts in the same direction as ``value`` (context, not
    read by the verdict; module docstring)."""

    verdict: str
    figure: str = ""
    value: float | None = None
    ci: tuple[float, float] | None = None
    reason: str = ""
    instructions_ratio: float | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


Evaluate = Callable[["Rows"], Finding]


@dataclass(frozen=True)
class Claim:
    """One published claim and how to check it against a run's stored points.

    ``suite``/``workloads``/``tag`` say which points it needs (and what to run when
    they are missing); ``evaluate(rows)`` receives the run's rows of that suite.
    """

    id: str
    section: str
    text: str
    needs: str
    suite: str
    workloads: tuple[str, ...]
    evaluate: Evaluate
    tag: str = "quick"

    def __post_init__(self) -> None:
        if self.section not in ("A", "B", "C", "D"):
            raise ValueError(
                f"claim {self.id!r}: section must be A, B, C or D, got {self.section!r}"
            )


@dataclass(frozen=True)
class ClaimResult:
    """A claim with its finding on one run."""

    claim: Claim
    finding: Finding

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.claim.id,
            "section": self.claim.section,
            "claim": self.claim.text,
            "needs": self.claim.needs,
            "suite": self.claim.suite,
            "verdict": self.finding.verdict,
            "figure": self.finding.figure,
            "value": _finite(self.finding.value),
            "ci": [_finite(v) for v in self.finding.ci] if self.finding.ci else None,
            "reason": self.finding.reason,
            "instructions_ratio": _finite(self.finding.instructions_ratio),
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class Rows:
    """The stored rows of one run (``Store.measurements``), with look-ups for claims, and
    the comparability fields of the run's environment (``rocm``, ``mps``, ``gpus``...:
    :mod:`benchbench.machine.environment`) for claims about a kind of machine."""

    rows: tuple[Row, ...] = field(default_factory=tuple)
    environment: Mapping[str, Any] = field(default_factory=dict)

    def find(self, workload: str, variant: str | None = None, **where: Any) -> list[Row]:
        """Rows of ``workload`` (and ``variant``) whose fields or params equal ``where``."""
        out = []
        for row in self.rows:
            if row["workload"] != workload or (variant is not None and row["variant"] != variant):
                continue
            params = row.get("params") or {}
            if all(_field(row, params, k) == v for k, v in where.items()):
                out.append(row)
        return out

    def one(self, workload: str, variant: str | None = None, **where: Any) -> Row | Finding:
        """The ok row at the largest size matching, or a Finding saying why there is none."""
        rows = self.find(workload, variant, **where)
        ok = [r for r in rows if r["status"] == "ok"]
        if ok:
            return max(ok, key=lambda r: r["size"])
        what = f"{workload}:{variant}" if variant else workload
        if rows:
            reasons = sorted({str(r.get("reason") or r["status"]) for r in rows})
            return Finding(UNMEASURABLE, reason=f"{what} {rows[0]['status']}: {'; '.join(reasons)}")
        cond = ", ".join(f"{k}={v}" for k, v in where.items())
        return Finding(
            NOT_MEASURED, reason=f"no stored point {what}" + (f" ({cond})" if cond else "")
        )


def _field(row: Row, params: Mapping[str, Any], key: str) -> Any:
    return row[key] if key in row else params.get(key)


def ratio_of_medians(slow: Row, fast: Row) -> tuple[float, tuple[float, float]]:
    """median(slow) / median(fast) of the rows' per-call samples, with its 95 % bootstrap
    interval (:func:`benchbench.analysis.verdict.estimate`)."""
    found = estimate(
        per_call(fast),
        per_call(slow),
        paired=False,
        base_processes=processes(fast),
        contender_processes=processes(slow),
    )
    return found.ratio, (found.ci_low, found.ci_high)


def instructions_ratio(slow: Row, fast: Row) -> float | None:
    """count(slow) / count(fast) of instructions per call, the ratio ``compare`` takes
    (:func:`benchbench.analysis.verdict.estimate_counts`); None unless both rows were
    counted with counts above 0."""
    slow_side, fast_side = instructions(slow), instructions(fast)
    if slow_side is None or fast_side is None or min(slow_side[0] + fast_side[0]) <= 0:
        return None
    return estimate_counts(fast_side[0], slow_side[0]).ratio


def faster(slow: Row, fast: Row) -> tuple[float, tuple[float, float], str]:
    """Whether ``fast`` is faster than ``slow``, from the interval of median(slow) /
    median(fast): ``holds`` when the whole interval is above 1, ``does not hold`` when it
    is below, ``inconclusive`` when it straddles 1."""
    ratio, ci = ratio_of_medians(slow, fast)
    return ratio, ci, band_verdict(ci, 1.0)


def above(ci: tuple[float, float], threshold: float) -> bool | None:
    """True when interval ``ci`` lies above ``threshold``, False when it does not reach
    it, None when it straddles it."""
    if ci[0] > threshold:
        return True
    if ci[1] <= threshold:
        return False
    return None


def all_of(parts: Iterable[bool | None]) -> str:
    """The verdict of a claim that holds when every part does: any part false does not
    hold, every part true holds, else (a part undecided) inconclusive."""
    seen = list(parts)
    if any(p is False for p in seen):
        return FAILS
    return HOLDS if all(p is True for p in seen) else INCONCLUSIVE


def band_verdict(ci: tuple[float, float], low: float, high: float = math.inf) -> str:
    """``holds`` if the interval lies in [low, high], ``does not hold`` if it lies outside."""
    lo, hi = ci
    if lo >= low and hi <= high:
        return HOLDS
    if hi < low or lo > high:
        return FAILS
    return INCONCLUSIVE


def _band_text(low: float, high: float) -> str:
    return f">= {low:g}x" if math.isinf(high) else f"{low:g}x to {high:g}x"


def speedup(
    workload: str,
    slow: str,
    fast: str,
    *,
    low: float,
    high: float = math.inf,
    **where: Any,
) -> Evaluate:
    """Claim "``fast`` is ``low``..``high`` times faster than ``slow``" on ``workload``."""

    def evaluate(rows: Rows) -> Finding:
        a = rows.one(workload, slow, **where)
        if isinstance(a, Finding):
            return a
        b = rows.one(workload, fast, **where, size=a["size"])
        if isinstance(b, Finding):
            return b
        ratio, ci = ratio_of_medians(a, b)
        shape = a.get("shape") or [a["size"]]
        figure = (
            f"{slow} / {fast} = {ratio:.3g}x (95% CI {ci[0]:.3g}-{ci[1]:.3g}) "
            f"at n={'x'.join(map(str, shape))}, {a['dtype']}, {a['device']}"
        )
        counted = instructions_ratio(a, b)
        if counted is not None:
            figure += f"; instructions {slow} / {fast} = {counted:.3g}x"
        verdict = band_verdict(ci, low, high)
        band = f"claim band {_band_text(low, high)}"
        return Finding(verdict, figure, ratio, ci, reason=band, instructions_ratio=counted)

    return evaluate


#: The folder beside a suite file that holds its claims file: ``suites/claims/precision.py``
#: declares the claims of ``suites/precision.py`` (module docstring).
CLAIMS_FOLDER = "claims"


def claims_file(suite_path: str | Path) -> Path:
    """Where the claims of the suite file at ``suite_path`` are declared, if it has any:
    the file of the same name in :data:`CLAIMS_FOLDER` beside it."""
    path = Path(suite_path)
    return path.parent / CLAIMS_FOLDER / path.name


def read_claims(suite_path: str | Path) -> list[Claim]:
    """The claims in the claims file of the suite at ``suite_path`` (:func:`claims_file`):
    its module-level ``claims``, a list of :class:`Claim`, read once per process.

    A suite file exposes them with ``suite.claims += read_claims(__file__)``, so the
    suite and :func:`claims_of` hold the same objects.
    """
    from benchbench.suite.load import execute_file

    path = claims_file(suite_path)
    if not path.is_file():
        raise SuiteError(
            f"suite {str(suite_path)!r}: its claims file {str(path)!r} does not exist; "
            "declare the claims there or in the suite file itself"
        )
    claims = getattr(execute_file(path, kind="claims"), "claims", None)
    if not isinstance(claims, list) or not all(isinstance(c, Claim) for c in claims):
        raise SuiteError(f"claims {str(path)!r}: define `claims`, a list of Claim, at module level")
    return list(claims)


def claims_of(paths: Iterable[Path]) -> list[Claim]:
    """Every claim of the suite files at ``paths``, ordered by section and id.

    A suite with a claims file (:func:`claims_file`; every built-in suite that has
    claims) is not loaded: its claims file is read, which imports no torch. A suite
    file without one that names this module declares its claims itself and is loaded
    (once per process). One that never names it declares no :class:`Claim` and is not
    loaded: the captured suites (``models``, ``zoo``) build and capture models at load
    (minutes the first time for ``zoo``), and ``zoo`` without its extra refuses to load.
    """
    from benchbench.suite.load import load_suite

    out: list[Claim] = []
    for path in paths:
        if claims_file(path).is_file():
            out.extend(read_claims(path))
        elif "analysis.claims" in Path(path).read_text(errors="replace"):
            out.extend(c for c in load_suite(path).claims if isinstance(c, Claim))
    return sorted(out, key=lambda c: (c.section, c.id))


def _timed(row: Row) -> bool:
    """False for an ok point with no time samples: counted (``--metric instructions``)
    and not timed, which claims do not read (module docstring)."""
    return row["status"] != "ok" or bool(row.get("samples_s"))


def evaluate(
    claims: Sequence[Claim], rows: Sequence[Row], environment: Mapping[str, Any] | None = None
) -> list[ClaimResult]:
    """Each claim's finding on a run's stored ``rows`` (measured in ``environment``, its
    comparability fields); pure, for tests and views."""
    results = []
    for claim in claims:
        suite = [r for r in rows if r["suite"] == claim.suite]
        mine = Rows(tuple(r for r in suite if _timed(r)), dict(environment or {}))
        hint = f"run `benchbench run {claim.suite} --tag {claim.tag}`"
        if not any(r["workload"] in claim.workloads for r in mine.rows) and any(
            r["workload"] in claim.workloads for r in suite if not _timed(r)
        ):
            finding = Finding(
                NOT_MEASURED,
                reason=f"this run counted {claim.suite}/{', '.join(claim.workloads)} and "
                f"did not time them (`--metric instructions`); claims read times: {hint}",
            )
        elif not any(r["workload"] in claim.workloads for r in mine.rows):
            where = "this run has no" + (" " if mine.rows else f" {claim.suite} ") + "points"
            finding = Finding(
                NOT_MEASURED,
                reason=f"{where} of {claim.suite}/{', '.join(claim.workloads)}: {hint}",
            )
        else:
            finding = claim.evaluate(mine)
            if finding.verdict == NOT_MEASURED:
                finding = Finding(NOT_MEASURED, reason=f"{finding.reason}: {hint}")
        results.append(ClaimResult(claim, finding))
    return results


def evaluate_claims(store: Store, run_id: str) -> list[ClaimResult]:
    """Findings of every built-in suite's claims on run ``run_id`` of ``store``, read from
    their claims files (:func:`claims_of`: no suite loaded, no torch imported)."""
    from benchbench.suite.load import builtin_suites

    run = store.resolve_run(run_id)
    env = store.environment(run["environment_id"]) if run.get("environment_id") else None
    fields = (env or {}).get("fields") or {}
    return evaluate(claims_of(builtin_suites().values()), store.measurements(run_id), fields)
