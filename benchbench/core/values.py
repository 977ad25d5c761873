"""Value types that travel between the suite, the worker, the store and the views."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "skipped", "error"]

#: Bytes per element of the dtypes benchbench knows by name.
ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex64": 8,
    "complex128": 16,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

CACHE_MODES = ("warm", "cold", "rotate")

#: Output lifetime in the timed loop: ``keep`` holds the previous call's output until
#: the next call has returned (``y = f(x)`` in a model's loop: two outputs alive at
#: once), ``drop`` releases each output before the next call (the allocator hands the
#: same, cache-hot block back). See :mod:`benchbench.measure.loops`.
OUTPUT_MODES = ("keep", "drop")
DEFAULT_OUTPUTS = "keep"

#: The kinds of memory traffic a point's bytes can be, each held to its own ceiling:
#: ``copy`` reads some buffers and writes others (a write-allocate store reads the line it
#: writes, uncredited); ``update`` reads and writes back the same bytes, as an in-place
#: operator does. See :mod:`benchbench.analysis.roofline`.
TRAFFIC = ("copy", "update")

#: What a point times (the ``mode`` parameter of a workload declared with ``modes=``):
#: ``fwd`` one call of the variant; ``bwd`` the backward pass of a forward graph built
#: untimed; ``fwd_bwd`` forward and backward together. See :mod:`benchbench.measure.backward`.
MODES = ("fwd", "bwd", "fwd_bwd")
#: A workload's modes unless declared: forward only, and no ``mode`` parameter at all.
DEFAULT_MODES = ("fwd",)

#: The variant of a captured callable's ``whole-compiled`` workload
#: (:mod:`benchbench.suite.captured`): the breakdown tells it from the eager whole by
#: this name (:mod:`benchbench.analysis.breakdown`).
COMPILED_VARIANT = "torch.compile"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the form hashed into ids."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(value: Any, length: int = 16) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def point_name(workload: str, variant: str, dtype: str, device: str) -> str:
    """A point's label without its size and parameters: ``sqrt:torch.sqrt[float32, cpu]``.

    The one form of a name in every table (points, comparisons, curves, alerts), so
    that two dtypes or devices of one workload never print the same name.
    """
    return f"{workload}:{variant}[{dtype}, {device}]"


def suite_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The sort key of a stored point in every table and JSON document of a run's points:
    suite, workload, variant, dtype, device, size, then the named parameters.

    A run writes each point when its last round finishes, in the rounds' shuffled order,
    and the store does not record the order a suite declares its workloads and variants
    (reading the suite back would import it, and torch). So names sort alphabetically and
    sizes and parameters numerically: ``add`` before ``sqrt``, 2^10 before 2^16 before
    2^20, a point without parameters before its ``dim=0``, whatever order the rounds ran
    in, and the same for every reader of the same run. ``row`` is a stored measurement
    joined with its benchmark (``params`` a mapping).
    """
    return (
        str(row["suite"]),
        str(row["workload"]),
        str(row["variant"]),
        str(row["dtype"]),
        str(row["device"]),
        int(row["size"]),
        tuple((str(k), _param_order(v)) for k, v in sorted((row.get("params") or {}).items())),
    )


def _param_order(value: Any) -> tuple[int, float, str]:
    """Numbers first and numerically (``dim=2`` before ``dim=10``), then the rest by JSON."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, canonical_json(value))


@dataclass(frozen=True)
class Point:
    """One thing to measure: a workload's variant at one value of every axis.

    ``size`` is the x-axis number (elements); ``shape`` the tensor shape it stands for.
    Work models and setups read it like ``p.numel``, ``p.itemsize``, ``p["dim"]``.
    """

    suite: str
    workload: str
    variant: str
    size: int
    shape: tuple[int, ...]
    dtype: str
    device: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    def __getitem__(self, name: str) -> Any:
        for key, value in self.params:
            if key == name:
                return value
        raise KeyError(f"point {self.label} has no parameter {name!r}")

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def label(self) -> str:
        """Reads like ``sqrt:torch.sqrt[float32, cpu](n=1048576)``."""
        size = "x".join(map(str, self.shape)) if len(self.shape) > 1 else str(self.size)
        extra = "".join(f", {k}={v}" for k, v in self.params)
        name = point_name(self.workload, self.variant, self.dtype, self.device)
        return f"{name}(n={size}{extra})"

    @property
    def canonical_params(self) -> dict[str, Any]:
        """Everything but suite, workload and variant that identifies the point."""
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            **{k: v for k, v in self.params},
        }

    def benchmark_id(self, code_version: int = 1) -> str:
        """Stable id of this point's history: hash of suite, workload, variant, params."""
        return short_hash(
            [self.suite, self.workload, self.variant, self.canonical_params, code_version]
        )

    def input_seed(self) -> int:
        """Seed shared by every variant of the point, so all of them see the same data."""
        key = [self.suite, self.workload, self.canonical_params]
        return int(short_hash(key, 8), 16)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "workload": self.workload,
            "variant": self.variant,
            "size": self.size,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            "params": [[k, v] for k, v in self.params],
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Point:
        """The point a stored measurement row (joined with its benchmark) measured."""
        return cls(
            suite=str(row["suite"]),
            workload=str(row["workload"]),
            variant=str(row["variant"]),
            size=int(row["size"]),
            shape=tuple(int(s) for s in row["shape"]),
            dtype=str(row["dtype"]),
            device=str(row["device"]),
            params=tuple((row.get("params") or {}).items()),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Point:
        return cls(
            suite=str(data["suite"]),
            workload=str(data["workload"]),
            variant=str(data["variant"]),
            size=int(data["size"]),
            shape=tuple(int(s) for s in data["shape"]),
            dtype=str(data["dtype"]),
            device=str(data["device"]),
            params=tuple((str(k), v) for k, v in data["params"]),
        )


@dataclass(frozen=True)
class Result:
    """What measuring one point produced. Statistics are derived from ``samples_s``."""

    point: Point
    status: Status
    reason: str | None = None
    samples_s: tuple[float, ...] = ()
    calls_per_sample: int = 1
    warmup: Mapping[str, Any] = field(default_factory=dict)
    converged: bool | None = None
    stop_reason: str | None = None
    cache_mode: str = "warm"
    threads: int | None = None
    bytes_per_call: float | None = None
    flop_per_call: float | None = None
    items_per_call: float | None = None
    max_rel_error: float | None = None
    peak_memory_bytes: int | None = None
    warnings: tuple[str, ...] = ()
    telemetry: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    code_version: int = 1
    duration_s: float | None = None
    max_abs_error: float | None = None
    #: Samples taken by each worker process, in the order of ``samples_s`` (a point
    #: measured in rounds across fresh processes); empty: all from one process.
    process_samples: tuple[int, ...] = ()
    #: Instructions per call counted under callgrind (``--metric instructions``): the
    #: median over ``instruction_counts``, one count per instrumented process.
    instructions_per_call: float | None = None
    instruction_counts: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "samples_s": list(self.samples_s),
            "calls_per_sample": self.calls_per_sample,
            "warmup": dict(self.warmup),
            "converged": self.converged,
            "stop_reason": self.stop_reason,
            "cache_mode": self.cache_mode,
            "threads": self.threads,
            "bytes_per_call": self.bytes_per_call,
            "flop_per_call": self.flop_per_call,
            "items_per_call": self.items_per_call,
            "max_rel_error": self.max_rel_error,
            "peak_memory_bytes": self.peak_memory_bytes,
            "warnings": list(self.warnings),
            "telemetry": dict(self.telemetry) if self.telemetry is not None else None,
            "extra": dict(self.extra),
            "code_version": self.code_version,
            "duration_s": self.duration_s,
            "max_abs_error": self.max_abs_error,
            "process_samples": list(self.process_samples),
            "instructions_per_call": self.instructions_per_call,
            "instruction_counts": list(self.instruction_counts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        values = dict(data)
        values["point"] = Point.from_dict(data["point"])
        values["samples_s"] = tuple(float(s) for s in data.get("samples_s", ()))
        values["warnings"] = tuple(data.get("warnings", ()))
        values["process_samples"] = tuple(int(k) for k in data.get("process_samples") or ())
        values["instruction_counts"] = tuple(float(c) for c in data.get("instruction_counts") or ())
        return cls(**values)
