"""benchmarks/gpu_acceptance.py without a GPU: the skip on a machine without CUDA, and
every row's pass/fail logic on fake numbers (no GPU number is claimed here)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
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
Row = acceptance.Row
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


def test_main_prints_one_table_and_fails_when_a_row_fails_or_raises(monkeypatch, capsys):
    def broken(_device):
        raise RuntimeError("CUDA error: out of resources")

    monkeypatch.setattr(acceptance, "no_cuda_message", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "Fake GPU")
    monkeypatch.setattr(
        acceptance,
        "ROWS",
        {
            "a": lambda device: [Row("a", PASS, f"on {device}")],
            "b": broken,
            "c": lambda _d: [Row("c", NA, "no triton")],
        },
    )
    assert acceptance.main(["--device", "cuda:1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("GPU acceptance on Fake GPU, torch ")
    assert out[1:] == [
        "a  pass  on cuda:1",
        "b  FAIL  RuntimeError: CUDA error: out of resources",
        "c  n/a   no triton",
    ]
    monkeypatch.setattr(acceptance, "ROWS", {"c": lambda _d: [Row("c", NA, "no triton")]})
    assert acceptance.main([]) == 0  # n/a is not a failure


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


def test_engine_rows_judge_kernels_of_20_us_and_more_within_5_percent():
    inside = acceptance.timing_row("engine vs events", [("sqrt 2^24", 104.9 * US, 100 * US)])
    assert inside.status == PASS
    assert inside.numbers == "sqrt 2^24: 104.9 vs 100.0 µs (+4.9%)"
    outside = acceptance.timing_row("engine vs events", [("k", 94 * US, 100 * US)])
    assert outside.status == FAIL
    short = acceptance.timing_row("engine vs events", [("k", 15 * US, 10 * US)])
    assert short.status == PASS and "not judged" in short.numbers
    no_triton = acceptance.timing_row("engine vs do_bench", [("k", 1.0, None)])
    assert (no_triton.status, no_triton.numbers) == (NA, "triton is not importable")


def test_graphs_must_be_faster_and_eager_flagged_and_missing_features_are_na():
    assert acceptance.graphs_row(8 * US, 3 * US, True).status == PASS
    assert acceptance.graphs_row(8 * US, 3 * US, False).status == FAIL
    assert acceptance.graphs_row(3 * US, 8 * US, True).status == FAIL
    missing = acceptance.graphs_row(None, None, None)
    assert missing.status == NA and "cuda_graph" in missing.numbers


def test_probe_figures_pass_within_15_percent():
    row = acceptance.probe_row("probe bandwidth", 2.9e12, 3.3e12, "GB/s", 1e9)
    assert (row.status, row.numbers) == (PASS, "probe 2900 GB/s, plain 3300 GB/s (-12.1%)")
    assert acceptance.probe_row("p", 2.7e12, 3.3e12, "GB/s", 1e9).status == FAIL
    assert acceptance.probe_row("p", 3.9e12, 3.3e12, "GB/s", 1e9).status == FAIL


def test_cold_and_warm_differ_near_l2_and_agree_far_beyond_it():
    assert acceptance.cache_row((10 * US, 13 * US), (500 * US, 520 * US)).status == PASS
    assert acceptance.cache_row((10 * US, 10.5 * US), (500 * US, 520 * US)).status == FAIL
    assert acceptance.cache_row((10 * US, 13 * US), (500 * US, 600 * US)).status == FAIL


def test_trace_assert_and_collectives_rows():
    assert acceptance.trace_row(12, "/t/x.json").status == PASS
    assert acceptance.trace_row(0, "/t/x.json").status == FAIL
    message = "RuntimeError: CUDA error: device-side assert triggered (at s.py:6)"
    good = {"before": ("ok", None), "assert": ("error", message), "after": ("ok", None)}
    assert acceptance.assert_row(good).status == PASS
    assert acceptance.assert_row({**good, "after": ("error", message)}).status == FAIL
    assert acceptance.assert_row({**good, "assert": ("error", "timed out")}).status == FAIL
    skip = ("skipped", "nccl with 2 ranks needs 2 GPUs; 1 found")
    row = acceptance.collectives_row([skip, skip])
    assert (row.status, row.numbers) == (PASS, f"2/2 skipped: {skip[1]}")
    assert acceptance.collectives_row([skip, ("ok", None)]).status == FAIL
    assert acceptance.collectives_row([]).status == FAIL
