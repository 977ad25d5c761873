"""The second GPU acceptance without a GPU: the driver (groups, --only, --list, rows
written as they finish with the GPU's state), the datasheet lookup and its clock
scaling, the agreement table and every row's verdict, on fake numbers. No GPU figure
is claimed here (docs/gpu.md says what ran on hardware)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_agreement  # noqa: E402
import gpu_datasheet  # noqa: E402
import gpu_driver  # noqa: E402
import gpu_rows2 as rows  # noqa: E402
from gpu_driver import FAIL, NOT_AVAILABLE, PASS, Row, Spec  # noqa: E402

SCRIPTS = [ROOT / "benchmarks" / "gpu_acceptance.py", ROOT / "benchmarks" / "gpu_acceptance2.py"]
US = 1e-6


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


# -- the scripts' command line ---------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_list_shows_every_row_and_each_group_fits_five_minutes(script):
    done = _run(script, "--list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["row", "group", "limit", "checks"]
    totals = [int(x.split()[-2]) for x in lines if x.startswith("group ")]
    assert totals and all(t <= gpu_driver.GROUP_LIMIT_S for t in totals), lines[-4:]
    rows_listed = [x for x in lines[1:] if not x.startswith("group ")]
    assert len(rows_listed) >= 8


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_the_second_script_says_so_and_exits_0():
    done = _run(SCRIPTS[1], "--group", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no CUDA device: torch.cuda.is_available() is False")
    assert "Traceback" not in done.stderr


def test_an_unknown_row_or_group_is_a_usage_error_naming_it():
    done = _run(SCRIPTS[1], "--only", "probe,prob")
    assert done.returncode == 2
    assert "unknown row 'prob'" in done.stderr and "agreement" in done.stderr
    done = _run(SCRIPTS[1], "--group", "9")
    assert done.returncode == 2 and "no row in group 9" in done.stderr


def _specs() -> dict[str, Spec]:
    return {
        "a": Spec(lambda device: [Row("a", PASS, f"on {device}")], 5, 1, "a works"),
        "b": Spec(lambda _d: [Row("b", FAIL, "x | y")], 5, 2, "b fails"),
        "c": Spec(lambda _d: [Row("c", NOT_AVAILABLE, "no triton")], 5, 2, "c n/a"),
    }


def test_select_by_group_or_names_in_the_scripts_order():
    specs = _specs()
    assert list(gpu_driver.select(specs, None, 2)) == ["b", "c"]
    assert list(gpu_driver.select(specs, "c,a", None)) == ["a", "c"]
    assert list(gpu_driver.select(specs, None, None)) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="unknown row 'd'"):
        gpu_driver.select(specs, "a,d", None)


class FakeReader:
    """NvmlReader's surface: each sample a reading of a busy GPU."""

    def __init__(self) -> None:
        self.calls = 0
        self.enough = threading.Event()

    def sample(self) -> dict[str, float | None]:
        self.calls += 1
        if self.calls >= 3:
            self.enough.set()
        return {"gpu0_sm_clock_mhz": 1980.0 - 10 * self.calls, "gpu0_temp_c": 50.0 + self.calls,
                "gpu0_power_w": 400.0, "gpu0_mem_clock_mhz": None}  # fmt: skip

    def throttle_reasons(self) -> dict[int, tuple[str, ...]]:
        return {0: ("sw_power_cap",)}


def test_main_writes_each_row_as_it_finishes_with_the_gpu_state(monkeypatch, capsys, tmp_path):
    reader = FakeReader()

    def slow_enough(_device):
        assert reader.enough.wait(10), "the sampler never read the GPU"
        return [Row("a", PASS, "sampled")]

    specs = {**_specs(), "a": Spec(slow_enough, 5, 1, "")}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "Fake GPU")
    monkeypatch.setattr(gpu_driver, "nvml_reader", lambda _torch, _device: reader)
    code = gpu_driver.main(
        ["--out", str(tmp_path), "--group", "1"], specs, description="d", name="t", heading="T"
    )
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("T on Fake GPU, torch ") and out[1] == "plan: 1 rows, at most 5 s"
    (record,) = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert record["name"] == "a" and record["status"] == PASS
    gpu = record["gpu"]
    assert gpu["samples"] >= 3 and gpu["reasons"] == ["sw_power_cap"]
    assert gpu["sm_mhz"]["max"] == 1970.0 and gpu["power_w"]["median"] == 400.0
    assert "mem_mhz" not in gpu  # never read: left out, not zero
    table = (tmp_path / "t.md").read_text()
    assert "| a | pass | sampled |" in table and "reasons sw_power_cap" in table
    assert gpu_driver.main(["--only", "b,c"], specs, description="d", name="t", heading="T") == 1


def test_the_summary_escapes_pipes_and_says_when_nvml_read_nothing():
    record = {"name": "b", "status": FAIL, "numbers": "x | y", "row_s": 1.2, "gpu": {}}
    table = gpu_driver.summary_markdown("T", [record])
    assert "| b | FAIL | x \\| y | 1 | no NVML readings |" in table
    state = gpu_driver.summarize_gpu(
        [{"gpu0_sm_clock_mhz": 1980.0}, {"gpu0_sm_clock_mhz": 1755.0}], ["gpu_idle"]
    )
    assert gpu_driver.gpu_text(state) == "SM 1868 MHz (1755-1980), reasons gpu_idle"


# -- the datasheet ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "sms", "board"),
    [
        ("NVIDIA H100 80GB HBM3", 132, "H100 SXM"),
        ("NVIDIA H100 PCIe", 114, "H100 PCIe"),
        ("NVIDIA H100 NVL", 132, "H100 NVL"),
        ("NVIDIA H200", 132, "H200 SXM"),
        ("NVIDIA H200 NVL", 132, "H200 NVL"),
    ],
)
def test_the_datasheet_is_found_by_the_name_torch_gives(name, sms, board):
    sheet, why = gpu_datasheet.lookup(name, sms)
    assert sheet is not None and sheet.board == board and why == ""


def test_no_datasheet_for_an_unknown_board_or_a_slice_of_one():
    sheet, why = gpu_datasheet.lookup("NVIDIA A100-SXM4-80GB", 108)
    assert sheet is None and "no datasheet for 'NVIDIA A100-SXM4-80GB'" in why
    sheet, why = gpu_datasheet.lookup("NVIDIA H100 80GB HBM3", 16)  # a MIG slice
    assert sheet is None and "16 SMs, the H100 SXM datasheet 132" in why


def test_each_datasheet_figure_is_its_sms_times_a_hopper_sm_at_a_real_clock():
    # A wrong per-SM rate or a sparse figure taken for a dense one shows as a clock no
    # Hopper board runs at (the boost clocks are 1620-1980 MHz).
    for sheet in gpu_datasheet.BOARDS:
        for kind in gpu_datasheet.HOPPER_FLOP_PER_CLOCK:
            assert 1500 <= sheet.quoted_clock_mhz(kind) <= 1990, (sheet.board, kind)
    sxm, _ = gpu_datasheet.lookup("NVIDIA H100 80GB HBM3")
    assert sxm is not None
    assert round(sxm.quoted_clock_mhz("bfloat16")) == 1830
    assert round(sxm.quoted_clock_mhz("float32")) == 1980
    assert sxm.at_clock("bfloat16", 1980) == pytest.approx(132 * 4096 * 1.98e9)


def _figures(scale: float = 0.85, sm_mhz: float | None = 1980) -> rows.ProbeFigures:
    sheet, _ = gpu_datasheet.lookup("NVIDIA H100 80GB HBM3")
    assert sheet is not None
    return rows.ProbeFigures(
        bandwidth_bytes_per_s=0.88 * sheet.memory_bytes_per_s,
        flop_per_s={k: scale * sheet.at_clock(k, 1980) for k in ("float32", "tf32", "bfloat16")},
        sm_mhz=sm_mhz,
    )


def test_probe_figures_beside_the_datasheet_at_the_clock_nvml_read():
    sheet, _ = gpu_datasheet.lookup("NVIDIA H100 80GB HBM3")
    found = rows.datasheet_rows(_figures(), sheet, "")
    assert [r.status for r in found] == [PASS] * 4
    assert "2948 GB/s vs H100 SXM 3350" in found[0].numbers
    assert "at 1980 MHz (H100 SXM: 989.4 at 1830 MHz)" in found[3].numbers
    # Above the datasheet at that clock: the probe (or the clock read) is wrong.
    assert [r.status for r in rows.datasheet_rows(_figures(1.2), sheet, "")][1:] == [FAIL] * 3
    # Read at a lower clock, the same figures are above what that clock allows.
    assert rows.datasheet_rows(_figures(0.9, 1500), sheet, "")[3].status == FAIL
    no_clock = rows.datasheet_rows(_figures(sm_mhz=None), sheet, "")
    assert no_clock[1].status == NOT_AVAILABLE and "no SM clock" in no_clock[1].numbers
    unknown = rows.datasheet_rows(_figures(), None, "no datasheet for 'X'")
    assert {r.status for r in unknown} == {NOT_AVAILABLE}


# -- the agreement table ---------------------------------------------------------------


def _cells(off: int, do_bench: bool = True) -> list[gpu_agreement.Cell]:
    cells = []
    for i in range(30):
        ratio = 1.08 if i < off else 1.01
        cells.append(
            gpu_agreement.Cell(f"op{i // 3}", f"2^{24 + i % 3}", ratio * 50 * US,
                               50 * US if do_bench else None, 49 * US, 50 * US)
        )  # fmt: skip
    return cells


def test_agreement_passes_at_27_of_30_cells_and_names_each_disagreement():
    passed, numbers = gpu_agreement.verdict(_cells(3))
    assert passed and numbers.startswith("cold within ±5% of do_bench at 27/30 cells (needs 27)")
    assert "outside: op0 2^24 1.080, op0 2^25 1.080, op0 2^26 1.080" in numbers
    assert "warm / Timer median 0.980" in numbers
    assert not gpu_agreement.verdict(_cells(4))[0]
    assert not gpu_agreement.verdict(_cells(0, do_bench=False))[0]


def test_agreement_markdown_has_a_row_per_cell_and_bolds_the_disagreements():
    table = gpu_agreement.markdown(_cells(1), "### Agreement")
    lines = table.splitlines()
    assert lines[0] == "### Agreement" and len(lines) == 4 + 30
    assert lines[4] == "| op0 | 2^24 | 54.0 | 50.0 | **1.080** | 49.0 | 50.0 | 0.980 |"
    assert "| op0 | 2^25 | 50.5 | 50.0 | 1.010 |" in lines[5]
    no_triton = gpu_agreement.markdown(_cells(0, do_bench=False), "x").splitlines()[4]
    assert "| — | — |" in no_triton


def test_the_table_is_10_ops_at_3_device_bound_sizes():
    ops = gpu_agreement.ops(torch)
    assert len(ops) == 10 and all(len(op.sizes) == 3 for op in ops)
    for op in ops:
        for n in op.sizes:
            shapes = op.shapes(n)
            elements = sum(int(torch.Size(s).numel()) for s in shapes)
            # >= 64 MiB through memory, or a matmul of 2048² and more: >= 20 µs a call.
            assert elements * 4 >= 64 * 2**20 or shapes[0][0] >= 2048, (op.name, n)
    assert [gpu_agreement.size_text(ops[-1], n) for n in ops[-1].sizes] == [
        "2048²", "4096²", "8192²"
    ]  # fmt: skip


def test_a_cell_converts_do_bench_milliseconds_and_runs_each_op(monkeypatch):
    # On the CPU at a small size: what the cell is made of, not how fast anything is.
    op = gpu_agreement.Op("torch.add", torch.add, gpu_agreement._two, (1024,))
    seen = []

    def engine(op_, n, cache):
        seen.append((op_.name, n, cache))
        return {"cold": 10 * US, "warm": 8 * US}[cache]

    def do_bench(fn, return_mode):
        assert return_mode == "median" and fn().shape == (1024,)
        return 0.0125  # milliseconds, as triton returns

    cell = gpu_agreement.measure_cell(torch, op, 1024, "cpu", engine, do_bench)
    assert seen == [("torch.add", 1024, "cold"), ("torch.add", 1024, "warm")]
    assert cell.do_bench_s == pytest.approx(12.5 * US) and cell.cold_ratio == pytest.approx(0.8)
    assert cell.size == "2^10" and cell.timer_s is not None and cell.timer_s > 0


# -- the rows' verdicts ----------------------------------------------------------------


def test_ab_row():
    assert rows.ab_row(101 * US, 100 * US, 0, 0).status == PASS
    assert rows.ab_row(103 * US, 100 * US, 0, 0).status == FAIL
    assert rows.ab_row(100 * US, 100 * US, 1, 3).status == FAIL


def test_quick_percent_of_peak_never_above_100():
    ok = rows.peak_row([("sqrt 2^24", 88.0), ("matmul 4096", 97.5), ("numpy", None)])
    assert ok.status == PASS and "2 points" in ok.numbers and "97.5 % (matmul 4096)" in ok.numbers
    above = rows.peak_row([("sqrt 2^24", 104.0), ("add", 99.0)])
    assert above.status == FAIL and "1 above 100 %: sqrt 2^24 104 %" in above.numbers
    assert rows.peak_row([("x", None)]).status == NOT_AVAILABLE


def test_two_quick_runs_compare_quiet():
    same = [
        {"label": "a", "mark": "same", "ratio": 1.01},
        {"label": "b", "mark": "not significant", "ratio": 0.99},
    ]
    ok = rows.compare_row([["ok", "ok"], ["ok", "skipped"]], same, 0)
    assert ok.status == PASS and "ratios 0.990-1.010" in ok.numbers
    slower = [*same, {"label": "c", "mark": "slower", "ratio": 1.2}]
    assert rows.compare_row([["ok"], ["ok"]], slower, 3).status == FAIL
    assert rows.compare_row([["ok"], ["error"]], same, 0).status == FAIL
    assert rows.compare_row([["ok"], ["ok"]], [], 0).status == FAIL


def test_breakdown_coverage_between_0_7_and_1_3_on_cuda():
    def breakdown(coverage, device="cuda"):
        return {"capture": "forward", "device": device, "coverage": coverage,
                "sum_s": 900 * US, "whole_s": 1000 * US, "calls": [{}] * 12}  # fmt: skip

    ok = rows.coverage_row("captured", [breakdown(0.9)])
    assert ok.status == PASS and ok.numbers.startswith("forward: coverage 0.90 (sum 900.0 µs")
    assert rows.coverage_row("captured", [breakdown(1.4)]).status == FAIL
    assert rows.coverage_row("captured", [breakdown(None)]).status == FAIL
    assert rows.coverage_row("captured", [breakdown(0.9, "cpu")]).status == FAIL


def _result(workload, mode, median_s, status="ok"):
    return {"workload": workload, "params": {"mode": mode}, "median_s": median_s,
            "status": status, "reason": None if status == "ok" else "crashed"}  # fmt: skip


def test_backward_points_ok_and_a_step_about_its_forward_and_backward():
    step = [_result("linear", "fwd", 100 * US), _result("linear", "bwd", 200 * US)]
    ok = rows.backward_row([*step, _result("linear", "fwd_bwd", 310 * US)])
    assert ok.status == PASS and "(fwd_bwd / (fwd + bwd) 1.03)" in ok.numbers
    assert rows.backward_row([*step, _result("linear", "fwd_bwd", 500 * US)]).status == FAIL
    assert rows.backward_row(step).status == FAIL  # no fwd_bwd point
    failed = rows.backward_row([*step, _result("linear", "fwd_bwd", 0, "error")])
    assert failed.status == FAIL and "linear fwd_bwd: error: crashed" in failed.numbers


def test_the_zoo_on_cuda_skips_only_the_wholes_captured_on_the_cpu():
    reason = "whole 'bert' was captured in float32 on cpu and runs only there"
    whole = {"workload": "bert whole", "status": "skipped", "reason": reason}
    op = {"workload": "bert aten.mm", "status": "ok", "reason": None}
    assert rows.zoo_row([op, op, whole]).status == PASS
    odd = {"workload": "vit aten.gelu", "status": "skipped", "reason": "CUDA is not available"}
    assert rows.zoo_row([op, odd]).status == FAIL
    assert rows.zoo_row([op, {**op, "status": "error", "reason": "crashed"}]).status == FAIL


def test_eager_against_compile_reports_the_compile_time_apart():
    case = rows.CompileCase("bert b8 s128", 2e-3, 1.5e-3, 12.0)
    row = rows.zoo_compile_row([case])
    assert row.status == PASS
    assert row.numbers == (
        "bert b8 s128: eager 2.000 ms, compiled 1.500 ms (x1.33), compile 12.0 s, "
        "pays after 24,000 calls"
    )
    slower = rows.zoo_compile_row([rows.CompileCase("vit b8", 1e-3, 1.1e-3, 9.0)])
    assert slower.status == PASS and "never pays" in slower.numbers
    missing = rows.CompileCase("resnet", 1e-3, None, None, "error: Inductor failed")
    assert rows.zoo_compile_row([case, missing]).status == FAIL


def test_side_stream_flagged_and_the_same_work_on_the_timed_stream_not():
    assert rows.side_stream_row(3.1, 50 * US, 0.0, 250 * US).status == PASS
    assert rows.side_stream_row(0.04, 50 * US, 0.0, 250 * US).status == FAIL  # below 5 %
    assert rows.side_stream_row(None, 50 * US, 0.0, 250 * US).status == FAIL
    assert rows.side_stream_row(3.1, 50 * US, 0.1, 250 * US).status == FAIL
    assert rows.side_stream_row(3.1, 50 * US, None, 250 * US).status == FAIL  # not measured


def test_a_row_past_its_limit_stops_there():
    def stuck(_device):
        time.sleep(30)
        return []

    got, _seconds, state = gpu_driver.run_row(Spec(stuck, 1, 1, ""), "slow", "cuda", None)
    assert got[0].status == FAIL and "ran past its 1 s limit" in got[0].numbers
    assert state == {}  # no NVML reader: no readings, none made up
