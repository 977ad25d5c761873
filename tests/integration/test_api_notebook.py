"""A notebook shows bench()'s and compare()'s results as tables: their ``_repr_html_``, put
in an output cell as Jupyter puts it, rendered by headless Chromium."""

from __future__ import annotations

import pytest
import torch

import benchbench

pytestmark = pytest.mark.browser


def test_a_notebook_cell_renders_the_measurement_and_the_verdict(browser, tmp_path):
    x = torch.rand(4096) + 0.5
    a = benchbench.bench(lambda x: x.sqrt(), x, name="sqrt", budget_s=0.05, items=x.numel())
    b = benchbench.bench(lambda x: 1 / x.sqrt(), x, name="1 / sqrt", budget_s=0.05)
    cells = [a._repr_html_(), benchbench.compare(a, b)._repr_html_()]
    page = tmp_path / "notebook.html"
    page.write_text(
        "<!doctype html><meta charset='utf-8'><title>notebook</title><body>"
        + "".join(f"<div class='output_html rendered_html'>{c}</div>" for c in cells)
    )
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(page.as_uri())
    tables = tab.locator("table")
    assert tables.count() == 2 and not errors
    first = tables.nth(0).inner_text()
    assert "sqrt on cpu" in first and "median" in first and "items/s" in first
    assert "(in-process)" in first
    second = tables.nth(1).inner_text()
    assert "verdict" in second and "ratio b / a" in second
    assert tables.nth(0).bounding_box()["height"] > 50  # laid out, not collapsed
    tab.close()
