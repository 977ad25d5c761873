"""benchbench.bench and benchbench.compare: bad input is a clear error; results read well."""

from __future__ import annotations

import pytest
import torch

import benchbench
from benchbench.api import IN_PROCESS, BenchError, Measurement


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
