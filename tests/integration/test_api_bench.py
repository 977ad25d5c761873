"""benchbench.bench measures like `benchbench time`: torch.sqrt at 2^20 elements, in fresh
processes, agrees with `time` on the same statement within the two intervals."""

from __future__ import annotations

import pytest
import torch

import benchbench
from benchbench.api import FRESH_PROCESSES
from tests.integration.cli import benchbench as cli
from tests.integration.cli import json_of


@pytest.mark.slow
def test_bench_of_sqrt_agrees_with_time(tmp_path):
    x = torch.rand(2**20) + 0.5
    torch.set_num_threads(1)
    measured = benchbench.bench(torch.sqrt, x, rounds=3, budget_s=0.6)
    done = cli(
        "time",
        "torch.sqrt(x)",
        "--size",
        str(2**20),
        "--rounds",
        "3",
        "--threads",
        "1",
        "--budget",
        "0.6",
        "--no-store",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json_of(done)["results"]
    assert measured.isolation == FRESH_PROCESSES and measured.processes == 3
    # The two intervals overlap: neither median is outside what both allow.
    assert measured.ci_low_s <= row["ci_high_s"] and row["ci_low_s"] <= measured.ci_high_s, (
        measured,
        row,
    )
