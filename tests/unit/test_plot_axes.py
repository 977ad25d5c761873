"""The x-axis of fits, crossovers and plots, the plot's unit, its ticks and crossover notes
(synthetic rows: no clock)."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.text import Annotation

from benchbench.analysis.axes import axis_of, work_unit_of
from benchbench.analysis.curves import analyze, curves_from_rows
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy
from benchbench.suite.declare import Suite, Variant
from benchbench.views.fits import fits_grid, fits_json
from benchbench.views.plot import throughput_figure
from benchbench.views.tables import csv_text
from tests.unit.test_curves import curve_rows, row


def matmul_rows(variant: str, t0: float, flop_rate: float, *, dims=None, **kw):
    """Square ``(n, n, n)`` matmuls: size n³ (a product), 2n³ FLOPs, 3n² float32 bytes."""
    out = []
    for n in dims or (32, 64, 128, 256, 512):
        flop = 2.0 * n**3
        r = row(n**3, t0 + flop / flop_rate, workload="mm", variant=variant, **kw)
        r.update(shape=[n, n, n], flop_per_call=flop, bytes_per_call=12.0 * n * n)
        out.append(r)
    return out


def test_a_one_dimensional_size_is_read_in_elements() -> None:
    (curve,) = curves_from_rows(curve_rows(1e-6, 1e9))
    axis = axis_of(curve)
    assert axis.name == "elements" and axis.values == tuple(map(float, curve.sizes))


def test_a_product_size_is_read_along_the_work_model_and_crossovers_say_flops() -> None:
    rows = matmul_rows("slow start", 1e-4, 4e10) + matmul_rows("fast start", 1e-7, 1e10)
    analysis = analyze(rows)
    assert {axis_of(c).name for c in analysis.curves} == {"flop"}
    (crossing,) = analysis.crossovers
    assert crossing.axis == "flop"
    flops = [2.0 * n**3 for n in (32, 64, 128, 256, 512)]
    assert flops[0] < crossing.size < flops[-1]
    grid = csv_text(fits_grid(analysis))
    assert "FLOP per call" in grid and "n≈" not in grid
    assert fits_json(analysis)["crossovers"][0]["axis"] == "flop"


def test_a_product_of_unrelated_dimensions_gets_no_fit_and_says_why_once() -> None:
    # (m, k, n) whose bytes per call do not grow with the size: no meaningful axis.
    shapes = [(64, 64, 64), (1024, 1, 1024), (128, 128, 128), (256, 64, 256)]
    rows = []
    for variant, t0 in (("a", 1e-6), ("b", 5e-6)):
        for m, k, n in shapes:
            r = row(
                m * k * n, t0 + m * k * n * (1e-9 if variant == "a" else 1e-10), variant=variant
            )
            r.update(shape=[m, k, n], bytes_per_call=4.0 * (m * k + k * n + m * n))
            r.update(flop_per_call=None, items_per_call=None)
            rows.append(r)
    analysis = analyze(rows)
    assert all(f.fit is None for f in analysis.fits)
    assert analysis.crossovers == ()
    reason = analysis.fits[0].reason or ""
    assert "product of varying dimensions (dim0 x dim1 x dim2)" in reason
    assert "x=" in reason
    grid = csv_text(fits_grid(analysis))
    assert grid.count("product of varying dimensions") == 1
    assert "no fit (as above)" in grid


def declared_rows(variant: str, t0: float, per_k: float) -> list[dict[str, object]]:
    """``(64, k, 64)`` with ``k`` a parameter the workload declares as its x-axis."""
    out = []
    for k in (16, 64, 256, 1024, 4096):
        r = row(64 * k * 64, t0 + k * per_k, workload="mm", variant=variant)
        r.update(shape=[64, k, 64], params={"k": k}, extra={"x": {"name": "k", "value": k}})
        out.append(r)
    return out


def test_a_declared_parameter_axis_joins_its_values_into_one_curve() -> None:
    analysis = analyze(declared_rows("a", 1e-6, 1e-8) + declared_rows("b", 1e-5, 1e-9))
    assert [len(c.points) for c in analysis.curves] == [5, 5]
    assert {axis_of(c).name for c in analysis.curves} == {"k"}
    (crossing,) = analysis.crossovers
    assert crossing.axis == "k" and 16 < crossing.size < 4096
    assert "from k≈" in csv_text(fits_grid(analysis))
    figure = throughput_figure(declared_rows("a", 1e-6, 1e-8) + declared_rows("b", 1e-5, 1e-9))
    assert figure.axes[0].get_xlabel().startswith("k ")


def test_the_plot_unit_follows_the_work_model_not_the_timings() -> None:
    # Times linear in the bytes (so a fit prefers bytes): the unit is still FLOP/s.
    rows = []
    for n in (32, 64, 128, 256, 512):
        r = row(n**3, 1e-6 + 12.0 * n * n / 1e9, workload="mm")
        r.update(shape=[n, n, n], flop_per_call=2.0 * n**3, bytes_per_call=12.0 * n * n)
        rows.append(r)
    assert analyze(rows).fits[0].fit is not None
    assert analyze(rows).fits[0].fit.work_unit == "bytes"  # type: ignore[union-attr]
    assert work_unit_of(curves_from_rows(rows)) == "flop"
    assert "GFLOP/s" in throughput_figure(rows).axes[0].get_ylabel()
    # An elementwise op declares FLOPs too, in proportion to its bytes: GB/s.
    elementwise = curve_rows(1e-6, 1e9)
    assert work_unit_of(curves_from_rows(elementwise)) == "bytes"
    assert "GB/s" in throughput_figure(elementwise).axes[0].get_ylabel()


def visible_tick_labels(figure: Figure) -> list[list[str]]:
    figure.canvas.draw()
    out = []
    for ax in figure.axes:
        lo, hi = sorted(ax.get_ylim())
        ticks = [
            t.label1.get_text()
            for t in (*ax.yaxis.get_major_ticks(), *ax.yaxis.get_minor_ticks())
            if lo <= t.get_loc() <= hi and t.label1.get_visible() and t.label1.get_text()
        ]
        out.append(ticks)
    return out


def test_every_panel_has_more_than_one_y_tick_label() -> None:
    # Throughputs spanning 3.2-8 GB/s (under a decade), then 4.1-4.4 (no minor tick there).
    wide = [row(n, 8.0 * n / (3.2e9 + 0.8e9 * k)) for k, n in enumerate(SIZES_7)]
    narrow = [
        row(n, 8.0 * n / (4.1e9 + 0.05e9 * k), workload="narrow") for k, n in enumerate(SIZES_7)
    ]
    labels = visible_tick_labels(throughput_figure(wide + narrow))
    assert all(len(panel) >= 2 for panel in labels), labels
    time_labels = visible_tick_labels(throughput_figure(narrow, metric="time"))
    assert len(time_labels[0]) >= 2, time_labels


SIZES_7 = [2**k for k in range(12, 19)]


def test_crossover_notes_name_the_dtype_and_keep_clear_of_the_axis_titles() -> None:
    rows = curve_rows(1e-6, 1e9, variant="cheap") + curve_rows(2e-5, 1e10, variant="fast")
    figure = throughput_figure(rows)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = figure.axes[0]
    notes = [c for c in ax.get_children() if isinstance(c, Annotation)]
    assert notes, "a crossover note"
    for note in notes:
        assert note.get_text().startswith("crossover (float32) at n≈")
        assert "fast overtakes cheap" in note.get_text()
        box = note.get_window_extent(renderer)
        for title in (ax.xaxis.label, ax.yaxis.label, ax.title):
            assert not box.overlaps(title.get_window_extent(renderer)), title.get_text()
        inside = ax.get_window_extent(renderer)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1
        assert inside.y0 <= box.y0 and box.y1 <= inside.y1


def test_a_declared_shape_dimension_is_recorded_with_every_point() -> None:
    suite = Suite("t")
    workload = suite.workload(
        "mm",
        setup=lambda ctx: ctx.uniform(0.5, 1.5, shape=ctx.shape[:2]),
        variants=[Variant("sum", lambda a: a.sum())],
        sizes=[(4, 8, 2), (4, 16, 2)],
        x=1,
        reference=lambda a: a.sum(),
    )
    point = workload.points()[1]
    assert workload.x_of(point) == ("dim1", 16.0)
    result = measure_point(workload, point, Options(policy=Policy(max_time_s=0.01)))
    assert result.status == "ok", result.reason
    assert result.extra["x"] == {"name": "dim1", "value": 16.0}
