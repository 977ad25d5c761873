"""The ``operator_benchmark`` module PyTorch's operator-benchmark test files import.

PyTorch's ``benchmarks/operator_benchmark/pt/*_test.py`` files do ``import
operator_benchmark as op_bench``, build configs with ``op_bench.config_list`` /
``op_bench.cross_product_configs``, subclass ``op_bench.TorchBenchmarkBase`` (``init``
sets ``self.inputs``, ``forward`` computes) and register with
``op_bench.generate_pt_test`` and its siblings. :mod:`benchbench.suite.opbench` runs
such a file, unmodified, with a module from :func:`stand_in` in ``sys.modules`` for the
import only. Registering records the test in the module's :class:`Registry`; nothing
is built or timed at import. The config helpers return the lists upstream's return,
and :func:`test_name` names a test as upstream does (``sqrt_M512_N512_cpu``).

One difference, on purpose: ``random_sample_configs`` draws from a generator with a
fixed seed, where upstream draws from Python's global one, so that the points a run
lists and the points its worker processes load are the same.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

#: Config keys left out of a test's name, as upstream does (the device is in the
#: name as its bare value: ``..._cpu``).
UNNAMED_KEYS = ("device",)
#: Devices a config may name.
CONFIG_DEVICES = ("cpu", "cuda", "mps")
#: The seed of ``random_sample_configs``' generator (see the module docstring).
SAMPLE_SEED = 0

Config = Sequence[Mapping[str, Any]]


def test_name(module_name: str, attrs: Mapping[str, Any]) -> str:
    """The name upstream gives a test: module name, then ``key`` + value per config
    attribute (the device's value alone), joined by ``_``, spaces removed.

    Upstream turns every value into a string before naming, so a bool reads ``True``
    and a dtype ``torch.float64``: ``addr_M8_N256_cpu_dtypetorch.float64``.
    """
    parts = [("" if key in UNNAMED_KEYS else key) + str(value) for key, value in attrs.items()]
    return (module_name + "_" + "_".join(parts)).replace(" ", "")


class TorchBenchmarkBase(torch.nn.Module):
    """Base class of an operator-benchmark test: ``init(**config)`` sets ``self.inputs``
    (a dict), ``forward(*inputs)`` runs the operator once."""

    inputs: dict[str, Any]
    inputs_tuple: tuple[Any, ...]

    def __init__(self) -> None:
        super().__init__()
        self.user_given_name: str | None = None
        self._is_backward = False
        self._pass_count = 0
        self._auto_set_counter = 0
        self._num_inputs_require_grads = 0

    def _set_backward_test(self, is_backward: bool) -> None:
        self._is_backward = is_backward

    def auto_set(self) -> bool:
        """``requires_grad`` for the next input of a gradient test (counted on the
        first ``init``); False for a forward test."""
        if not self._is_backward:
            return False
        if self._pass_count == 0:
            self._num_inputs_require_grads += 1
            return True
        self._auto_set_counter += 1
        return self._pass_count == self._auto_set_counter

    def extract_inputs_tuple(self) -> None:
        self.inputs_tuple = tuple(self.inputs.values())

    def get_inputs(self) -> tuple[Any, ...]:
        return self.inputs_tuple

    def forward_impl(self) -> Any:
        return self.forward(*self.get_inputs())

    def module_name(self) -> str:
        """The operator's name: ``set_module_name``'s, else the class name."""
        return self.user_given_name or type(self).__name__

    def set_module_name(self, name: str) -> None:
        self.user_given_name = name

    def test_name(self, **attrs: Any) -> str:
        return test_name(self.module_name(), attrs)


@dataclass(frozen=True)
class Registration:
    """One ``generate_pt_*`` call: its configs, test class, direction and operator."""

    configs: tuple[Config, ...]
    cls: type[Any]
    backward: bool
    #: ``{"op_name": ..., "op_func": ...}`` of ``generate_pt_tests_from_op_list``.
    op: Mapping[str, Any] | None
    line: int


@dataclass
class Registry:
    """The tests one import of a test file registered, in order."""

    registrations: list[Registration] = field(default_factory=list)

    def add(
        self, configs: Any, cls: type, backward: bool, op: Mapping[str, Any] | None = None
    ) -> None:
        line = sys._getframe(2).f_lineno  # the test file's generate_pt_* call
        self.registrations.append(Registration(tuple(configs), cls, backward, op, line))


def cross_product_configs(**configs: Sequence[Any]) -> list[tuple[dict[str, Any], ...]]:
    """Every combination of the values, one ``{key: value}`` per key, keys in order:
    ``cross_product_configs(M=[1, 2], N=[4], tags=["short"])``."""
    _check_devices(configs)
    axes = [[{key: value} for value in values] for key, values in configs.items()]
    return list(itertools.product(*axes))


def config_list(
    *,
    attrs: Sequence[Sequence[Any]],
    attr_names: Sequence[str],
    tags: Sequence[str],
    cross_product_configs: Mapping[str, Sequence[Any]] | None = None,
) -> list[list[dict[str, Any]]]:
    """One config per row of ``attrs`` (named by ``attr_names``) with the tags, times
    each combination of ``cross_product_configs``."""
    _check_devices(cross_product_configs or {})
    crossed = _cross(**(cross_product_configs or {})) if cross_product_configs else None
    out: list[list[dict[str, Any]]] = []
    for row in attrs:
        base = [{name: value} for name, value in zip(attr_names, row, strict=False)]
        base.append({"tags": "_".join(tags)})
        if crossed:
            out.extend(base + list(combo) for combo in crossed)
        else:
            out.append(base)
    return out


_cross = cross_product_configs


def op_list(*, attrs: Sequence[Sequence[Any]], attr_names: Sequence[str]) -> list[dict[str, Any]]:
    """Operators as dicts: ``op_list(attr_names=["op_name", "op_func"], attrs=[["abs",
    torch.abs]])``."""
    return [dict(zip(attr_names, row, strict=False)) for row in attrs]


def attr_probs(**probs: Sequence[float]) -> dict[str, Sequence[float]]:
    return probs


def random_sample_configs(**configs: Any) -> list[list[dict[str, Any]]]:
    """``total_samples`` configs drawn with the weights ``probs`` gives each value."""
    if "probs" not in configs:
        raise ValueError("random_sample_configs needs probs=attr_probs(...)")
    draw = random.Random(SAMPLE_SEED)
    reserved = {"probs", "total_samples", "tags"}
    out = []
    for _ in range(configs["total_samples"]):
        config: list[dict[str, Any]] = []
        for key, values in configs.items():
            if key in reserved:
                continue
            weights = list(itertools.accumulate(configs["probs"][key]))
            index = min(bisect.bisect(weights, draw.random() * weights[-1]), len(values) - 1)
            config.append({key: values[index]})
        config.append({"tags": "_".join(configs["tags"])})
        out.append(config)
    return out


def cross_product(*inputs: Sequence[Any]) -> list[tuple[Any, ...]]:
    return list(itertools.product(*inputs))


def generate_configs(**configs: Any) -> Any:
    """``sample_func`` applied to one ``[{key: value}, ...]`` list per key."""
    if "sample_func" not in configs:
        raise ValueError("generate_configs needs sample_func=")
    axes = [[{k: v} for v in values] for k, values in configs.items() if k != "sample_func"]
    return configs["sample_func"](*axes)


def get_n_rand_nums(min_val: int, max_val: int, n: int) -> list[int]:
    return random.Random((1 << 32) - 1).sample(range(min_val, max_val), n)


def numpy_random(dtype: Any, *shapes: int) -> np.ndarray:
    return np.random.rand(*shapes).astype(dtype)


def shape_to_string(shape: Sequence[int]) -> str:
    return ", ".join(str(x) for x in shape)


def str2bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"a boolean is expected, got {value!r}")


def _check_devices(configs: Mapping[str, Any]) -> None:
    for device in configs.get("device", ()):
        if device not in CONFIG_DEVICES:
            raise ValueError(f"device must be one of {', '.join(CONFIG_DEVICES)}, got {device!r}")


def _main() -> None:
    raise RuntimeError(
        "this operator_benchmark module belongs to benchbench: measure the file with "
        "`benchbench run opbench:PATH`"
    )


#: What the stand-in offers besides the generate_pt_* functions.
_OFFERED: dict[str, Callable[..., Any] | type] = {
    "TorchBenchmarkBase": TorchBenchmarkBase,
    "cross_product_configs": cross_product_configs,
    "config_list": config_list,
    "op_list": op_list,
    "attr_probs": attr_probs,
    "random_sample_configs": random_sample_configs,
    "cross_product": cross_product,
    "generate_configs": generate_configs,
    "get_n_rand_nums": get_n_rand_nums,
    "numpy_random": numpy_random,
    "shape_to_string": shape_to_string,
    "str2bool": str2bool,
}


def stand_in() -> tuple[types.ModuleType, Registry]:
    """A fresh ``operator_benchmark`` module and the registry its tests go to."""
    registry = Registry()
    module = types.ModuleType("operator_benchmark", "benchbench's operator_benchmark")
    for name, value in _OFFERED.items():
        setattr(module, name, value)

    def generate_pt_test(configs: Any, cls: type) -> None:
        registry.add(configs, cls, backward=False)

    def generate_pt_gradient_test(configs: Any, cls: type) -> None:
        registry.add(configs, cls, backward=True)

    def generate_pt_tests_from_op_list(ops: Any, configs: Any, cls: type) -> None:
        for op in ops:
            registry.add(configs, cls, backward=False, op=op)

    def generate_pt_gradient_tests_from_op_list(ops: Any, configs: Any, cls: type) -> None:
        for op in ops:
            registry.add(configs, cls, backward=True, op=op)

    module.generate_pt_test = generate_pt_test  # type: ignore[attr-defined]
    module.generate_pt_gradient_test = generate_pt_gradient_test  # type: ignore[attr-defined]
    module.generate_pt_tests_from_op_list = generate_pt_tests_from_op_list  # type: ignore[attr-defined]
    module.generate_pt_gradient_tests_from_op_list = generate_pt_gradient_tests_from_op_list  # type: ignore[attr-defined]
    module.benchmark_runner = types.SimpleNamespace(main=_main)  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:
        raise AttributeError(
            f"operator_benchmark.{name} is not offered by benchbench's operator_benchmark "
            f"(it offers {', '.join(sorted([*_OFFERED, 'generate_pt_test']))} and the other "
            "generate_pt_* functions)"
        )

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module, registry
