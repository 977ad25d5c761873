"""benchbench.bench measures like `benchbench time`: torch.sqrt at 2^20 elements, in fresh
processes, the same point as `time` measures, at the same scale.

Whether the two intervals overlap, or even the medians lie within 3x, is the machine's
to say: on a busy 2-core VM one of three processes ran ~30x slow and left `bench`'s
median 3.4x `time`'s. So the test asserts the same measurement (three fresh processes,
the point's size) and the same scale read where noise has the least say: the first
quartile of each side's calls, within 10x, which a unit error (1,000x, 1e6x) breaks and
a neighbour, which only ever slows calls down, would have to slow most of a side's
processes tenfold to break."""

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
    assert 1 / 10 < measured.stats.q1_s / row["q1_s"] < 10, (measured, row)
