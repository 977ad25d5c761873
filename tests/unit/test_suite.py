import sys
from pathlib import Path

import pytest
import torch

from benchbench import Suite, Variant, geometric, pow2
from benchbench.core.errors import SuiteError
from benchbench.suite.load import Selection, builtin_dir, select_points


def _suite() -> Suite:
    suite = Suite("t", tags=["quick"])
    suite.workload(
        "sqrt",
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[
            Variant("torch.sqrt", torch.sqrt),
            Variant("x.sqrt_()", lambda x: x.sqrt_(), inplace=True),
        ],
        sizes=[1024, 4096],
        dtypes=["float32", "float64"],
        params={"threads": [1, 2]},
        bytes=lambda p: 2 * p.numel * p.itemsize,
    )
    return suite


def test_points_are_the_cartesian_product_of_the_axes():
    points = _suite().workloads[0].points()
    assert len(points) == 2 * 2 * 1 * 2 * 2  # sizes x dtypes x devices x params x variants
    labels = {p.label for p in points}
    assert "sqrt:torch.sqrt[float32, cpu](n=1024, threads=1)" in labels
    assert len({p.benchmark_id() for p in points}) == len(points)


def test_variants_of_a_point_share_the_input_seed():
    points = _suite().workloads[0].points()
    first, second = points[0], points[1]
    assert first.variant != second.variant
    assert first.input_seed() == second.input_seed()


def test_code_version_changes_the_benchmark_id():
    point = _suite().workloads[0].points()[0]
    assert point.benchmark_id(1) != point.benchmark_id(2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sizes": [-4]}, "size must be a positive int, got -4"),
        ({"sizes": []}, "sizes is empty"),
        ({"dtypes": ["float33"]}, "unknown dtype 'float33'"),
        ({"devices": ["tpu"]}, "unknown device 'tpu'"),
        ({"variants": []}, "needs at least one Variant"),
        ({"cache": "lukewarm"}, "cache must be one of"),
        ({"budget_s": 0}, "budget_s must be > 0"),
        ({"outputs": "hold"}, "outputs must be one of keep, drop, got 'hold'"),
        ({"variants": [Variant("v", torch.sqrt, outputs="none")]}, "got 'none'"),
        ({"x": "k"}, "x='k' names no parameter (parameters: none)"),
        ({"x": "k", "params": {"k": ["a"]}}, "parameter values must be positive numbers"),
        ({"x": 1}, "x=1 is no dimension of shape 8"),
        ({"x": -1}, "x must be a parameter name or a shape dimension index >= 0, got -1"),
    ],
)
def test_invalid_declarations_name_the_workload_and_value(kwargs, message):
    suite = Suite("t")
    args = {
        "setup": lambda ctx: ctx.uniform(),
        "variants": [Variant("v", torch.sqrt)],
        "sizes": [8],
        **kwargs,
    }
    with pytest.raises(SuiteError) as info:
        suite.workload("w", **args)
    text = str(info.value)
    assert message in text
    assert "workload 'w'" in text
    assert "test_suite.py" in text and "line" in text


def test_output_lifetime_is_the_run_flag_else_the_variant_else_the_workload():
    suite = Suite("t")
    workload = suite.workload(
        "w",
        setup=lambda ctx: ctx.uniform(),
        variants=[Variant("own", torch.sqrt, outputs="drop"), Variant("plain", torch.sqrt)],
        sizes=[8],
    )
    own, plain = workload.variants
    assert workload.outputs == "keep"  # the default: as model code holds its outputs
    assert workload.outputs_mode(plain) == "keep"
    assert workload.outputs_mode(own) == "drop"
    assert workload.outputs_mode(own, "keep") == "keep"
    dropping = suite.workload(
        "d", setup=lambda ctx: ctx.uniform(), variants=[plain], sizes=[8], outputs="drop"
    )
    assert dropping.outputs_mode(plain) == "drop"


def test_duplicate_names_are_rejected():
    suite = _suite()
    with pytest.raises(SuiteError, match="declared twice"):
        suite.workload(
            "sqrt", setup=lambda c: c.uniform(), variants=[Variant("a", torch.sqrt)], sizes=[1]
        )
    with pytest.raises(SuiteError, match="variant names must be unique"):
        suite.workload(
            "other", setup=lambda c: c.uniform(), variants=[Variant("a", torch.sqrt)] * 2, sizes=[1]
        )


def test_selection_filters_by_regex_tag_device_and_dtype():
    suite = _suite()
    everything = select_points([suite], Selection())
    assert len(everything) == 16
    only = select_points([suite], Selection(pattern=r"sqrt_\(\).*n=4096", dtypes=("float64",)))
    assert [p.label for _, p in only] == [
        "sqrt:x.sqrt_()[float64, cpu](n=4096, threads=1)",
        "sqrt:x.sqrt_()[float64, cpu](n=4096, threads=2)",
    ]
    assert select_points([suite], Selection(tags=("nightly",))) == []
    assert len(select_points([suite], Selection(devices=("cpu", "cuda")))) == 32


def test_size_helpers():
    assert pow2(10, 16, 2) == [1024, 4096, 16384, 65536]
    assert geometric(1, 1000, 4) == [1, 10, 100, 1000]
    with pytest.raises(SuiteError):
        pow2(5, 2)


def test_in_a_checkout_the_builtin_suites_are_the_checkouts_own():
    assert builtin_dir() == Path(__file__).resolve().parents[2] / "suites"


def test_a_suite_file_runs_once_until_forgotten_then_its_edit_is_read(tmp_path):
    from benchbench.suite.load import execute_file, forget_executed, load_suite

    path = tmp_path / "edited.py"
    declare = 'from benchbench import Suite\nsuite = Suite("{}")\n'
    path.write_text(declare.format("before"))
    first = load_suite(path)
    path.write_text(declare.format("after"))
    assert load_suite(path) is first and first.name == "before"  # once per process
    forget_executed()
    assert load_suite(path).name == "after"
    module = execute_file(path).__name__
    forget_executed()
    assert module not in sys.modules


def test_a_suite_file_that_fails_leaves_no_module_behind(tmp_path):
    from benchbench.suite.load import load_suite

    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('on purpose')\n")
    before = set(sys.modules)
    with pytest.raises(SuiteError, match="on purpose"):
        load_suite(broken)
    assert set(sys.modules) == before  # as a failed import leaves none
