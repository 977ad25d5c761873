"""Ratio CI, verdict, crossover and statement checks of `benchbench time`, on synthetic data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchbench.analysis.variants import (
    RatioEstimate,
    Row,
    crossover_sizes,
    find_crossovers,
    ratio_of_medians,
    rows_from_results,
    verdict,
)
from benchbench.core.errors import UsageError
from benchbench.core.values import Point, Result
from benchbench.measure.statements import (
    Statement,
    check_names,
    parse_statements,
    setup_names,
    statement_function,
)


def _drifting_pair(ratio: float, rounds: int = 60, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved series sharing a strong per-round drift (x1 to x3), 1 % own noise."""
    rng = np.random.default_rng(seed)
    drift = rng.uniform(1.0, 3.0, rounds)
    ref = 1e-6 * drift * rng.normal(1.0, 0.01, rounds)
    var = ratio * 1e-6 * drift * rng.normal(1.0, 0.01, rounds)
    return ref, var


def test_ratio_is_the_ratio_of_medians_and_its_ci_holds_it():
    ref = [1.0, 2.0, 3.0, 4.0, 5.0]
    var = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
    estimate = ratio_of_medians(ref, var)
    assert estimate.ratio == pytest.approx(np.median(var) / np.median(ref))  # 8 / 3
    assert not estimate.paired  # unequal counts cannot be paired
    assert estimate.ci_low <= estimate.ratio <= estimate.ci_high


def test_paired_bootstrap_cancels_drift_shared_by_a_round():
    ref, var = _drifting_pair(1.2)
    paired = ratio_of_medians(ref, var, paired=True)
    independent = ratio_of_medians(ref, var, paired=False)
    assert paired.paired and not independent.paired
    assert paired.ci_low < 1.2 < paired.ci_high
    # The drift spans x3; paired rounds see only the 1 % noise, independent ones see all.
    assert paired.ci_high - paired.ci_low < 0.05
    assert independent.ci_high - independent.ci_low > 4 * (paired.ci_high - paired.ci_low)


def test_ratio_ci_is_reproducible_and_rejects_too_few_samples():
    ref, var = _drifting_pair(0.8)
    assert ratio_of_medians(ref, var) == ratio_of_medians(ref, var)
    with pytest.raises(ValueError, match=">= 2 samples"):
        ratio_of_medians([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="equal counts"):
        ratio_of_medians([1.0, 2.0], [1.0, 2.0, 3.0], paired=True)


@pytest.mark.parametrize(
    ("ratio", "low", "high", "expected"),
    [
        (0.80, 0.78, 0.82, "faster"),
        (1.25, 1.20, 1.30, "slower"),
        (0.97, 0.96, 0.98, "same"),  # significant, but smaller than the 5 % minimum effect
        (1.04, 1.02, 1.06, "same"),
        (0.80, 0.60, 1.01, "same"),  # large but the CI includes 1
        (1.30, 0.99, 1.60, "same"),
        (0.95, 0.94, 0.96, "faster"),  # 0.95 < 1 / 1.05 = 0.9524
        (1.05, 1.04, 1.06, "same"),  # not above 1.05
    ],
)
def test_verdict_rule(ratio, low, high, expected):
    assert verdict(RatioEstimate(ratio, low, high, True)) == expected


def test_minimum_effect_is_a_parameter():
    estimate = RatioEstimate(0.97, 0.96, 0.98, True)
    assert verdict(estimate, min_effect=0.01) == "faster"
    assert verdict(estimate, min_effect=0.05) == "same"


def test_crossover_interpolates_in_log_space_between_adjacent_sizes():
    sizes = [2**10, 2**12, 2**14, 2**16]
    ratios = [0.5, 0.8, 1.25, 2.0]
    found = crossover_sizes(sizes, ratios, ["faster", "faster", "slower", "slower"])
    assert len(found) == 1
    size, below, above, between = found[0]
    # log(0.8) = -log(1.25): the crossing is halfway between 2^12 and 2^14 in log size.
    assert size == pytest.approx(2**13)
    assert (below, above, between) == ("faster", "slower", (2**12, 2**14))


def test_crossover_passes_over_same_sizes_and_finds_the_sign_change():
    sizes = [1000, 2000, 4000, 8000, 16000]
    ratios = [1.5, 1.02, 0.99, 0.97, 0.6]
    verdicts = ["slower", "same", "same", "same", "faster"]
    ((size, below, above, between),) = crossover_sizes(sizes, ratios, verdicts)
    assert (below, above, between) == ("slower", "faster", (1000, 16000))
    t = math.log(1.02) / (math.log(1.02) - math.log(0.99))
    assert size == pytest.approx(math.exp(math.log(2000) + t * math.log(2)))
    assert 2000 < size < 4000


def test_no_crossover_without_significance_on_both_sides():
    sizes = [1, 2, 4, 8]
    assert crossover_sizes(sizes, [0.5, 0.9, 1.2, 1.3], ["faster", "same", "same", "same"]) == []
    assert crossover_sizes(sizes, [0.5, 0.6, 0.7, 0.8], ["faster"] * 4) == []
    assert crossover_sizes(sizes, [1.0] * 4, ["same"] * 4) == []


def test_crossover_sorts_sizes_given_in_any_order():
    found = crossover_sizes([4096, 1024], [2.0, 0.5], ["slower", "faster"])
    assert [(round(f[0]), f[1], f[2]) for f in found] == [(2048, "faster", "slower")]


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
