"""Finding and loading suites, and choosing which of their points to run."""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from benchbench.core.errors import SuiteError, UsageError
from benchbench.core.values import Point
from benchbench.suite import opbench
from benchbench.suite.declare import Suite, Workload

_BUILTIN_PACKAGE = "benchbench.builtin_suites"


def builtin_dir() -> Path:
    """Folder of the built-in suites: ``suites/`` in a checkout, installed as a package."""
    checkout = Path(__file__).resolve().parents[2] / "suites"  # benchbench/suite/load.py
    if checkout.is_dir():
        return checkout
    spec = importlib.util.find_spec(_BUILTIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SuiteError("the built-in suites are not installed; reinstall benchbench")
    return Path(next(iter(spec.submodule_search_locations)))


def builtin_suites() -> dict[str, Path]:
    """Built-in suite names and their files."""
    return {p.stem: p for p in sorted(builtin_dir().glob("*.py")) if not p.stem.startswith("_")}


def resolve_suite(name_or_path: str) -> Path:
    """A built-in suite's file, the path given, or the operator_benchmark test module of
    ``opbench:PATH``; unknown names are a usage error."""
    if name_or_path.startswith(opbench.PREFIX):
        return opbench.resolve(name_or_path)
    builtins = builtin_suites()
    if name_or_path in builtins:
        return builtins[name_or_path]
    path = Path(name_or_path)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UsageError(f"suite file {name_or_path!r} does not exist")
        return path.resolve()
    raise UsageError(
        f"unknown suite {name_or_path!r}; built-in suites: {', '.join(builtins)} "
        f"(or give the path to a suite file, or {opbench.PREFIX}PATH for an "
        "operator_benchmark test module)"
    )


_loaded: dict[Path, Suite] = {}


def load_suite(path: Path) -> Suite:
    """Execute a suite file once per process and return its ``suite``.

    A file that imports ``operator_benchmark`` is loaded by
    :func:`benchbench.suite.opbench.load`. A syntax or import error becomes a
    :class:`SuiteError` naming the file and line; a :class:`UsageError` the file
    raises (a suite whose optional extra is missing) stays one.
    """
    path = Path(path).resolve()
    if path in _loaded:
        return _loaded[path]
    if opbench.is_test_module(path):
        _loaded[path] = opbench.load(path)
        return _loaded[path]
    module = execute_file(path)
    suites = [v for v in vars(module).values() if isinstance(v, Suite)]
    suite = getattr(module, "suite", None)
    if not isinstance(suite, Suite):
        if len(suites) != 1:
            raise SuiteError(f"suite {str(path)!r}: define one Suite named `suite` at module level")
        suite = suites[0]
    suite.path = str(path)
    _loaded[path] = suite
    return suite


_executed: dict[Path, ModuleType] = {}


def forget_executed() -> None:
    """Forget every file executed and suite loaded, as a new process starts: the next
    load reads each file again (a file edited since, a command run again in-process)."""
    for module in _executed.values():
        sys.modules.pop(module.__name__, None)
    _executed.clear()
    _loaded.clear()


def execute_file(path: Path, kind: str = "suite") -> ModuleType:
    """Execute the Python file at ``path`` once per process, as a module of its own
    (named after its path's hash, so no import statement reaches it), and return it.

    ``kind`` names the file in errors (``suite``; ``claims`` for a suite's claims file,
    :func:`benchbench.analysis.claims.read_claims`): a syntax or import error becomes a
    :class:`SuiteError` naming the kind, the file and the line; a :class:`UsageError`
    the file raises stays one.
    """
    path = Path(path).resolve()
    if path in _executed:
        return _executed[path]
    module_name = f"benchbench_{kind}_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(f"{kind} {str(path)!r}: cannot be loaded as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # No collection while the file runs: a suite declaring hundreds of workloads (`zoo`:
    # 752, read from cached captures) allocates enough to set off full collections over
    # torch's heap, 0.8 s of a 1.3 s load on a busy machine (0.5 s without them).
    collecting = gc.isenabled()
    gc.disable()
    executed = False
    try:
        spec.loader.exec_module(module)
        executed = True
    except (SuiteError, UsageError):
        # a UsageError is the user's to fix as it stands (exit 2): `zoo` without the
        # models extra names the install command
        raise
    except SyntaxError as exc:
        raise SuiteError(
            f"{kind} {str(path)!r}, line {exc.lineno}: syntax error: {exc.msg}"
        ) from None
    except Exception as exc:
        where = f"{kind} {str(path)!r}, line {_line_in(path, exc)}"
        raise SuiteError(f"{where}: {type(exc).__name__}: {exc}") from None
    finally:
        if not executed:  # nothing left of a file that failed, as of a failed import
            sys.modules.pop(module_name, None)
        if collecting:
            gc.enable()
    _executed[path] = module
    return module


def _line_in(path: Path, exc: BaseException) -> int | str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename).resolve() == path:
            return frame.lineno or "?"
    return "?"


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


@dataclass(frozen=True)
class Selection:
    """Which points of the loaded suites to run (the CLI's filter flags)."""

    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    pattern: str | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, given: Mapping[str, Any]) -> Selection:
        """The selection that :func:`dataclasses.asdict` gave, back from JSON (lists for
        tuples); keys it does not know (written by another version) are left out."""

        def names(value: Any) -> tuple[str, ...] | None:
            return tuple(value) if isinstance(value, list | tuple) else None

        return cls(
            devices=names(given.get("devices")),
            dtypes=names(given.get("dtypes")),
            pattern=given.get("pattern"),
            tags=tuple(given.get("tags") or ()),
        )

    def compiled_pattern(self) -> re.Pattern[str] | None:
        if self.pattern is None:
            return None
        try:
            return re.compile(self.pattern)
        except re.error as exc:
            raise UsageError(f"--filter {self.pattern!r} is not a valid regex: {exc}") from None


def select_points(suites: Sequence[Suite], selection: Selection) -> list[tuple[Workload, Point]]:
    """Expand every workload of ``suites`` and keep the points ``selection`` admits.

    ``pattern`` is searched in ``suite/label`` (e.g. ``quick/sqrt:torch.sqrt[float32,
    cpu](n=1024)``); ``tags`` keep workloads carrying any of them.
    """
    regex = selection.compiled_pattern()
    out: list[tuple[Workload, Point]] = []
    for suite in suites:
        for workload in suite.workloads:
            if selection.tags and not set(selection.tags) & set(workload.tags):
                continue
            for point in workload.points(devices=selection.devices, dtypes=selection.dtypes):
                if regex is not None and not regex.search(f"{point.suite}/{point.label}"):
                    continue
                out.append((workload, point))
    return out
