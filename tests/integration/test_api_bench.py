"""benchbench.bench measures like `benchbench time`: torch.sqrt at 2^20 elements, in fresh
processes, the same point as `time` measures, at the same scale.

Whether the two intervals overlap is the machine's to say (runs drift apart by more than
their intervals on a busy 2-core VM), so the test asserts the same measurement (three
fresh processes, the point's size) and the same scale: medians within 3x of
each other, which a unit or calls-per-sample error (1,000x, 1e6x) breaks and noise does
not."""

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
    assert row["size"] == 2**20 and row["status"] == "ok"
    assert 1 / 3 < measured.median_s / row["median_s"] < 3, (measured, row)
