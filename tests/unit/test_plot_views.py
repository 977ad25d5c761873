"""The plot API and the roofline numbers on results, from synthetic rows and profiles."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from benchbench.analysis.curves import with_run
from benchbench.core.errors import NotFoundError, UsageError
from benchbench.machine.probe import CacheLevel, OsCache, Profile
from benchbench.views.plot import roofline_figure, save_figure, throughput_figure
from benchbench.views.results import NO_PROFILE_NOTE, results_grid, with_roofline
from tests.unit.test_curves import curve_rows

MIB = 1 << 20


def profile() -> Profile:
    curve = tuple((4096 * 4**k, bw) for k, bw in enumerate([40e9, 40e9, 40e9, 20e9, 10e9, 10e9]))
    return Profile(
        device="cpu",
        threads=2,
        bandwidth={"read": curve, "write": curve, "copy": curve},
        cache_levels=(CacheLevel(1 * MIB, MIB // 2, 2 * MIB, 40e9, 20e9),),
        os_caches=(OsCache(2, "Unified", MIB),),
        peak_flop_per_s={"float32": 100e9},
        memory_bytes_per_s={"read": 10e9, "write": 10e9, "copy": 10e9},
        cache_bytes_per_s={"read": 40e9, "write": 40e9, "copy": 40e9},
        timer_resolution_s=1e-9,
        timer_observed_resolution_s=1e-7,
        timer_overhead_s=1.5e-7,
        duration_s=1.0,
    )


def rows() -> list[dict[str, object]]:
    out = curve_rows(1e-6, 1e9, variant="cheap") + curve_rows(2e-5, 1e10, variant="fast")
    out += curve_rows(3e-6, 5e9, workload="add", variant="torch.add")
    return out


def curve_lines(figure: Figure) -> list[list[str]]:
    return [
        [str(line.get_label()) for line in ax.get_lines() if line.get_gid() == "curve"]
        for ax in figure.axes
    ]


def test_throughput_figure_has_one_subplot_per_workload_and_one_line_per_curve() -> None:
    figure = throughput_figure(rows(), profile=profile())
    assert isinstance(figure, Figure)
    assert curve_lines(figure) == [["cheap", "fast"], ["torch.add"]]
    for ax in figure.axes:
        legend = ax.get_legend()
        assert legend is not None
        texts = [t.get_text() for t in legend.get_texts()]
        assert any("main-memory bandwidth 10 GB/s" in t for t in texts)  # the probe's ceiling
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        assert "bytes" in ax.get_xlabel() and "GB/s" in ax.get_ylabel()
    sqrt_ax = figure.axes[0]
    notes = [t.get_text() for t in sqrt_ax.texts]
    assert any("cache edge 1 MiB (probe)" in t for t in notes)
    assert any("fast overtakes cheap" in t.get_text() for t in sqrt_ax.texts)


def test_workload_filter_and_by_dtype_colour_lines() -> None:
    data = rows() + curve_rows(1e-6, 1e9, variant="cheap", dtype="float64")
    figure = throughput_figure(data, by="dtype", workloads=["sqrt"], metric="time")
    (labels,) = curve_lines(figure)
    assert labels == ["float32 (cheap)", "float32 (fast)", "float64 (cheap)"]
    assert "time per call" in figure.axes[0].get_ylabel()


def test_two_runs_by_environment_get_one_line_each_with_readable_names() -> None:
    data = with_run({"id": "run-a", "environment_id": "env-1"}, curve_rows(1e-6, 1e9))
    data += with_run({"id": "run-b", "environment_id": "env-2"}, curve_rows(1e-6, 2e9))
    names = {"env-1": "laptop", "env-2": "server", "run-a": "a", "run-b": "b"}
    figure = throughput_figure(data, by="environment", names=names)
    assert curve_lines(figure) == [["laptop (run a)", "server (run b)"]]


def test_cache_markers_fall_back_to_the_os_sizes() -> None:
    figure = throughput_figure(rows(), os_caches={"L2": MIB, "L3": 32 * MIB})
    notes = [t.get_text() for t in figure.axes[0].texts]
    assert any("L2 1 MiB (OS)" in t for t in notes)


def test_unknown_workload_names_the_ones_present() -> None:
    with pytest.raises(NotFoundError, match=r"'nope'.*workloads there: sqrt, add"):
        throughput_figure(rows(), workloads=["nope"])
    with pytest.raises(UsageError, match="--by"):
        throughput_figure(rows(), by="colour")


def test_roofline_figure_draws_points_and_roofs() -> None:
    figure = roofline_figure(rows(), profile=profile())
    (ax,) = figure.axes
    assert len([ln for ln in ax.get_lines() if ln.get_gid() == "curve"]) == 3
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("roof: main-memory bandwidth" in t for t in texts)
    assert any("float32 matmul peak 100 GFLOP/s" in t for t in texts)


def test_save_figure_by_extension(tmp_path) -> None:
    figure = throughput_figure(rows())
    for name, magic in (("a.png", b"\x89PNG"), ("a.svg", b"<?xml"), ("a.pdf", b"%PDF")):
        assert save_figure(figure, tmp_path / name).read_bytes().startswith(magic)
    with pytest.raises(UsageError, match=r"\.gif"):
        save_figure(figure, tmp_path / "a.gif")


def test_percent_of_peak_against_the_ceiling_that_applies() -> None:
    base = {"status": "ok", "device": "cpu", "dtype": "float32"}
    memory_bound = {
        **base,
        "bytes_per_call": 64 * MIB,  # beyond the curve's 20 MiB: main memory, 10 GB/s
        "flop_per_call": 8 * MIB,
        "bytes_per_s": 5e9,
        "flop_per_s": 0.625e9,
    }
    compute_bound = {
        **base,
        "bytes_per_call": 3e6,
        "flop_per_call": 2e9,
        "bytes_per_s": 1e9,
        "flop_per_s": 25e9,
    }
    no_model = {**base, "bytes_per_call": None, "flop_per_call": None}
    out = with_roofline([memory_bound, compute_bound, no_model], {"cpu": profile()})
    assert out[0]["percent_of_peak"] == pytest.approx(50.0)
    assert out[0]["ceiling"]["kind"] == "memory" and out[0]["ceiling"]["value"] == pytest.approx(
        10e9
    )
    assert out[1]["percent_of_peak"] == pytest.approx(25.0)
    assert out[1]["ceiling"]["kind"] == "compute"
    assert out[2]["percent_of_peak"] is None and out[2]["ceiling"] is None
    assert with_roofline([memory_bound], {})[0]["percent_of_peak"] is None


def test_results_table_says_how_to_get_a_profile() -> None:
    assert results_grid([], profiled=False).notes == (NO_PROFILE_NOTE,)
    assert results_grid([], profiled=True).notes == ()


def test_a_named_axis_reads_as_name_value_in_the_legend() -> None:
    data = [
        {**row, "params": {"mode": mode}}
        for mode in ("fwd", "bwd")
        for row in curve_rows(1e-6, 1e9, variant="cheap")
    ]
    figure = throughput_figure(data, metric="time")
    assert curve_lines(figure) == [["cheap (mode=fwd)", "cheap (mode=bwd)"]]
