"""One-off comparisons of variants: statements, ratio of medians, verdicts, crossovers.

``benchbench time 'torch.rsqrt(x)' '1 / torch.sqrt(x)'`` and
:func:`benchbench.compare_variants` measure several variants of one computation at
each point (size x device x dtype) **interleaved** (one sample of each per round, in
a shuffled order), so drift on a shared machine hits them alike. This module holds
the pure logic both share, and the CLI's driver of worker processes; measuring
itself is in :mod:`benchbench.quick_compare` (it imports torch, which costs ~3 s, so
it runs in the worker and never in the CLI's own process).

The ratio of a variant to the reference at a point is ``median(variant) /
median(reference)`` of the per-call times (below 1: the variant is faster). Its 95 %
confidence interval is a percentile bootstrap; when both sides have one sample per
round (interleaved), rounds are resampled as pairs, so what drifted within a round
cancels in the ratio. The verdict, with ``min_effect`` m (default 5 %):

- ``faster``: the CI lies entirely below 1 and the ratio is below 1 / (1 + m);
- ``slower``: the CI lies entirely above 1 and the ratio is above 1 + m;
- ``same``: otherwise (the CI includes 1, or the difference is smaller than m).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import itertools
import math
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchbench import __version__
from benchbench.engine import Policy
from benchbench.environment import Environment
from benchbench.errors import BenchbenchError, MeasurementError, UsageError
from benchbench.model import Point, Result, short_hash
from benchbench.stats import CONFIDENCE, Stats
from benchbench.store import Store
from benchbench.store.store import now
from benchbench.vcs import git_state
from benchbench.worker import Spawner, Worker, WorkerFailure, Zygote, launcher

#: Smallest relative difference reported as faster or slower.
MIN_EFFECT = 0.05
#: Sampling cap per point of ``benchbench time``: 13 sizes x 2 statements answer in
#: <= 30 s with the worker's start (BENCHMARKS.md, "benchbench time (issue 8)").
DEFAULT_BUDGET_S = 0.5
#: Bootstrap resamples of a ratio's CI: 2000 puts the 2.5 % and 97.5 % percentiles
#: within ~0.3 % of their converged values for the sample counts a point yields.
BOOTSTRAP_RESAMPLES = 2000
#: Names bound at every point, before the setup runs.
POINT_NAMES = ("n", "device", "dtype", "torch", "np", "ctx")
#: The setup used when none is given (what the worker runs, in words).
DEFAULT_SETUP = "x, y = ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)"
DEFAULT_SETUP_NAMES = ("x", "y")
#: Exceptions that mean the statement itself is wrong, whatever the point.
STATEMENT_BUGS = ("NameError", "UnboundLocalError", "AttributeError", "ImportError")
#: benchmark.variant is a VARCHAR(255) in the store.
MAX_STATEMENT_CHARS = 255
VERDICTS = ("faster", "slower", "same")


# -- statements -----------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One variant given as a Python expression; ``index`` counts from 1."""

    index: int
    text: str

    @property
    def filename(self) -> str:
        return f"<statement {self.index}>"

    def describe(self) -> str:
        return f"statement {self.index} {self.text!r}"


def _syntax_message(exc: SyntaxError) -> str:
    where = f" at column {exc.offset}" if exc.offset else ""
    return f"syntax error{where}: {exc.msg}"


def parse_statements(texts: Sequence[str]) -> list[Statement]:
    """The statements, each compiled once in ``eval`` mode; UsageError names a bad one."""
    if not texts:
        raise UsageError("give at least one statement, e.g. 'torch.rsqrt(x)'")
    out: list[Statement] = []
    seen: dict[str, int] = {}
    for index, text in enumerate(texts, start=1):
        statement = Statement(index, text)
        if not text.strip():
            raise UsageError(f"statement {index} is empty; give a Python expression")
        try:
            compile(text, statement.filename, "eval")
        except SyntaxError as exc:
            hint = " (a statement is one expression, such as 'torch.sqrt(x)')"
            raise UsageError(f"{statement.describe()}: {_syntax_message(exc)}{hint}") from None
        if text in seen:
            raise UsageError(f"{statement.describe()} repeats statement {seen[text]}")
        if len(text) > MAX_STATEMENT_CHARS:
            raise UsageError(
                f"statement {index} has {len(text)} characters; at most "
                f"{MAX_STATEMENT_CHARS} are stored: move the long part into --setup"
            )
        seen[text] = index
        out.append(statement)
    return out


def setup_names(setup: str | None) -> set[str] | None:
    """Names the setup binds (``None``: unknown, after ``from m import *``)."""
    if setup is None:
        return set(DEFAULT_SETUP_NAMES)
    try:
        tree = ast.parse(setup, "<setup>", "exec")
    except SyntaxError as exc:
        raise UsageError(f"--setup {setup!r}: {_syntax_message(exc)}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.partition(".")[0])
    return names


def statement_names(text: str) -> set[str]:
    """Names a statement reads from its namespace (``torch``, ``x``, ...)."""
    return _free_names(ast.parse(text, "<statement>", "eval"))


def _free_names(tree: ast.AST) -> set[str]:
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return loaded - bound


def check_names(statements: Sequence[Statement], setup: str | None) -> None:
    """UsageError for a statement using a name neither the point nor the setup binds.

    Static (no torch needed): names bound inside the statement (lambda arguments,
    comprehension targets) count as bound; an attribute (``torch.rsqr``) is checked
    later, by evaluating every statement once before anything is measured.
    """
    bound = setup_names(setup)
    if bound is None:
        return
    known = bound | set(POINT_NAMES) | set(dir(builtins))
    for statement in statements:
        missing = sorted(_free_names(ast.parse(statement.text, statement.filename, "eval")) - known)
        if missing:
            defined = ", ".join(sorted(bound | set(POINT_NAMES)))
            raise UsageError(
                f"{statement.describe()}: name {missing[0]!r} is not defined "
                f"(defined: {defined}; bind more names with --setup)"
            )


def statement_function(statement: Statement, namespace: dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument function evaluating ``statement`` over ``namespace``.

    Compiled as ``lambda: (...)`` so that names are global look-ups (~0.2 µs a call
    here) rather than ``eval``'s name look-ups through locals (~0.4 µs).
    """
    code = compile(f"lambda: (\n{statement.text}\n)", statement.filename, "eval")
    fn: Callable[[], Any] = eval(code, namespace)
    return fn


# -- ratio, verdict, crossover ----------------------------------------------------------


@dataclass(frozen=True)
class RatioEstimate:
    """``median(variant) / median(reference)`` and its confidence interval."""

    ratio: float
    ci_low: float
    ci_high: float
    paired: bool


def ratio_of_medians(
    reference_s: Sequence[float],
    variant_s: Sequence[float],
    *,
    paired: bool | None = None,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> RatioEstimate:
    """Ratio of medians of per-call times with a percentile-bootstrap CI.

    ``paired`` (default: when both have as many samples, as interleaving gives)
    resamples rounds, keeping each round's two samples together; otherwise the two
    sides are resampled independently. Seeded: the same samples give the same CI.
    """
    ref = np.asarray(reference_s, dtype=np.float64)
    var = np.asarray(variant_s, dtype=np.float64)
    if ref.size < 2 or var.size < 2:
        raise ValueError(f"a ratio CI needs >= 2 samples a side, got {ref.size} and {var.size}")
    if paired is None:
        paired = ref.size == var.size
    if paired and ref.size != var.size:
        raise ValueError(f"paired samples need equal counts, got {ref.size} and {var.size}")
    rng = np.random.default_rng(seed)
    ref_idx = rng.integers(0, ref.size, size=(resamples, ref.size))
    var_idx = ref_idx if paired else rng.integers(0, var.size, size=(resamples, var.size))
    ratios = np.median(var[var_idx], axis=1) / np.median(ref[ref_idx], axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(ratios, [alpha / 2.0, 1.0 - alpha / 2.0])
    ratio = float(np.median(var) / np.median(ref))
    return RatioEstimate(ratio, min(float(low), ratio), max(float(high), ratio), paired)


def verdict(estimate: RatioEstimate, min_effect: float = MIN_EFFECT) -> str:
    """``faster``, ``slower`` or ``same`` (see the module docstring for the rule)."""
    if estimate.ci_high < 1.0 and estimate.ratio < 1.0 / (1.0 + min_effect):
        return "faster"
    if estimate.ci_low > 1.0 and estimate.ratio > 1.0 + min_effect:
        return "slower"
    return "same"


@dataclass(frozen=True)
class Crossover:
    """Where a variant's verdict against the reference flips from one size to a larger one."""

    variant: str
    reference: str
    device: str
    dtype: str
    size: float  # interpolated, in elements
    below: str  # verdict at the smaller sizes
    above: str  # verdict at the larger sizes
    between: tuple[int, int]  # the measured sizes with significant verdicts around it

    def describe(self) -> str:
        return (
            f"{self.variant!r} vs {self.reference!r} [{self.dtype}, {self.device}]: "
            f"{self.below} below ~{self.size:,.0f} elements (2^{math.log2(self.size):.1f}), "
            f"{self.above} above"
        )


def crossover_sizes(
    sizes: Sequence[int], ratios: Sequence[float], verdicts: Sequence[str]
) -> list[tuple[float, str, str, tuple[int, int]]]:
    """Sizes where the ratio crosses 1 with significance on both sides.

    Between two sizes with opposite significant verdicts (faster then slower, or the
    reverse; ``same`` sizes between them are passed over), the crossing is where
    log(ratio) changes sign, interpolated linearly in log(size) between the two
    adjacent sizes around it. Returns (size, verdict below, verdict above, (size of
    the last significant verdict below, of the first above)).
    """
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    xs = [math.log(sizes[i]) for i in order]
    ys = [math.log(ratios[i]) for i in order]
    vs = [verdicts[i] for i in order]
    significant = [k for k, v in enumerate(vs) if v in ("faster", "slower")]
    out: list[tuple[float, str, str, tuple[int, int]]] = []
    for a, b in itertools.pairwise(significant):
        if vs[a] == vs[b]:
            continue
        for k in range(a, b):
            if ys[k] == 0.0 or (ys[k] < 0.0) != (ys[k + 1] < 0.0):
                t = ys[k] / (ys[k] - ys[k + 1]) if ys[k] != ys[k + 1] else 0.0
                size = math.exp(xs[k] + t * (xs[k + 1] - xs[k]))
                out.append((size, vs[a], vs[b], (sizes[order[a]], sizes[order[b]])))
                break
    return out


# -- result rows ----------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One variant at one point, with its ratio to the reference (the table's row)."""

    device: str
    dtype: str
    size: int
    variant: str
    reference: str
    status: str
    reason: str | None = None
    median_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    n: int | None = None
    items_per_s: float | None = None
    ratio: float | None = None
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    verdict: str | None = None  # faster / slower / same; "reference" on the reference
    max_rel_error: float | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Row:
        """From a dict or a DataFrame record (NaN read as missing)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if isinstance(value, float) and math.isnan(value):
                value = None
            values[f.name] = value
        values["warnings"] = tuple(values["warnings"] or ())
        values["size"] = int(values["size"])
        if values["n"] is not None:
            values["n"] = int(values["n"])
        return cls(**values)


def _per_call(result: Result) -> list[float]:
    return [s / result.calls_per_sample for s in result.samples_s]


def rows_from_results(
    results: Iterable[Result], reference: str, min_effect: float = MIN_EFFECT
) -> list[Row]:
    """Rows in the order of ``results``; ratios against the ``reference`` variant's result
    at the same (device, dtype, size)."""
    results = list(results)
    refs = {
        (r.point.device, r.point.dtype, r.point.size): r
        for r in results
        if r.point.variant == reference and r.status == "ok" and len(r.samples_s) >= 2
    }
    rows: list[Row] = []
    for result in results:
        p = result.point
        base: dict[str, Any] = {
            "device": p.device,
            "dtype": p.dtype,
            "size": p.size,
            "variant": p.variant,
            "reference": reference,
            "status": result.status,
            "reason": result.reason,
            "max_rel_error": result.max_rel_error,
            "warnings": tuple(result.warnings),
        }
        if result.status != "ok" or not result.samples_s:
            rows.append(Row(**base))
            continue
        stats = Stats.from_samples(result.samples_s, result.calls_per_sample)
        base.update(
            median_s=stats.median_s,
            ci_low_s=stats.ci_low_s,
            ci_high_s=stats.ci_high_s,
            q1_s=stats.q1_s,
            q3_s=stats.q3_s,
            n=stats.n,
            items_per_s=p.size / stats.median_s if stats.median_s > 0 else None,
        )
        ref = refs.get((p.device, p.dtype, p.size))
        if p.variant == reference:
            base.update(ratio=1.0, verdict="reference")
        elif ref is not None and len(result.samples_s) >= 2:
            estimate = ratio_of_medians(_per_call(ref), _per_call(result))
            base.update(
                ratio=estimate.ratio,
                ratio_ci_low=estimate.ci_low,
                ratio_ci_high=estimate.ci_high,
                verdict=verdict(estimate, min_effect),
            )
        rows.append(Row(**base))
    return rows


def find_crossovers(rows: Iterable[Row]) -> list[Crossover]:
    """Every crossover of every variant against the reference, per device and dtype."""
    series: dict[tuple[str, str, str, str], list[Row]] = {}
    for row in rows:
        if row.ratio is not None and row.verdict in VERDICTS and row.ratio > 0:
            key = (row.variant, row.reference, row.device, row.dtype)
            series.setdefault(key, []).append(row)
    out: list[Crossover] = []
    for (variant, reference, device, dtype), group in series.items():
        found = crossover_sizes(
            [r.size for r in group],
            [r.ratio for r in group if r.ratio is not None],
            [r.verdict or "same" for r in group],
        )
        for size, below, above, between in found:
            out.append(Crossover(variant, reference, device, dtype, size, below, above, between))
    return out


def plot_rows(rows: Sequence[Row], title: str | None = None) -> Any:
    """Throughput (elements/s) versus size, log-log: one line per variant, device and
    dtype, with a band from the Q1 to the Q3 time. Returns a matplotlib Figure."""
    # Imported here: matplotlib costs ~0.3 s, paid only when a picture is asked for.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.subplots()
    lines: dict[tuple[str, str, str], list[Row]] = {}
    for row in rows:
        if row.status == "ok" and row.median_s and row.q1_s and row.q3_s:
            lines.setdefault((row.variant, row.device, row.dtype), []).append(row)
    several = len({(d, t) for _, d, t in lines}) > 1
    for (variant, device, dtype), group in lines.items():
        group = sorted(group, key=lambda r: r.size)
        sizes = [r.size for r in group]
        label = f"{variant} [{dtype}, {device}]" if several else variant
        rates = [r.size / (r.median_s or 1) for r in group]
        (line,) = ax.plot(sizes, rates, marker="o", label=label)
        ax.fill_between(
            sizes,
            [r.size / (r.q3_s or 1) for r in group],
            [r.size / (r.q1_s or 1) for r in group],
            color=line.get_color(),
            alpha=0.2,
            linewidth=0,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (elements)")
    ax.set_ylabel("throughput (elements/s; band: Q1-Q3)")
    if title:
        ax.set_title(title)
    if lines:
        ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return figure


# -- the CLI's driver: one worker process, one request per point ------------------------


@dataclass(frozen=True)
class TimeConfig:
    """What ``benchbench time`` measures; ``reference`` is a 0-based statement index."""

    statements: tuple[str, ...]
    sizes: tuple[int, ...]
    setup: str | None = None
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float32",)
    reference: int = 0
    policy: Policy = field(default_factory=Policy)
    min_effect: float = MIN_EFFECT
    label: str | None = None
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 <= self.reference < len(self.statements):
            raise UsageError(
                f"--reference {self.reference + 1} is not a statement number; "
                f"give 1 to {len(self.statements)}"
            )
        if not self.sizes:
            raise UsageError("--size holds no size")

    @property
    def reference_text(self) -> str:
        return self.statements[self.reference]

    def point(self, size: int, device: str, dtype: str, variant: str = "") -> Point:
        """The stored point of one statement; the setup is a parameter (it splits history)."""
        return Point(
            suite="time",
            workload="time",
            variant=variant,
            size=size,
            shape=(size,),
            dtype=dtype,
            device=device,
            params=(("setup", self.setup or DEFAULT_SETUP),),
        )

    def request(self, point: Point, check_only: bool = False) -> dict[str, Any]:
        """The worker's ``time`` request for one point."""
        return {
            "op": "time",
            "statements": list(self.statements),
            "setup": self.setup,
            "point": point.to_dict(),
            "reference": self.reference,
            "policy": dataclasses.asdict(self.policy),
            "check_only": check_only,
        }

    def default_label(self) -> str:
        return (self.label or "time: " + " vs ".join(self.statements))[:255]


@dataclass
class TimeOutcome:
    """What a ``time`` run produced; ``run_id`` is None when nothing was stored."""

    run_id: str | None
    results: list[Result]
    rows: list[Row]
    crossovers: list[Crossover]


ProgressFn = Callable[[str, dict[str, Any]], None]


def _statement_bug(config: TimeConfig, checked: Sequence[Result]) -> UsageError | None:
    for index, result in enumerate(checked):
        failure = result.extra.get("failure") if result.extra else None
        if result.status == "error" and failure in STATEMENT_BUGS:
            if result.extra.get("in") == "setup":
                return UsageError(f"--setup failed: {result.reason}; nothing was measured")
            statement = Statement(index + 1, config.statements[index])
            return UsageError(f"{statement.describe()}: {result.reason}; nothing was measured")
    return None


def time_statements(
    config: TimeConfig, store: Store | None, progress: ProgressFn | None = None
) -> TimeOutcome:
    """Check the statements, then measure every point in a worker process.

    Every statement is evaluated once at the first point before anything is timed:
    a name or attribute error there is a :class:`UsageError` naming the statement.
    A worker that crashes or hangs costs that point (every statement of it is
    recorded as an error) and a fresh worker takes the rest. With a ``store``, the
    results are written as an ``adhoc`` run of suite ``time`` as they come.
    """
    notify = progress or (lambda _e, _d: None)
    statements = parse_statements(config.statements)
    check_names(statements, config.setup)
    points = [
        config.point(size, device, dtype)
        for device in config.devices
        for dtype in config.dtypes
        for size in sorted(config.sizes)
    ]
    worker: Worker | None = None
    run_id: str | None = None
    status = "interrupted"
    results: list[Result] = []
    workers = launcher()
    try:
        worker = _start_worker(workers)
        try:
            checked = worker.request(
                config.request(points[0], check_only=True), ("timed",), config.timeout_s
            )
        except WorkerFailure:
            # A statement that crashes the process costs each point it crashes, like
            # any point of a run: the points below record it.
            worker.close()
            worker = None
        else:
            bug = _statement_bug(config, [Result.from_dict(r) for r in checked["results"]])
            if bug is not None:
                raise bug
        if store is not None:
            worker = worker or _start_worker(workers)
            run_id = _create_run(config, store, worker)
        notify("start", {"total": len(points), "run_id": run_id})
        for index, point in enumerate(points):
            label = f"{point.dtype}, {point.device}, n={point.size}"
            notify("point", {"index": index, "label": label})
            # A replacement is forked only when a point needs it.
            worker = worker or _start_worker(workers)
            try:
                message = worker.request(config.request(point), ("timed",), config.timeout_s)
                measured = [Result.from_dict(r) for r in message["results"]]
            except WorkerFailure as failure:
                measured = [
                    Result(point=replace(point, variant=s), status="error", reason=str(failure))
                    for s in config.statements
                ]
                worker.close()
                worker = None
            for result in measured:
                if store is not None and run_id is not None:
                    store.write_result(run_id, result)
            results.extend(measured)
            notify("result", {"index": index, "results": measured})
        status = "finished"
    finally:
        if worker is not None:
            worker.close()
        workers.close()
        if store is not None and run_id is not None:
            with contextlib.suppress(BenchbenchError):
                store.update_run(run_id, status=status, finished_at=now())
    rows = rows_from_results(results, config.reference_text, config.min_effect)
    return TimeOutcome(run_id, results, rows, find_crossovers(rows))


def _start_worker(workers: Zygote | Spawner) -> Worker:
    try:
        return workers.worker()
    except WorkerFailure as failure:
        raise MeasurementError(f"the worker process did not start: {failure}") from None


def _create_run(config: TimeConfig, store: Store, worker: Worker) -> str:
    message = worker.request({"op": "environment", "threads": None}, ("environment",), 120.0)
    env = Environment(fields=message["fields"], info=message["info"])
    store.save_environment(env)
    run_id = str(uuid.uuid4())
    git = git_state(Path.cwd())
    store.create_run(
        {
            "id": run_id,
            "group_id": run_id,
            "kind": "adhoc",
            "label": config.default_label(),
            "status": "running",
            "started_at": now(),
            "finished_at": None,
            "suites": [
                {
                    "name": "time",
                    "path": None,
                    "hash": short_hash([config.statements, config.setup]),
                }
            ],
            "harness_version": __version__,
            "git_sha": git.sha,
            "git_branch": git.branch,
            "git_dirty": git.dirty,
            "tags": [],
            "config": {
                "statements": list(config.statements),
                "setup": config.setup or DEFAULT_SETUP,
                "reference": config.reference_text,
                "sizes": list(config.sizes),
                "devices": list(config.devices),
                "dtypes": list(config.dtypes),
                "policy": dataclasses.asdict(config.policy),
                "min_effect": config.min_effect,
            },
            "environment_id": env.id,
        }
    )
    return run_id
