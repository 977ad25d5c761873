"""pytest plugin: measure a callable with benchbench's engine inside a test.

Loaded through the ``pytest11`` entry point when benchbench is installed (or with
``-p benchbench.pytest_plugin``). The ``bench`` fixture::

    def test_sqrt_is_fast(bench):
        x = torch.rand(1 << 20)
        r = bench(torch.sqrt, x)
        assert r.median_s < 5e-3

measures ``torch.sqrt(x)`` through the same steps as ``benchbench run``
(:mod:`benchbench.measure.pipeline`): the clock of the device the inputs live on
(host clock on the CPU, CUDA events with one sync per 10 rounds, MPS sync), warm-up,
calibration to >= 1 ms samples and adaptive stopping on the median's confidence
interval. It runs in the test's own process (no worker
isolation: a crash fails the test run, as any crash in a test does).

Options:

- ``--benchbench-store URL`` records every measured call into that store, as one
  run per pytest session (kind ``ci``, suite ``pytest``, workload
  ``module::test[param]``, variant = the callable's name or ``name=``).
- ``--benchbench-baseline RUN`` compares each call with the same benchmark in
  stored run RUN (store from ``--benchbench-store``, else the default store) and
  puts a verdict on the result: ``r.verdict.status`` is ``faster``, ``slower``,
  ``same``, ``not significant`` or ``new``, by the verdict ``benchbench compare``
  gives (:mod:`benchbench.analysis.verdict`: ratio of medians beyond a 5 % minimum
  effect, significant at 5 %).
- ``--benchbench-budget SECONDS`` caps the sampling time per call (default 0.5).

Importing this module imports neither torch nor the store: the plugin costs
nothing in a pytest session that does not use the fixture.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from benchbench.core.defaults import MIN_EFFECT
from benchbench.core.errors import UsageError

if TYPE_CHECKING:  # imported when used: the engine pulls in scipy (~1 s)
    from benchbench.core.stats import Stats
    from benchbench.core.values import Point
    from benchbench.measure.policy import Policy


@dataclass(frozen=True)
class Verdict:
    """How a measurement compares with the same benchmark in a baseline run."""

    status: str  # "faster" | "slower" | "same" | "not significant" | "new"
    baseline_run: str
    ratio: float | None = None  # median now / median in the baseline
    p_value: float | None = None


@dataclass(frozen=True)
class BenchResult:
    """One measured callable: raw samples and the statistics derived from them."""

    name: str
    device: str
    samples_s: tuple[float, ...]
    calls_per_sample: int
    converged: bool
    stop_reason: str
    warnings: tuple[str, ...] = ()
    verdict: Verdict | None = None
    benchmark_id: str = ""

    @cached_property
    def stats(self) -> Stats:
        """Per-call statistics (median, CI, quartiles, ...)."""
        from benchbench.core.stats import Stats

        return Stats.from_samples(self.samples_s, self.calls_per_sample)

    @property
    def median_s(self) -> float:
        return self.stats.median_s

    @property
    def ci_low_s(self) -> float:
        return self.stats.ci_low_s

    @property
    def ci_high_s(self) -> float:
        return self.stats.ci_high_s

    @property
    def mean_s(self) -> float:
        return self.stats.mean_s

    @property
    def min_s(self) -> float:
        return self.stats.min_s


def verdict_for(
    now: Stats, baseline: Stats | None, baseline_run: str, min_effect: float = MIN_EFFECT
) -> Verdict:
    """benchbench's one verdict (:mod:`benchbench.analysis.verdict`) on per-call times:
    ``slower``, ``faster``, ``same`` or ``not significant`` (the words of ``compare``);
    ``new`` without a baseline."""
    if baseline is None:
        return Verdict("new", baseline_run)
    # Imported here: the verdict loads numpy, and this plugin is loaded by every pytest
    # session that has benchbench installed.
    from benchbench.analysis.verdict import estimate_stats, mark

    found = estimate_stats(baseline, now, paired=False)
    return Verdict(mark(found, min_effect), baseline_run, found.ratio, found.p_value)


@dataclass
class _Session:
    """What the plugin keeps for one pytest session: options, store, run, results."""

    store_url: str | None
    baseline_ref: str | None
    budget_s: float | None
    rootdir: Path
    run_id: str | None = None
    baseline_run_id: str | None = None
    results: list[tuple[str, BenchResult]] = field(default_factory=list)

    @cached_property
    def store(self) -> Any:
        from benchbench.store import open_store

        return open_store(self.store_url)

    def baseline(self, benchmark_id: str) -> Stats | None:
        from benchbench.core.stats import Stats

        if self.baseline_run_id is None:
            self.baseline_run_id = self.store.resolve_run(self.baseline_ref)["id"]
        for row in self.store.measurements(self.baseline_run_id):
            if row["benchmark_id"] == benchmark_id and row["status"] == "ok":
                return Stats.from_samples(
                    row["samples_s"], row["calls_per_sample"], row.get("process_samples") or ()
                )
        return None

    def record(self, torch: Any, result: Any) -> None:
        from benchbench.machine import environment
        from benchbench.run.jobs import run_row

        if self.run_id is None:
            env = environment.collect(torch)
            self.store.save_environment(env)
            self.run_id = str(uuid.uuid4())
            self.store.create_run(
                run_row(
                    self.run_id,
                    env,
                    kind="ci",
                    label=None,
                    suites=[{"name": "pytest", "path": str(self.rootdir), "hash": None}],
                    config={"pytest_plugin": True, "budget_s": self.budget_s},
                    tags=["pytest"],
                    repo=self.rootdir,
                )
            )
        self.store.write_result(self.run_id, result)

    def finish(self) -> None:
        if self.run_id is not None:
            from benchbench.store.store import now

            self.store.update_run(self.run_id, status="finished", finished_at=now())


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchbench", "benchbench measurements (the `bench` fixture)")
    group.addoption(
        "--benchbench-store",
        metavar="URL",
        help="record every `bench` measurement into this store (SQLite path or URL)",
    )
    group.addoption(
        "--benchbench-baseline",
        metavar="RUN",
        help="compare each `bench` measurement with stored run RUN (id, prefix, label, latest)",
    )
    group.addoption(
        "--benchbench-budget",
        type=float,
        metavar="SECONDS",
        help="sampling time cap per measured call (default: as `benchbench run --budget`)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SESSION] = _Session(
        store_url=config.getoption("benchbench_store"),
        baseline_ref=config.getoption("benchbench_baseline"),
        budget_s=config.getoption("benchbench_budget"),
        rootdir=Path(str(config.rootpath)),
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_SESSION, None)
    if state is not None:
        state.finish()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_SESSION, None)
    if state is None or not state.results:
        return
    terminalreporter.section("benchbench")
    for test_id, r in state.results:
        verdict = ""
        if r.verdict is not None and r.verdict.ratio is not None:
            verdict = f"  {r.verdict.status} ({r.verdict.ratio:.3f}x baseline)"
        elif r.verdict is not None:
            verdict = f"  {r.verdict.status}"
        terminalreporter.write_line(
            f"{test_id} {r.name}: median {r.median_s * 1e6:.4g} us "
            f"[{r.ci_low_s * 1e6:.4g}, {r.ci_high_s * 1e6:.4g}] n={r.stats.n}{verdict}"
        )
    if state.run_id is not None:
        terminalreporter.write_line(f"recorded as run {state.run_id} in {state.store.url}")


class Bench:
    """The ``bench`` fixture's value: call it with a callable and its arguments."""

    def __init__(self, test_id: str, state: _Session) -> None:
        self._test_id = test_id
        self._state = state

    def __call__(
        self,
        fn: Callable[..., object],
        *args: object,
        name: str | None = None,
        device: str | None = None,
        policy: Policy | None = None,
    ) -> BenchResult:
        """Measure ``fn(*args)``; ``device`` defaults to where the first tensor lives."""
        if not callable(fn):
            raise UsageError(f"bench() needs a callable first, got {fn!r}")
        import torch

        from benchbench.core.values import DEFAULT_OUTPUTS
        from benchbench.measure import timers as devices
        from benchbench.measure.loops import make_loop
        from benchbench.measure.pipeline import ok_result, time_subjects
        from benchbench.measure.policy import Policy, Subject

        where = device or devices.device_of(args, torch)
        if policy is None:
            budget = self._state.budget_s
            policy = Policy(max_time_s=budget) if budget is not None else Policy()
        label = name or getattr(fn, "__name__", None) or repr(fn)
        point = self._point(torch, label, where, args)
        used, (measured,) = time_subjects(point, [Subject(label, make_loop(fn, args))], policy)
        stored = ok_result(point, measured, used, extra={"outputs": DEFAULT_OUTPUTS})
        result = BenchResult(
            name=label,
            device=where,
            samples_s=stored.samples_s,
            calls_per_sample=stored.calls_per_sample,
            converged=bool(stored.converged),
            stop_reason=stored.stop_reason or "",
            warnings=stored.warnings,
        )
        benchmark_id = stored.point.benchmark_id(stored.code_version)
        verdict = None
        if self._state.baseline_ref is not None:
            verdict = verdict_for(
                result.stats, self._state.baseline(benchmark_id), self._state.baseline_ref
            )
        result = dataclasses.replace(result, verdict=verdict, benchmark_id=benchmark_id)
        if self._state.store_url is not None:
            self._state.record(torch, stored)
        self._state.results.append((self._test_id, result))
        return result

    def _point(self, torch: Any, label: str, device: str, args: tuple[object, ...]) -> Point:
        """The stored point: suite ``pytest``, this test, the first tensor's shape and dtype."""
        from benchbench.core.values import Point

        tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
        shape = tuple(tensor.shape) if tensor is not None and tensor.dim() > 0 else (1,)
        dtype = str(tensor.dtype).removeprefix("torch.") if tensor is not None else "float32"
        return Point(
            suite="pytest",
            workload=self._test_id[:255],
            variant=label[:255],
            size=int(tensor.numel()) if tensor is not None else 1,
            shape=shape,
            dtype=dtype,
            device=device,
        )


@pytest.fixture
def bench(request: pytest.FixtureRequest) -> Iterator[Bench]:
    """Measure a callable with benchbench's engine: ``r = bench(fn, *args)``."""
    yield Bench(workload_name(request.node), request.config.stash[_SESSION])


def workload_name(node: pytest.Item) -> str:
    """``module::Class::test[param]``: the benchmark's workload name.

    Not the node id: that is relative to pytest's rootdir, which moves with the
    arguments (an existing ``--benchbench-store`` file is one), and a moved id would
    start a new history.
    """
    module = getattr(getattr(node, "module", None), "__name__", None)
    _file, _, rest = node.nodeid.partition("::")
    return f"{module}::{rest}" if module and rest else node.nodeid
