"""PyTorch's operator_benchmark test files as suites: ``benchbench run opbench:PATH``.

PATH is one test module of a PyTorch checkout's ``benchmarks/operator_benchmark``
(``pt/unary_test.py``). It runs unmodified, read-only, with benchbench's
``operator_benchmark`` (:mod:`benchbench.suite.opbench_api`) in ``sys.modules`` for the
import only, the folder holding ``pt/`` first on ``sys.path`` (for ``from pt import
configs``); both are restored afterwards, and the modules the file imported from that
folder are dropped again.

Never the real package, even where PATH's checkout has it: its ``benchmark_pytorch``
imports a C++ extension that must be built first, importing it registers every test
in one process-wide list, and building a test runs its ``init`` (allocating every
input of every test) just to list it.

Each registered test becomes a workload named as upstream names it
(``sqrt_M512_N512_cpu``; ``[]():,/``, which labels reserve, become ``{};=|``, and the
description keeps the upstream name) with one point: the config's device (``cpu``
without one), the dtype and shape of the first tensor input, the config's other values
as parameters, upstream's tag as its tag. Listing runs each ``init`` on the ``meta``
device (no memory, about 50 µs a test) to learn dtype and shape; a test whose ``init``
fails there is tried on the CPU. The point's setup calls ``init`` for real, torch,
NumPy and ``random`` seeded from the point's input seed, and the timed call is
``forward(*inputs)`` (upstream's positional call, ``self.inputs``' order), with no
reference check (upstream has none, and some operators draw random numbers) and no
work model. ``--device`` and ``--dtype`` keep the tests that have them; they do not
move a test. A test whose ``init`` raises, or that needs a device this machine lacks,
is a skipped point with the reason. A gradient test (``..._bwdall``) is a point of
mode ``bwd``: its init marks the inputs that get gradients (``auto_set()``), and the
timed call is the backward of ``forward`` (:mod:`benchbench.measure.backward`).

One difference from upstream's harness, on purpose: a test whose ``forward`` returns one
of its inputs (``exp_``, ``bernoulli_``) is an ``inplace`` variant, its input restored
before every call outside the timed region. Upstream calls it on the same tensor again
and again, so it times the operator on its own earlier outputs (``exp_`` of
``torch.rand`` values: +inf everywhere from the 4th call on).
"""

from __future__ import annotations

import copy
import importlib.util
import random
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbench.core.errors import SuiteError, UsageError
from benchbench.core.values import ITEMSIZE, Point
from benchbench.suite.declare import Skip, Suite, Variant

if TYPE_CHECKING:
    from benchbench.suite.inputs import SetupContext
    from benchbench.suite.opbench_api import Registration

PREFIX = "opbench:"
MODULE = "operator_benchmark"
_IMPORTS = re.compile(r"^\s*(import|from)\s+operator_benchmark\b", re.M)
_RESERVED = str.maketrans("[(])/,:", "{{}}|;=")
#: A folder with one of these is the operator_benchmark root (``pt/`` sits in it).
_ROOT_MARKERS = ("benchmark_core.py", "operator_benchmark.py")
_EXAMPLE = "opbench:pytorch/benchmarks/operator_benchmark/pt/unary_test.py"


def is_test_module(path: Path) -> bool:
    """Whether ``path`` is a Python file that imports ``operator_benchmark``."""
    try:
        return path.suffix == ".py" and bool(_IMPORTS.search(path.read_text(errors="replace")))
    except OSError:
        return False


def resolve(spec: str) -> Path:
    """The test module ``opbench:PATH`` names; a usage error says what is wrong with it."""
    text = spec[len(PREFIX) :] if spec.startswith(PREFIX) else spec
    path = Path(text).expanduser()
    where = f"{PREFIX}{text}"
    if not text:
        raise UsageError(f"{where!r} names no file; give a test module, e.g. {_EXAMPLE}")
    if not path.exists():
        raise UsageError(
            f"{where!r}: {text!r} does not exist; give the path of an operator_benchmark "
            f"test module, e.g. {_EXAMPLE}"
        )
    if path.is_dir():
        raise UsageError(
            f"{where!r} is a folder; give one test module in it, e.g. "
            f"{PREFIX}{path / 'pt' / 'unary_test.py'}"
        )
    if not is_test_module(path):
        raise UsageError(
            f"{where!r} is not an operator_benchmark test: it does not `import "
            f"{MODULE}`; give a test module such as {_EXAMPLE}"
        )
    return path.resolve()


@dataclass(frozen=True)
class Probe:
    """What listing learned of one test: its name, shape, dtype, or why it cannot run."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    skip: str | None = None
    #: ``forward`` returns one of its inputs (``exp_``, ``bernoulli_``): it overwrites it.
    inplace: bool = False


def load(path: Path) -> Suite:
    """The suite of operator_benchmark test module ``path``: one workload per test."""
    import torch  # seconds to import: only when an operator_benchmark file is loaded

    registrations = _import(path)
    suite = Suite(f"opbench.{path.stem}", description=f"operator_benchmark tests of {path}")
    names: set[str] = set()
    for registration in registrations:
        for config in registration.configs:
            attrs, tags = _split(config, path, registration)
            probe = _probe(registration, attrs, torch)
            name = probe.name.translate(_RESERVED)
            if name in names:
                continue  # upstream measures such a duplicate twice under one name
            names.add(name)
            device = str(attrs.get("device", "cpu"))
            # A dtype benchbench has no itemsize for is declared float32; such a point
            # is skipped, its reason naming the real dtype.
            dtype = probe.dtype if probe.dtype in ITEMSIZE else "float32"
            suite.workload(
                name,
                setup=_setup(registration, attrs, probe.skip),
                variants=[
                    Variant(_direction(registration), _forward(registration), inplace=probe.inplace)
                ],
                sizes=[probe.shape],
                dtypes=[dtype],
                devices=[device],
                params={k: [_plain(v)] for k, v in attrs.items() if k != "device"},
                # A gradient test times the backward of its forward (the inputs its
                # init marked with auto_set() get the gradients), as the mode bwd.
                modes=("bwd",) if registration.backward else ("fwd",),
                check=False,
                tags=[tags],
                exclude=_only(device, dtype),
                description=f"operator_benchmark test {probe.name} ({path.name}, line "
                f"{registration.line})",
            )
    suite.path = str(path)
    return suite


def _import(path: Path) -> list[Registration]:
    """Run the test module with our ``operator_benchmark``; the tests it registered."""
    from benchbench.suite.opbench_api import stand_in  # imports torch: loaded here only

    module, registry = stand_in()
    spec = importlib.util.spec_from_file_location(f"benchbench_opbench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SuiteError(f"operator_benchmark test {str(path)!r}: cannot be loaded as Python")
    loaded = importlib.util.module_from_spec(spec)
    with _injected(module, _root(path)):
        try:
            spec.loader.exec_module(loaded)
        except SyntaxError as exc:
            raise SuiteError(
                f"operator_benchmark test {str(path)!r}, line {exc.lineno}: syntax error: {exc.msg}"
            ) from None
        except Exception as exc:
            raise SuiteError(
                f"operator_benchmark test {str(path)!r}, line {_line_in(path, exc)}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    if not registry.registrations:
        raise SuiteError(
            f"operator_benchmark test {str(path)!r} registers no test: call "
            "op_bench.generate_pt_test(configs, Benchmark) or a sibling"
        )
    return registry.registrations


@contextmanager
def _injected(module: Any, root: Path) -> Iterator[None]:
    """``module`` as ``operator_benchmark`` and ``root`` first on ``sys.path`` while the
    block runs; then both as they were, and the modules imported from ``root`` gone."""
    before = set(sys.modules)
    saved = sys.modules.get(MODULE)
    saved_path = list(sys.path)
    sys.modules[MODULE] = module
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path[:] = saved_path
        if saved is None:
            sys.modules.pop(MODULE, None)
        else:
            sys.modules[MODULE] = saved
        for name in set(sys.modules) - before:
            file = getattr(sys.modules[name], "__file__", None) or ""
            if file and Path(file).resolve().is_relative_to(root):
                del sys.modules[name]


def _root(path: Path) -> Path:
    """The operator_benchmark folder of ``path``: the nearest of the three folders
    above it with upstream's modules, else the folder above the module's (``pt/``'s
    parent)."""
    for folder in path.resolve().parents[:3]:
        if any((folder / marker).is_file() for marker in _ROOT_MARKERS):
            return folder
    return path.resolve().parent.parent


def _line_in(path: Path, exc: BaseException) -> int | str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename).resolve() == path.resolve():
            return frame.lineno or "?"
    return "?"


def _split(config: Any, path: Path, registration: Registration) -> tuple[dict[str, Any], str]:
    """A config's attributes (in order) and its tag."""
    attrs: dict[str, Any] = {}
    tags = None
    for attr in config:
        if "tags" in attr:
            tags = attr["tags"]
            continue
        attrs.update(attr)
    if tags is None:
        raise SuiteError(
            f"operator_benchmark test {str(path)!r}, line {registration.line}: a config has "
            f"no tags ({attrs}); give tags=[...] to config_list / cross_product_configs"
        )
    return attrs, str(tags)


def _instance(registration: Registration, backward: bool) -> Any:
    op = registration.cls()
    if registration.op is not None:
        op.set_module_name(registration.op["op_name"])
    op._set_backward_test(backward)
    return op


def _init_kwargs(registration: Registration, attrs: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = copy.deepcopy(dict(attrs))
    if registration.op is not None:
        kwargs["op_func"] = registration.op["op_func"]
    return kwargs


def _name(op: Any, attrs: Mapping[str, Any], backward: bool) -> str:
    named = {k: str(v) for k, v in attrs.items()}
    if backward and op._num_inputs_require_grads > 0:
        named["bwd"] = "all"
    return str(op.test_name(**named))


def _probe(registration: Registration, attrs: Mapping[str, Any], torch: Any) -> Probe:
    """Name, shape and dtype of a test from its ``init`` on the meta device (the CPU
    where that fails and the test runs there); a failed ``init`` is the skip reason."""
    device = str(attrs.get("device", "cpu"))
    op = _instance(registration, registration.backward)
    kwargs = _init_kwargs(registration, attrs)
    error = None
    try:
        with torch.device("meta"):
            op.init(**{**kwargs, **({"device": "meta"} if "device" in kwargs else {})})
    except Exception as exc:
        error = exc
    if error is not None and device == "cpu":
        op = _instance(registration, registration.backward)
        try:
            _seeded(0, torch)
            op.init(**_init_kwargs(registration, attrs))
            error = None
        except Exception as exc:
            error = exc
    name = _name(op, attrs, registration.backward)
    if error is not None:
        return Probe(name, (1,), "float32", f"init raised {type(error).__name__}: {error}")
    shape, dtype = _first_tensor(getattr(op, "inputs", None), torch)
    skip = None
    if dtype not in ITEMSIZE:
        skip = f"its first input is {dtype}, which benchbench does not measure"
    return Probe(name, shape, dtype, skip, not registration.backward and _overwrites(op, torch))


def _overwrites(op: Any, torch: Any) -> bool:
    """Whether the test's ``forward`` returns one of its inputs: an in-place operator.
    Upstream calls it again and again on the same tensor, so from the first few calls
    on it times the operator on its own output: ``exp_`` of ``torch.rand`` values is
    +inf everywhere after 4 calls, and exp of +inf took 4-11x as long as exp of the
    values the test drew (BENCHMARKS.md, "Agreement with operator_benchmark"). Declared
    ``inplace``, the variant's input is restored before every call, untimed
    (:mod:`benchbench.measure.inplace`). One call on the probe's inputs (meta tensors,
    or the CPU's where ``init`` could not run on meta)."""
    inputs = getattr(op, "inputs", None)
    if not isinstance(inputs, Mapping):
        return False
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    try:
        out = op.forward(*inputs.values())
    except Exception:
        return False  # the run's own call will say what is wrong
    return any(out is t for t in tensors)


def _first_tensor(inputs: Any, torch: Any) -> tuple[tuple[int, ...], str]:
    """Shape and dtype of the first tensor input (the first of a list of tensors, as
    ``cat``'s); (1,) and torch's default dtype without one."""
    values = list(inputs.values()) if isinstance(inputs, Mapping) else []
    for value in values:
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, torch.Tensor):
            shape = tuple(int(d) for d in value.shape)
            if not shape or min(shape) < 1:
                shape = (1,)
            return shape, str(value.dtype).removeprefix("torch.")
    return (1,), str(torch.get_default_dtype()).removeprefix("torch.")


def _seeded(seed: int, torch: Any) -> None:
    import numpy as np

    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def _setup(
    registration: Registration, attrs: Mapping[str, Any], skip: str | None
) -> Callable[[SetupContext], tuple[Any, ...]]:
    def setup(ctx: SetupContext) -> tuple[Any, ...]:
        if skip is not None:
            raise Skip(skip)
        import torch

        _seeded(ctx.point.input_seed(), torch)
        op = _instance(registration, registration.backward)
        try:
            op.init(**_init_kwargs(registration, attrs))
        except (MemoryError, torch.cuda.OutOfMemoryError):
            raise
        except Exception as exc:
            raise Skip(f"init raised {type(exc).__name__}: {exc}") from None
        inputs = getattr(op, "inputs", None)
        if not isinstance(inputs, Mapping):
            raise Skip("init set no self.inputs dict")
        for value in vars(op).values():
            if isinstance(value, torch.nn.Module):  # forward only, as upstream
                for parameter in value.parameters():
                    parameter.requires_grad = False
        return (op, *inputs.values())

    return setup


def _forward(registration: Registration) -> Callable[..., Any]:
    """``forward`` of the test class, called as ``forward(op, *inputs)``: the instance
    travels as the first input, so the timed call is one plain method call."""
    forward: Callable[..., Any] = registration.cls.forward
    return forward


def _direction(registration: Registration) -> str:
    return "backward" if registration.backward else "forward"


def _only(device: str, dtype: str) -> Callable[[Point], str | None]:
    """Drops the points ``--device`` / ``--dtype`` would move off the test's own."""

    def exclude(point: Point) -> str | None:
        if point.device != device or point.dtype != dtype:
            return f"the test runs on {device} in {dtype}"
        return None

    return exclude


def _plain(value: Any) -> Any:
    """A config value as a JSON-safe parameter (a dtype as ``torch.float64``)."""
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
