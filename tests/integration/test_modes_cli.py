"""Backward modes and derived work models end to end: run, list, show, compare."""

from __future__ import annotations

import pytest

from tests.integration.cli import SUITES, benchbench, json_of


def test_a_suite_with_modes_runs_end_to_end_with_derived_work_models(tmp_path):
    suite = str(SUITES / "modes.py")
    listed = benchbench("list", suite, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "mm:torch.matmul[float32, cpu](n=16x16, mode=bwd)" in listed.stdout

    db = str(tmp_path / "store.db")
    done = benchbench("run", suite, "--store", db, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = {(r["variant"], r["params"]["mode"]): r for r in json_of(done)["results"]}
    assert len(results) == 6
    forward = 2 * 16**3
    for mode, flop in (("fwd", forward), ("bwd", 2 * forward), ("fwd_bwd", 3 * forward)):
        r = results["torch.matmul", mode]
        assert r["status"] == "ok", r
        assert r["flop_per_s"] * r["median_s"] == pytest.approx(flop)
        assert r["derived"] == (["flops", "bytes"] if mode == "fwd" else ["flops"])
        assert r["max_rel_error"] is not None and r["max_rel_error"] < 1e-4
    assert results["numpy", "fwd"]["status"] == "ok"
    assert results["numpy", "fwd"]["derived"] == ["flops", "bytes"]  # counted on torch.matmul
    for mode in ("bwd", "fwd_bwd"):
        skipped = results["numpy", mode]
        assert skipped["status"] == "skipped"
        assert skipped["reason"] == "variant 'numpy' uses NumPy, which autograd does not track"

    table = benchbench("show", "latest", "--store", db, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "mode=fwd_bwd" in table.stdout and "* derived work model" in table.stdout
    compared = benchbench("compare", "latest", "latest", "--store", db, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "mm:torch.matmul[float32, cpu](n=16x16, mode=bwd)" in compared.stdout
