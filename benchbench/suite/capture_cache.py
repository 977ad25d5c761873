"""A capture kept on disk as JSON, so that a suite capturing at load pays it once.

Every worker process loads the suite of the point it measures; a suite that captures
a model at load (``suites/models.py``) would run the model's forward and backward in
each of them (0.1-2 s a capture on our 2-core CPU, bfloat16 convolutions the
slowest). :func:`cached_capture` runs the capture once and keeps it in
``$BENCHBENCH_CACHE`` (default ``~/.cache/benchbench``), keyed by the torch version
and a key the suite gives (its own source's hash): later loads read it back.

The file is data, read back as data: JSON with tagged tensor specs, never pickle or
code. An unreadable or stale file is captured again and rewritten (atomically, so
two workers racing both leave a whole file).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchbench.suite.capture import CallRecord, Capture, Opaque, TensorSpec, capture

FORMAT = 1

_TORCH_NAMES = {"dtype": torch.dtype, "layout": torch.layout, "memory_format": torch.memory_format}


def cache_dir() -> Path:
    return Path(os.environ.get("BENCHBENCH_CACHE") or Path.home() / ".cache" / "benchbench")


def encode(value: Any) -> Any:
    """A recorded argument as JSON-ready data (tagged dicts for specs and torch values)."""
    if isinstance(value, TensorSpec):
        return {"T": [list(value.shape), list(value.stride), value.dtype, value.device,
                      value.offset, value.low, value.high]}  # fmt: skip
    if isinstance(value, Opaque):
        return {"opaque": value.why}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    for tag, kind in _TORCH_NAMES.items():
        if isinstance(value, kind):
            return {tag: str(value).removeprefix("torch.")}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, float) and value != value:
        return {"float": "nan"}
    if isinstance(value, float) and abs(value) == float("inf"):
        return {"float": str(value)}
    return value


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`; an unknown tag or torch name is a ValueError."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    ((tag, data),) = value.items()
    if tag == "T":
        shape, stride, dtype, device, offset, low, high = data
        return TensorSpec(tuple(shape), tuple(stride), str(dtype), str(device), int(offset),
                          low, high)  # fmt: skip
    if tag == "opaque":
        return Opaque(str(data))
    if tag == "device":
        return torch.device(str(data))
    if tag == "tuple":
        return tuple(decode(v) for v in data)
    if tag == "float":
        return float(data)
    if tag in _TORCH_NAMES:
        named = getattr(torch, str(data), None)
        if not isinstance(named, _TORCH_NAMES[tag]):
            raise ValueError(f"unknown torch {tag} {data!r}")
        return named
    raise ValueError(f"unknown tag {tag!r}")


def _record(call: CallRecord) -> dict[str, Any]:
    return {
        "op": call.op,
        "args": encode(call.args),
        "kwargs": [[k, encode(v)] for k, v in call.kwargs],
        "count": call.count,
        "mutates": call.mutates,
        "output_bytes": call.output_bytes,
    }


def _call(data: dict[str, Any]) -> CallRecord:
    return CallRecord(
        op=str(data["op"]),
        args=tuple(decode(data["args"])),
        kwargs=tuple((str(k), decode(v)) for k, v in data["kwargs"]),
        count=int(data["count"]),
        mutates=bool(data["mutates"]),
        output_bytes=int(data["output_bytes"]),
    )


def to_json(captured: Capture) -> str:
    return json.dumps(
        {
            "format": FORMAT,
            "name": captured.name,
            "calls": [_record(c) for c in captured.calls],
            "views": [_record(c) for c in captured.views],
        }
    )


def from_json(text: str) -> Capture:
    """A capture from :func:`to_json`'s text; anything malformed raises ValueError."""
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
        return Capture(
            name=str(data["name"]),
            calls=tuple(_call(c) for c in data["calls"]),
            views=tuple(_call(c) for c in data["views"]),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed capture: {exc}") from None


def cached_capture(
    key: str, fn: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]]
) -> Capture:
    """``capture(fn, *make_args())``, read from the cache when it holds ``key`` for this
    torch (``make_args`` is then never called: building inputs costs a load too)."""
    digest = hashlib.sha256(f"{key}\0{torch.__version__}".encode()).hexdigest()[:20]
    path = cache_dir() / "captures" / f"{digest}.json"
    try:
        return from_json(path.read_text())
    except (OSError, ValueError):
        pass
    captured = capture(fn, *make_args())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
            tmp.write(to_json(captured))
        os.replace(tmp.name, path)
    except OSError:
        pass  # a read-only home: capture at every load, slower but right
    return captured
