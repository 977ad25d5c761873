"""benchbench.bench and benchbench.compare: bad input is a clear error; results read well."""

from __future__ import annotations

import pytest
import torch

import benchbench
from benchbench.api import IN_PROCESS, BenchError, Measurement
from benchbench.core.errors import UsageError


def test_a_non_callable_is_a_value_error_that_says_what_to_pass():
    x = torch.ones(8)
    with pytest.raises(
        ValueError, match=r"needs a callable first, got Tensor.*bench\(torch.sqrt, x\)"
    ):
        benchbench.bench(torch.sqrt(x))


def test_an_absent_device_is_refused_before_anything_runs():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BenchError, match="'cuda' is not available here"):
        benchbench.bench(torch.sqrt, torch.ones(8), device="cuda")
    with pytest.raises(BenchError, match="'gpu' is not a device name"):
        benchbench.bench(torch.sqrt, torch.ones(8), device="gpu")


def test_a_lambda_is_measured_in_process_and_says_so():
    x = torch.rand(1024) + 0.5
    m = benchbench.bench(lambda x: x * 2, x, rounds=3, budget_s=0.02, items=x.numel())
    assert m.isolation == IN_PROCESS and m.processes == 1
    assert m.ci_low_s <= m.median_s <= m.ci_high_s and m.samples == len(m.per_call_s) >= 1
    assert m.items_per_s == pytest.approx(1024 / m.median_s)
    text = repr(m)
    assert text.startswith("<Measurement <lambda> on cpu: median ") and "(in-process)" in text
    assert "items/s" in text
    page = m._repr_html_()
    assert page.startswith("<table>") and "<caption>&lt;lambda&gt; on cpu</caption>" in page


def test_compare_gives_compare_s_verdict_and_refuses_other_values():
    def measurement(value: float, name: str) -> Measurement:
        samples = tuple(value * (1 + 0.001 * (i % 5)) for i in range(40))
        return Measurement(name, "cpu", samples, (), IN_PROCESS, True)

    a, b = measurement(1e-3, "a"), measurement(2e-3, "b")
    found = benchbench.compare(a, b)
    assert found.verdict == "slower" and found.ratio == pytest.approx(2, rel=0.01)
    assert repr(found).startswith("<Comparison b vs a: slower, ratio 2.0")
    assert benchbench.compare(a, a).verdict == "not significant"
    assert "<th style='text-align:left'>verdict</th>" in found._repr_html_()
    with pytest.raises(ValueError, match="must be a Measurement"):
        benchbench.compare(a, 1.0)  # type: ignore[arg-type]


def test_compare_variants_takes_time_s_sizes_and_the_best_device():
    from benchbench.variants import _shapes, best_device

    assert _shapes("64x1024..2048") == [(64, 1024), (64, 2048)]
    assert _shapes([4096, (8, 8)]) == [(8, 8), (4096,)]
    with pytest.raises(UsageError, match="at least 1"):
        _shapes([0])
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and torch.backends.mps.is_available():
        expected = "mps"
    assert best_device() == expected
    frame = benchbench.compare_variants(
        {"sqrt": torch.sqrt, "method": lambda x: x.sqrt()},
        sizes=[(8, 64)],
        budget_s=0.01,
        progress=False,
    )
    assert set(frame["device"]) == {expected} and set(frame["size"]) == {512}
