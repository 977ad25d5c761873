"""Declaring work: suites, workloads, variants and their axes.

A suite is a Python file holding one :class:`Suite`. Each :class:`Workload` has axes
(size, dtype, device, named parameters) whose cartesian product, minus exclusions,
times its variants, gives the :class:`~benchbench.core.values.Point` s to measure::

    suite = Suite("mine")
    suite.workload(
        "sqrt",
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant("torch.sqrt", torch.sqrt)],
        sizes=pow2(10, 20, step=2),
        bytes=lambda p: 2 * p.numel * p.itemsize,
    )

Suites are code and are trusted; this module validates their declarations and
names the file and line of a bad one.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchbench.core.errors import SuiteError
from benchbench.core.values import (
    CACHE_MODES,
    DEFAULT_MODES,
    DEFAULT_OUTPUTS,
    ITEMSIZE,
    OUTPUT_MODES,
    TRAFFIC,
    Point,
)
from benchbench.suite.checks import (
    Size,
    ToleranceSpec,
    check_modes,
    check_size,
    check_tolerance,
    check_x,
    frozen,
)

if TYPE_CHECKING:
    from benchbench.suite.inputs import SetupContext

SetupFn = Callable[["SetupContext"], Any]
WorkFn = Callable[[Point], float]

_DEVICE = re.compile(r"^(cpu|cuda|mps)(:\d+)?$")
_NAME = re.compile(r"^[^\s\[\]():,/]+( [^\s\[\]():,/]+)*$")
_VARIANT = re.compile(r"^\S(.*\S)?$")

#: Reference-check modes: ``True`` enforce the tolerance, ``False`` skip the check,
#: ``"record"`` compare and store the accuracy without rejecting the point (for a
#: variant whose departure from the reference is the thing being measured, e.g. a
#: naive softmax that overflows to NaN, or float16 inputs below its smallest subnormal).
CHECK_MODES = (True, False, "record")


class Skip(Exception):
    """Raised by a workload's ``setup`` (or a variant) when the point cannot run here.

    The point is stored as skipped with the message as its reason, e.g.
    ``raise Skip("nccl with 2 ranks needs 2 GPUs; this machine has 1")``.
    """


def pow2(low: int, high: int, step: int = 1) -> list[int]:
    """Powers of two from 2**low to 2**high inclusive: ``pow2(10, 22, 2)`` = 2^10, 2^12, ..."""
    if low < 0 or high < low or step < 1:
        raise SuiteError(f"pow2({low}, {high}, {step}): need 0 <= low <= high and step >= 1")
    return [2**e for e in range(low, high + 1, step)]


def geometric(start: int, stop: int, count: int) -> list[int]:
    """``count`` integers spaced evenly on a log scale from ``start`` to ``stop``."""
    if start < 1 or stop < start or count < 2:
        raise SuiteError(
            f"geometric({start}, {stop}, {count}): need 1 <= start <= stop and count >= 2"
        )
    ratio = (stop / start) ** (1.0 / (count - 1))
    return sorted({round(start * ratio**i) for i in range(count)})


def _caller_location(depth: int = 2) -> str:
    """'suite 'path', line N' of the declaration, for error messages."""
    frame = sys._getframe(depth)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return f"suite {frame.f_code.co_filename!r}, line {frame.f_lineno}"


@dataclass(frozen=True)
class Variant:
    """A named implementation of a workload's computation, called as ``fn(*inputs)``.

    - ``inplace``: ``fn`` overwrites its input(s). Every timed call gets inputs freshly
      restored from pristine copies, restored outside the timed region (see
      :mod:`benchbench.measure.inplace`; the method is recorded in ``extra.inplace``).
    - ``numpy``: ``fn`` takes NumPy arrays (converted outside the timed region); CPU only.
    - ``compile``: ``fn`` is wrapped in ``torch.compile``; compile time is recorded
      with the warm-up, never in the samples.
    - ``devices`` / ``dtypes``: restrict where the variant applies (others are skipped).
    - ``check``: overrides the workload's reference-check mode for this variant
      (``"record"``: accuracy stored, never rejected; see :data:`CHECK_MODES`).
    - ``outputs``: overrides the workload's output lifetime for this variant
      (``"keep"`` or ``"drop"``; see :data:`~benchbench.core.values.OUTPUT_MODES`).
    - ``cuda_graph``: on CUDA, time replays of a CUDA graph of K captured calls
      (launch overhead excluded; :mod:`benchbench.measure.cuda_graph`); ignored
      with a note on other devices. ``run --cuda-graph`` sets it for every variant.
    - ``rtol`` / ``atol``: the reference check's tolerance for this variant, a number
      or a number per dtype name (``{"bfloat16": 2e-2}``); it wins over the
      workload's, which wins over the dtype's default.
    - ``traffic``: what the work model's bytes are, for the ceiling a result is held to
      (stored as ``extra.traffic``): ``"update"`` when the call reads and writes back the
      same bytes (``torch.add(x, y, out=x)``), ``"copy"`` when it does not. None (the
      default): an ``inplace`` variant is an update, any other a copy. See
      :data:`~benchbench.core.values.TRAFFIC` and :mod:`benchbench.analysis.roofline`.
    """

    name: str
    fn: Callable[..., Any]
    inplace: bool = False
    numpy: bool = False
    compile: bool = False
    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    description: str = ""
    check: bool | str | None = None
    outputs: str | None = None
    cuda_graph: bool = False
    traffic: str | None = None
    # Out of the hash: a dict by dtype is not hashable, and the name identifies a variant.
    rtol: ToleranceSpec = field(default=None, hash=False)
    atol: ToleranceSpec = field(default=None, hash=False)


@dataclass(frozen=True)
class Workload:
    """One computation with its axes, variants, work model and reference.

    Build through :meth:`Suite.workload`, which validates every field.
    """

    suite: str
    name: str
    setup: SetupFn
    variants: tuple[Variant, ...]
    sizes: tuple[Size, ...]
    dtypes: tuple[str, ...] = ("float32",)
    devices: tuple[str, ...] = ("cpu",)
    params: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    bytes: WorkFn | None = None
    flops: WorkFn | None = None
    items: WorkFn | None = None
    reference: Callable[..., Any] | None = None
    rtol: ToleranceSpec = None
    atol: ToleranceSpec = None
    reduction_size: WorkFn | None = None
    check: bool | str = True
    tags: tuple[str, ...] = ()
    exclude: Callable[[Point], str | None] | None = None
    budget_s: float | None = None
    cache: str | None = None
    outputs: str = DEFAULT_OUTPUTS
    version: int = 1
    description: str = ""
    location: str = ""
    teardown: Callable[..., Any] | None = None
    x: str | int | None = None
    modes: tuple[str, ...] = DEFAULT_MODES
    derive: bool = True

    @property
    def mode_axis(self) -> bool:
        """True when points carry a ``mode`` parameter (``modes`` other than fwd only)."""
        return self.modes != DEFAULT_MODES

    def x_of(self, point: Point) -> tuple[str, float] | None:
        """The declared x-axis of ``point`` as ``(name, value)``: the parameter named by
        ``x``, or dimension ``x`` of the shape (named ``dim<x>``); None when undeclared."""
        if self.x is None:
            return None
        if isinstance(self.x, int):
            return f"dim{self.x}", float(point.shape[self.x])
        return self.x, float(point[self.x])

    def check_mode(self, variant: Variant) -> bool | str:
        """The reference-check mode of ``variant``: its own, else the workload's."""
        return self.check if variant.check is None else variant.check

    def outputs_mode(self, variant: Variant, override: str | None = None) -> str:
        """Output lifetime of ``variant``: ``override`` (``run --outputs``), else the
        variant's own, else the workload's."""
        return override or variant.outputs or self.outputs

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        known = ", ".join(v.name for v in self.variants)
        raise SuiteError(f"workload {self.name!r} has no variant {name!r}; it has: {known}")

    def points(
        self, *, devices: Sequence[str] | None = None, dtypes: Sequence[str] | None = None
    ) -> list[Point]:
        """Every point of this workload; ``devices``/``dtypes`` replace those axes."""
        axes = [*self.params, ("mode", self.modes)] if self.mode_axis else list(self.params)
        names = [k for k, _ in axes]
        grids = [vals for _, vals in axes]
        out: list[Point] = []
        for size, dtype, device, combo, variant in itertools.product(
            self.sizes,
            dtypes or self.dtypes,
            devices or self.devices,
            itertools.product(*grids),
            self.variants,
        ):
            shape = (size,) if isinstance(size, int) else tuple(size)
            out.append(
                Point(
                    suite=self.suite,
                    workload=self.name,
                    variant=variant.name,
                    size=math.prod(shape),
                    shape=shape,
                    dtype=dtype,
                    device=device,
                    params=tuple(zip(names, combo, strict=True)),
                )
            )
        if self.exclude is not None:
            out = [p for p in out if not self.exclude(p)]
        return out


class Suite:
    """A named collection of workloads; a suite file holds one, named ``suite``."""

    def __init__(self, name: str, *, description: str = "", tags: Iterable[str] = ()) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise SuiteError(
                f"{_caller_location()}: suite name must be a non-empty word, got {name!r}"
            )
        self.name = name
        self.description = description
        self.tags = tuple(tags)
        self.workloads: list[Workload] = []
        self._names: set[str] = set()
        self.path: str | None = None
        #: Published claims this suite's measurements answer
        #: (:class:`benchbench.analysis.claims.Claim`); a built-in suite declares them in
        #: its claims file and adds them here (``read_claims(__file__)``).
        self.claims: list[Any] = []

    def __repr__(self) -> str:
        return f"Suite({self.name!r}, {len(self.workloads)} workloads)"

    def workload(
        self,
        name: str,
        *,
        setup: SetupFn,
        variants: Sequence[Variant],
        sizes: Sequence[Size],
        dtypes: Sequence[str] = ("float32",),
        devices: Sequence[str] = ("cpu",),
        params: Mapping[str, Sequence[Any]] | None = None,
        bytes: WorkFn | None = None,
        flops: WorkFn | None = None,
        items: WorkFn | None = None,
        reference: Callable[..., Any] | None = None,
        rtol: ToleranceSpec = None,
        atol: ToleranceSpec = None,
        reduction_size: WorkFn | None = None,
        check: bool | str = True,
        teardown: Callable[..., Any] | None = None,
        tags: Iterable[str] = (),
        exclude: Callable[[Point], str | None] | None = None,
        budget_s: float | None = None,
        cache: str | None = None,
        outputs: str = DEFAULT_OUTPUTS,
        version: int = 1,
        description: str = "",
        x: str | int | None = None,
        modes: Sequence[str] = DEFAULT_MODES,
        derive: bool = True,
    ) -> Workload:
        """Declare a workload (validated here; the error names the file and line).

        ``setup(ctx)`` returns the inputs (a tensor or a tuple) built from ``ctx``'s
        seeded generator on ``ctx.device``; it is never timed. ``bytes``, ``flops`` and
        ``items`` give the work per call as functions of the point. ``reference`` is
        called with the inputs in float64 on the CPU; by default it is the first
        variant. The check passes where ``|actual - expected| <= atol + rtol *
        |expected|`` elementwise; ``rtol`` / ``atol`` (a number, or a number per dtype
        name) replace the dtype's default (a variant's own win over these).
        ``reduction_size(point)`` is the number of terms summed into each output
        element (a matmul's inner dimension): the default tolerances grow by its
        square root. ``check`` is one of :data:`CHECK_MODES`. ``teardown(*inputs)``, if given, runs
        after the point (measured or failed) to release what ``setup`` acquired
        (helper processes, global flags). ``outputs`` is the output lifetime in the
        timed loop: ``"keep"`` (default; the previous output alive until the next call
        returns, as in model code) or ``"drop"``; ``run --outputs`` overrides it.
        ``x`` is the x-axis that fits, crossovers and plots use when the size (elements)
        is a product of several varying dimensions: the name of a numeric parameter
        (``x="k"``) or the index of a shape dimension (``x=1`` for ``k`` in ``(m, k, n)``).
        ``modes`` (some of :data:`~benchbench.core.values.MODES`) adds backward passes:
        each point then gets a parameter ``mode`` (``fwd``, ``bwd`` or ``fwd_bwd``; work
        models read it as ``p["mode"]``); the default, forward only, adds nothing.
        Without ``bytes`` / ``flops`` the work model is derived from one untimed call
        (:mod:`benchbench.measure.workmodel`); ``derive=False`` leaves them None (an
        input the call only carries for the reference would count as bytes moved).
        """
        where = f"{_caller_location()}: workload {name!r}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise SuiteError(f"{where}: name must be a non-empty word without []():,/")
        # a set, not a scan: `zoo` declares 752 workloads at load, and scanning the list
        # for each one took 0.26 s of its 1 s load on a busy machine
        if len(self._names) != len(self.workloads):  # the list was changed by hand
            self._names = {w.name for w in self.workloads}
        if name in self._names:
            raise SuiteError(f"{where}: declared twice in suite {self.name!r}; rename one")
        if not callable(setup):
            raise SuiteError(f"{where}: setup must be callable(ctx), got {setup!r}")
        variants = tuple(variants)
        if not variants:
            raise SuiteError(f"{where}: needs at least one Variant")
        seen: set[str] = set()
        for v in variants:
            if not isinstance(v, Variant):
                raise SuiteError(f"{where}: variants must be Variant(...) objects, got {v!r}")
            if not _VARIANT.match(v.name) or v.name in seen:
                raise SuiteError(
                    f"{where}: variant names must be unique, non-empty, on one line "
                    f"without surrounding spaces, got {v.name!r}"
                )
            seen.add(v.name)
        sizes_t = tuple(check_size(s, where) for s in sizes)
        if not sizes_t:
            raise SuiteError(f"{where}: sizes is empty; give at least one size")
        for dtype in dtypes:
            if dtype not in ITEMSIZE:
                raise SuiteError(f"{where}: unknown dtype {dtype!r}; known: {', '.join(ITEMSIZE)}")
        for device in devices:
            if not isinstance(device, str) or not _DEVICE.match(device):
                raise SuiteError(
                    f"{where}: unknown device {device!r}; use cpu, cuda, cuda:N or mps"
                )
        if cache is not None and cache not in CACHE_MODES:
            raise SuiteError(f"{where}: cache must be one of {CACHE_MODES}, got {cache!r}")
        for lifetime in (outputs, *(v.outputs for v in variants if v.outputs is not None)):
            if lifetime not in OUTPUT_MODES:
                raise SuiteError(
                    f"{where}: outputs must be one of {', '.join(OUTPUT_MODES)}, got {lifetime!r}"
                )
        for v in variants:
            if v.traffic is not None and v.traffic not in TRAFFIC:
                raise SuiteError(
                    f"{where}: variant {v.name!r}: traffic must be one of "
                    f"{', '.join(TRAFFIC)} or None, got {v.traffic!r}"
                )
        if budget_s is not None and not budget_s > 0:
            raise SuiteError(f"{where}: budget_s must be > 0 seconds, got {budget_s!r}")
        param_axes: list[tuple[str, tuple[Any, ...]]] = []
        for key, values in (params or {}).items():
            vals = tuple(values)
            if not vals:
                raise SuiteError(f"{where}: parameter {key!r} has no values")
            param_axes.append((key, vals))
        for mode in (check, *(v.check for v in variants if v.check is not None)):
            if not any(mode is m or (isinstance(m, str) and mode == m) for m in CHECK_MODES):
                raise SuiteError(f"{where}: check must be True, False or 'record', got {mode!r}")
        if teardown is not None and not callable(teardown):
            raise SuiteError(f"{where}: teardown must be callable(*inputs), got {teardown!r}")
        check_tolerance(where, "", rtol=rtol, atol=atol)
        for v in variants:
            check_tolerance(where, f" variant {v.name!r}", rtol=v.rtol, atol=v.atol)
        for label, fn in (
            ("bytes", bytes),
            ("flops", flops),
            ("items", items),
            ("reduction_size", reduction_size),
        ):
            if fn is not None and not callable(fn):
                raise SuiteError(f"{where}: {label} must be callable(point), got {fn!r}")
        check_x(x, param_axes, sizes_t, where)
        modes_t = check_modes(modes, param_axes, where)
        workload = Workload(
            suite=self.name,
            name=name,
            setup=setup,
            variants=variants,
            sizes=sizes_t,
            dtypes=tuple(dtypes),
            devices=tuple(devices),
            params=tuple(param_axes),
            bytes=bytes,
            flops=flops,
            items=items,
            reference=reference,
            rtol=frozen(rtol),
            atol=frozen(atol),
            reduction_size=reduction_size,
            check=check,
            tags=tuple(dict.fromkeys((*self.tags, *tags))),
            exclude=exclude,
            budget_s=budget_s,
            cache=cache,
            outputs=outputs,
            version=version,
            description=description,
            location=where,
            teardown=teardown,
            x=x,
            modes=modes_t,
            derive=bool(derive),
        )
        self.workloads.append(workload)
        self._names.add(name)
        return workload

    def get(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        known = ", ".join(w.name for w in self.workloads)
        raise SuiteError(f"suite {self.name!r} has no workload {name!r}; it has: {known}")
