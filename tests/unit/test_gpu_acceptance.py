"""benchmarks/gpu_acceptance.py without a GPU: the skip on a machine without CUDA, the
driver end to end with faked measurements (its plan, rows as they finish, the JSON lines
it leaves, a row past its time limit, the exit code), and every row's pass/fail logic
on fake numbers. No GPU number is claimed here: the measurements themselves ran on an
H100 (BENCHMARKS.md, GPU acceptance)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_acceptance.py"
_spec = importlib.util.spec_from_file_location("gpu_acceptance", SCRIPT)
assert _spec is not None and _spec.loader is not None
acceptance = importlib.util.module_from_spec(_spec)
sys.modules["gpu_acceptance"] = acceptance  # dataclasses look their module up there
_spec.loader.exec_module(acceptance)
Row, Spec = acceptance.Row, acceptance.Spec
PASS, FAIL, NA = acceptance.PASS, acceptance.FAIL, acceptance.NOT_AVAILABLE
US = 1e-6


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_the_script_says_so_and_exits_0():
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no CUDA device: torch.cuda.is_available() is False (torch ")
    assert "run this script on a CUDA machine" in done.stdout
    assert "Traceback" not in done.stderr


def test_main_prints_its_plan_then_each_row_and_leaves_json_lines(monkeypatch, capsys, tmp_path):
    def broken(_device):
        raise RuntimeError("CUDA error: out of resources")

    def stuck(_device):
        time.sleep(30)
        return [Row("never", PASS, "")]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "Fake GPU")
    monkeypatch.setattr(acceptance.gpu_driver, "nvml_reader", lambda _torch, _device: None)
    monkeypatch.setattr(
        acceptance,
        "SPECS",
        {
            "a": Spec(lambda device: [Row("a", PASS, f"on {device}")], 5, 1, ""),
            "b": Spec(broken, 5, 1, ""),
            "slow": Spec(stuck, 1, 1, ""),
            "c": Spec(lambda _d: [Row("c", NA, "no triton")], 5, 2, ""),
        },
    )
    assert acceptance.main(["--device", "cuda:1", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("GPU acceptance on Fake GPU, torch ")
    assert out[1:6] == [
        "plan: 4 rows, at most 16 s",
        "  a: at most 5 s",
        "  b: at most 5 s",
        "  slow: at most 1 s",
        "  c: at most 5 s",
    ]
    assert [line.split()[:2] for line in out[6:]] == [
        ["a", PASS],
        ["b", FAIL],
        ["slow", FAIL],
        ["c", NA],
    ]
    assert "RowTimeout: ran past its 1 s limit" in out[8]
    lines = [json.loads(x) for x in (tmp_path / "acceptance.jsonl").read_text().splitlines()]
    assert [(x["name"], x["status"]) for x in lines] == [
        ("a", PASS),
        ("b", FAIL),
        ("slow", FAIL),
        ("c", NA),
    ]
    assert lines[2]["row_s"] < 5  # cut at its limit, not after the 30 s it asked for
    table = (tmp_path / "acceptance.md").read_text().splitlines()
    assert table[0] == "## " + out[0]
    assert [x.split(" | ")[0] for x in table[4:]] == ["| a", "| b", "| slow", "| c"]
    assert acceptance.main(["--only", "c"]) == 0  # n/a is not a failure


def test_nvml_row_needs_clocks_reasons_and_every_uuid():
    ok = acceptance.nvml_row(345, 1980, ["gpu_idle"], {"GPU-1": True})
    assert ok.status == PASS and "1/1 CUDA UUIDs" in ok.numbers
    assert acceptance.nvml_row(345, 1980, [], {"GPU-1": False, "GPU-2": True}).status == FAIL
    assert acceptance.nvml_row(None, 1980, [], {"GPU-1": True}).status == FAIL


def test_each_fault_costs_its_point_only():
    good = {
        "ok_first": ("ok", None),
        "device_assert": ("error", "RuntimeError: CUDA error: device-side assert triggered"),
        "out_of_memory": ("error", "out of memory: tried to allocate 1.0 PiB"),
        "capture_fails": ("skipped", "CUDA graph capture failed: operation not permitted"),
        "wrong_result": ("error", "wrong result: 1024 of 1024 elements"),
        "ok_last": ("ok", None),
    }
    assert acceptance.faults_row(good).status == PASS
    assert (
        acceptance.faults_row({**good, "ok_last": ("error", "initialization error")}).status == FAIL
    )
    assert acceptance.faults_row({**good, "out_of_memory": ("error", "crashed")}).status == FAIL
    missing = dict(good)
    del missing["capture_fails"]
    assert "capture_fails: missing" in acceptance.faults_row(missing).numbers


def test_quick_suite_passes_with_numpy_skips_only():
    ok = ("sqrt:torch.sqrt[float32, cuda](n=1024)", "ok", None)
    numpy = (
        "sqrt:numpy.sqrt[...]",
        "skipped",
        "variant 'numpy.sqrt' uses NumPy, which runs on the CPU only",
    )
    row = acceptance.quick_suite_row([ok, ok, numpy])
    assert (row.status, row.numbers) == (PASS, "2 ok, 1 skipped (NumPy), 0 failed")
    failed = acceptance.quick_suite_row([ok, ("add[...]", "error", "crashed: SIGSEGV")])
    assert failed.status == FAIL and failed.numbers.endswith("first: add[...]: crashed: SIGSEGV")
    odd_skip = acceptance.quick_suite_row([ok, ("x", "skipped", "CUDA is not available")])
    assert odd_skip.status == FAIL and "unexpected skip: CUDA is not available" in odd_skip.numbers
    assert acceptance.quick_suite_row([]).status == FAIL  # nothing measured is no pass


def test_timing_rows_judge_within_their_tolerance_from_their_floor():
    inside = acceptance.timing_row("warm vs loop", [("2^24", 102.9 * US, 100 * US)], 0.03)
    assert inside.status == PASS and inside.name == "warm vs loop (±3%)"
    assert inside.numbers == "2^24: 102.90 vs 100.00 µs (+2.9%)"
    assert acceptance.timing_row("w", [("k", 94 * US, 100 * US)], 0.05).status == FAIL
    short = acceptance.timing_row("c", [("k", 15 * US, 10 * US)], 0.05, 20 * US)
    assert short.status == PASS and "not judged" in short.numbers
    no_triton = acceptance.timing_row("c", [("k", 1.0, None)], 0.05)
    assert (no_triton.status, no_triton.numbers) == (NA, "triton is not importable")


def test_sleep_kernels_within_two_percent_not_launch_bound_and_warmed_up_in_time():
    good = [("10 µs", 11.7 * US, 11.72 * US, 0.01, 0.2), ("2 ms", 2001 * US, 2003 * US, 0.0, 0.3)]
    assert acceptance.sleep_row(good).status == PASS
    slow_warmup = [("2 ms", 2001 * US, 2003 * US, 0.0, 4.09)]  # what the H100 showed first
    assert acceptance.sleep_row(slow_warmup).status == FAIL
    flagged = [("10 µs", 11.7 * US, 11.72 * US, 0.6, 0.2)]
    assert acceptance.sleep_row(flagged).status == FAIL
    off = [("10 µs", 12.3 * US, 11.72 * US, 0.0, 0.2)]
    assert acceptance.sleep_row(off).status == FAIL
    assert acceptance.sleep_row([]).status == FAIL


def test_small_sqrt_graph_faster_eager_flagged_and_rotate_in_whole_cycles():
    rotating = {"cuda_graph": {"calls_per_replay": 128, "rotate_copies": 64}}
    assert acceptance.small_row(10.2 * US, 1.4 * US, 0.86, rotating).status == PASS
    assert acceptance.small_row(10.2 * US, 1.4 * US, 0.2, rotating).status == FAIL
    assert acceptance.small_row(1.0 * US, 1.4 * US, 0.86, rotating).status == FAIL
    collapsed = {"cuda_graph": {"calls_per_replay": 76, "rotate_copies": 64}}
    assert acceptance.small_row(10.2 * US, 1.4 * US, 0.86, collapsed).status == FAIL
    assert acceptance.small_row(10.2 * US, 1.4 * US, 0.86, {"cuda_graph": None}).status == FAIL


def test_compile_probe_and_trace_rows():
    assert acceptance.compile_row(2.8, 6e-8, "ok").status == PASS
    assert acceptance.compile_row(None, 6e-8, "ok").status == FAIL
    row = acceptance.probe_row("probe bandwidth", 2.9e12, 3.3e12, "GB/s", 1e9)
    assert (row.status, row.numbers) == (PASS, "probe 2900 GB/s, plain 3300 GB/s (-12.1%)")
    assert acceptance.probe_row("p", 2.5e12, 2.98e12, "GB/s", 1e9).status == FAIL
    assert acceptance.trace_row(12, "/t/x.json").status == PASS
    assert acceptance.trace_row(0, "/t/x.json").status == FAIL


def test_collectives_skip_nccl_with_its_reason_and_run_the_rest():
    skip = ("skipped", "nccl with 2 ranks needs 2 GPUs; 1 found")
    row = acceptance.collectives_row([skip, skip, ("ok", None)])
    assert row.status == PASS and "2/3 skipped (nccl)" in row.numbers
    assert acceptance.collectives_row([skip, ("error", "crashed")]).status == FAIL
    assert acceptance.collectives_row([]).status == FAIL
