"""Writing a capture as an ordinary suite file, and finding the callable to capture.

``benchbench capture my_model.py:model --args-from make_inputs -o my_model_ops.py``
resolves ``MODULE_OR_FILE:CALLABLE`` (:func:`load_target`), captures it on the
factory's inputs and writes (:func:`render`) a readable suite: one ``call(...)`` per
distinct aten call, declared by :func:`benchbench.suite.captured.declare_calls`, and a
``whole`` workload that imports the callable again and runs it on the same seeded
inputs. ``benchbench run my_model_ops.py`` runs it like any other suite.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import json
import math
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchbench.core.errors import UsageError
from benchbench.suite.capture import CallRecord, Capture, Opaque, TensorSpec
from benchbench.suite.captured import capture_dtype_device

_SUITE_NAME = re.compile(r"^[^\s\[\]():,/]+$")


def split_target(text: str, what: str = "target") -> tuple[str, str]:
    """``("my_model.py", "model.forward")`` from ``"my_model.py:model.forward"``."""
    module, sep, attr = text.rpartition(":")
    if not sep or not module or not attr:
        raise UsageError(
            f"{what} {text!r} must read MODULE_OR_FILE:NAME, e.g. my_model.py:model "
            "or mypackage.models:make_model"
        )
    return module, attr


def _import(module: str) -> Any:
    path = Path(module)
    if module.endswith(".py") or path.is_file():
        if not path.is_file():
            raise UsageError(f"capture: file {module!r} does not exist")
        name = "benchbench_capture_" + re.sub(r"\W", "_", path.resolve().stem)
        spec = importlib.util.spec_from_file_location(name, path.resolve())
        if spec is None or spec.loader is None:
            raise UsageError(f"capture: {module!r} cannot be loaded as a Python file")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        spec.loader.exec_module(loaded)
        return loaded
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(
            f"capture: cannot import module {module!r} ({exc}); give a file path "
            "(my_model.py) or put the module on PYTHONPATH"
        ) from None


def load_target(module: str, attr: str) -> Callable[..., Any]:
    """The callable ``attr`` (a dotted path: ``model.forward``) of ``module`` (a file
    path or an importable module)."""
    value: Any = _import(module)
    for part in attr.split("."):
        if not hasattr(value, part):
            raise UsageError(f"capture: {module}:{attr}: {part!r} not found in {value!r}")
        value = getattr(value, part)
    if not callable(value):
        raise UsageError(f"capture: {module}:{attr} is a {type(value).__name__}, not callable")
    return value


def suite_name_for(output: Path, name: str | None) -> str:
    """``--name``, else the output file's stem; checked like a suite name."""
    chosen = name or output.stem
    if not _SUITE_NAME.match(chosen):
        raise UsageError(
            f"suite name {chosen!r} (from {'--name' if name else '-o'}) must be one word "
            "without spaces or []():,/; pass --name"
        )
    return chosen


def _short(value: float) -> str:
    """A range end with 6 significant digits: readable, and as good as exact for
    drawing values (integers keep every digit)."""
    return repr(int(value)) if float(value).is_integer() else f"{value:.6g}"


def _text(value: str) -> str:
    return json.dumps(value)


def literal(value: Any) -> str:
    """Python source for a recorded argument."""
    if isinstance(value, TensorSpec):
        parts = [literal(value.shape), literal(value.stride), _text(value.dtype)]
        if value.device != "cpu":
            parts.append(_text(value.device))
        if value.offset:
            parts.append(f"offset={value.offset}")
        if value.low is not None and value.high is not None:
            parts.append(f"low={_short(value.low)}, high={_short(value.high)}")
        return f"T({', '.join(parts)})"
    if isinstance(value, Opaque):
        return f"Opaque({_text(value.why)})"
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, torch.device):
        return f"torch.device({_text(str(value))})"
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _call_source(record: CallRecord) -> str:
    lines = [f"    call(\n        {_text(record.op)},\n        count={record.count},"]
    lines.append("        args=(")
    lines += [f"            {literal(arg)}," for arg in record.args]
    lines.append("        ),")
    if record.kwargs:
        kwargs = ", ".join(f"{_text(k)}: {literal(v)}" for k, v in record.kwargs)
        lines.append(f"        kwargs={{{kwargs}}},")
    if record.mutates:
        lines.append("        mutates=True,")
    lines.append(f"        output_bytes={record.output_bytes},\n    ),")
    return "\n".join(lines)


def render(
    captured: Capture,
    *,
    suite_name: str,
    target: tuple[str, str],
    factory: tuple[str, str] | None,
    command: str,
) -> str:
    """The suite file's source for ``captured`` (``target``/``factory``: module, name)."""
    module, attr = target
    if module.endswith(".py") or Path(module).is_file():
        module = str(Path(module).resolve())
    views = ", ".join(f"{op} x{n}" for op, n in captured.view_summary()) or "none"
    calls = "\n".join(_call_source(c) for c in captured.calls)
    names = "Opaque, T" if "Opaque(" in calls else "T"
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    about = textwrap.fill(
        f"{captured.total_calls} calls, {len(captured.calls)} distinct, are timed one "
        "workload each; the view and metadata calls are left out (dispatch, no data "
        f"moved): {views}. `whole` runs the callable itself on the same inputs; "
        "`benchbench breakdown` compares the two. Written by:",
        width=88,
        break_on_hyphens=False,
    )
    out = [
        f'"""{suite_name}: the aten calls of {target[0]}:{attr},',
        f"captured {today}.",
        "",
        about,
        "",
        f"    {command}",
        '"""',
        "",
        *(["import torch", ""] if "torch." in calls else []),
        "from benchbench import Suite",
        "from benchbench.suite.capture_file import load_target",
        f"from benchbench.suite.captured import {names}, call, declare_calls, declare_whole",
        "",
        f"suite = Suite({_text(suite_name)}, "
        f"description={_text(f'captured from {target[0]}:{attr}')})",
        f"CAPTURE = {_text(attr)}",
        "",
        "CALLS = [",
        calls,
        "]",
        "",
        "declare_calls(suite, CAPTURE, CALLS)",
    ]
    if factory is not None:
        fmod = factory[0]
        if fmod.endswith(".py") or Path(fmod).is_file():
            fmod = str(Path(fmod).resolve())
        make = f"load_target({_text(fmod)}, {_text(factory[1])})"
    else:
        make = "None"
    dtype, device = capture_dtype_device(captured)
    out += [
        "declare_whole(",
        "    suite,",
        "    CAPTURE,",
        f"    load_target({_text(module)}, {_text(attr)}),",
        f"    {make},",
        f"    dtype={_text(dtype)},",
        f"    device={_text(device)},",
        ")",
        "",
    ]
    return "\n".join(out)


__all__ = ["literal", "load_target", "render", "split_target", "suite_name_for"]
