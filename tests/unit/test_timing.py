"""Rows, verdicts, crossovers and statement checks of `benchbench time`, on synthetic data."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.analysis.variants import Row, find_crossovers, rows_from_results
from benchbench.core.errors import UsageError
from benchbench.core.values import Point, Result
from benchbench.measure.statements import (
    Statement,
    check_names,
    parse_statements,
    setup_names,
    statement_function,
)


def _result(variant: str, size: int, samples: list[float], status: str = "ok") -> Result:
    point = Point("time", "time", variant, size, (size,), "float32", "cpu")
    return Result(point=point, status=status, samples_s=tuple(samples), calls_per_sample=2)


def test_rows_give_ratios_against_the_reference_at_the_same_point():
    rng = np.random.default_rng(0)
    results = []
    for size, ratio in ((1024, 0.5), (4096, 0.9), (16384, 2.0)):
        base = rng.uniform(1.0, 1.01, 30) * 1e-3
        results.append(_result("a", size, list(base)))
        results.append(_result("b", size, list(base * ratio)))
    results.append(_result("b", 65536, [], status="error"))
    rows = rows_from_results(results, reference="a")
    by = {(r.variant, r.size): r for r in rows}
    assert by["a", 1024].verdict == "reference" and by["a", 1024].ratio == 1.0
    assert by["b", 1024].ratio == pytest.approx(0.5) and by["b", 1024].verdict == "faster"
    assert by["b", 4096].verdict == "faster"
    assert by["b", 16384].verdict == "slower"
    assert by["b", 1024].median_s == pytest.approx(np.median(results[1].samples_s) / 2)
    assert by["b", 1024].items_per_s == pytest.approx(1024 / by["b", 1024].median_s)
    assert by["b", 65536].ratio is None and by["b", 65536].status == "error"
    (crossover,) = find_crossovers(rows)
    assert (crossover.variant, crossover.reference) == ("b", "a")
    assert (crossover.below, crossover.above) == ("faster", "slower")
    assert crossover.between == (4096, 16384)
    assert 4096 < crossover.size < 16384
    assert "faster below" in crossover.describe()


def test_rows_pair_interleaved_rounds_and_keep_noise_apart_from_same():
    rng = np.random.default_rng(3)
    drift = rng.uniform(1.0, 2.0, 40)  # shared by both samples of a round
    ref = 1e-3 * drift * rng.normal(1.0, 0.005, 40)
    results = [
        _result("a", 1024, list(ref)),
        _result("b", 1024, list(1.06e-3 * drift * rng.normal(1.0, 0.005, 40))),
        _result("c", 1024, list(rng.permutation(ref))),  # the same times, rounds shuffled
    ]
    by = {r.variant: r for r in rows_from_results(results, reference="a")}
    # 6 % slower under a x2 drift: only a paired bootstrap sees it.
    assert by["b"].verdict == "slower" and by["b"].p_value is not None
    assert by["b"].p_value < 0.05 and by["b"].ratio_ci_low > 1.0
    assert by["c"].verdict == "not significant" and by["c"].p_value > 0.05
    assert by["a"].p_value is None and "p_value" in by["a"].to_dict()


def test_row_round_trips_through_a_dataframe_record_with_nan():
    row = Row("cpu", "float32", 1024, "b", "a", "error", reason="wrong result", warnings=("w",))
    record = {**row.to_dict(), "median_s": float("nan"), "n": float("nan")}
    assert Row.from_mapping(record) == row


def test_statements_compile_and_bad_ones_are_named():
    statements = parse_statements(["torch.rsqrt(x)", "1 / torch.sqrt(x)"])
    assert [(s.index, s.text) for s in statements] == [
        (1, "torch.rsqrt(x)"),
        (2, "1 / torch.sqrt(x)"),
    ]
    with pytest.raises(UsageError, match=r"statement 2 'torch.sqrt\(x': syntax error"):
        parse_statements(["x", "torch.sqrt(x"])
    with pytest.raises(UsageError, match=r"statement 1 'y = x': syntax error.*one expression"):
        parse_statements(["y = x"])
    with pytest.raises(UsageError, match="statement 2 'x' repeats statement 1"):
        parse_statements(["x", "x"])
    with pytest.raises(UsageError, match="at least one statement"):
        parse_statements([])
    with pytest.raises(UsageError, match="at most 255"):
        parse_statements(["x" + " + x" * 100])


def test_name_check_knows_point_names_setup_names_and_local_bindings():
    ok = parse_statements(["torch.rsqrt(x) + n", "sum(i for i in range(n))", "(lambda z: z)(y)"])
    check_names(ok, None)
    with pytest.raises(UsageError, match=r"statement 1 'torch.sqrt\(z\)': name 'z' is not"):
        check_names(parse_statements(["torch.sqrt(z)"]), None)
    setup = "import math as m\nz = torch.rand(n)\ndef f(a):\n    return a"
    assert setup_names(setup) == {"m", "z", "f"}
    check_names(parse_statements(["f(z) * m.pi"]), setup)
    with pytest.raises(UsageError, match="name 'x' is not defined"):
        check_names(parse_statements(["x"]), setup)  # a setup replaces the default x, y
    check_names(parse_statements(["anything"]), "from math import *")  # unknowable: no check
    with pytest.raises(UsageError, match="--setup 'x = \\(': syntax error"):
        setup_names("x = (")


def test_statement_function_evaluates_over_the_namespace():
    namespace = {"x": 3, "n": 4}
    fn = statement_function(Statement(1, "x * n"), namespace)
    assert fn() == 12
    namespace["x"] = 5
    assert fn() == 20


def test_a_crossover_across_shapes_of_several_varying_dimensions_names_the_shapes():
    def shaped(size: int, ratio: float, shape: tuple[int, ...]) -> Row:
        verdict = "faster" if ratio < 0.95 else "slower" if ratio > 1.05 else "same"
        return Row(
            "cpu", "float32", size, "b", "a", "ok", ratio=ratio, verdict=verdict, shape=shape
        )

    square = [shaped(n * n, r, (n, n)) for n, r in ((64, 0.5), (128, 0.9), (256, 2.0))]
    (crossover,) = find_crossovers(square)
    assert crossover.shapes == ((128, 128), (256, 256))
    text = crossover.describe()
    assert "faster up to shape 128x128, slower from shape 256x256" in text
    assert "elements" not in text
    flat = [shaped(n, r, (n,)) for n, r in ((4096, 0.5), (16384, 0.9), (65536, 2.0))]
    (crossover,) = find_crossovers(flat)
    assert crossover.shapes is None and "elements" in crossover.describe()
