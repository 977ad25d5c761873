"""A run's points come out in suite order (suite, workload, variant, dtype, device, size,
params), whatever order the rounds wrote them in: the store, `show` and `show --json`."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from benchbench.core.values import Point, suite_order
from benchbench.store import open_store
from tests.integration.cli import benchbench, json_of
from tests.storedata import add_run, result

#: Suite order, by hand: names alphabetically, sizes numerically (2^10 < 2^16 < 2^20,
#: which as text would sort 1024 < 1048576 < 65536), dtypes then devices, then params.
EXPECTED = [
    ("a-suite", "add", "torch.add", "float32", "cpu", 1024, {}),
    ("a-suite", "add", "torch.add", "float32", "cpu", 65536, {}),
    ("a-suite", "add", "torch.add", "float32", "cpu", 1048576, {}),
    ("a-suite", "sqrt", "torch.sqrt", "float16", "cpu", 1024, {}),
    ("a-suite", "sqrt", "torch.sqrt", "float32", "cpu", 1024, {}),
    ("a-suite", "sqrt", "torch.sqrt", "float32", "cpu", 1024, {"dim": 0}),
    ("a-suite", "sqrt", "torch.sqrt", "float32", "cpu", 1024, {"dim": 1}),
    ("a-suite", "sqrt", "torch.sqrt", "float32", "meta", 1024, {}),
    ("a-suite", "sqrt", "x.sqrt_()", "float32", "cpu", 1024, {}),
    ("b-suite", "add", "torch.add", "float32", "cpu", 1024, {}),
]


def _points() -> list[Point]:
    return [
        Point(suite, workload, variant, size, (size,), dtype, device, tuple(params.items()))
        for suite, workload, variant, dtype, device, size, params in EXPECTED
    ]


def _key(row) -> tuple:
    """A stored row as an EXPECTED entry."""
    names = ("suite", "workload", "variant", "dtype", "device", "size")
    return (*(row[k] for k in names), row["params"] or {})


@pytest.fixture
def shuffled_store(tmp_path):
    """A store whose one run wrote its points in a shuffled order, one by one, the way
    rounds finish them, plus a skipped point (not measured rows sort the same way)."""
    results = [result(p, seed=i) for i, p in enumerate(_points())]
    results[3] = replace(results[3], status="skipped", samples_s=(), reason="no float16 here")
    order = list(range(len(results)))
    random.Random(7).shuffle(order)
    assert order != sorted(order)
    path = tmp_path / "shuffled.db"
    store = open_store(str(path), create=True)
    run_id = add_run(store, [results[i] for i in order], label="shuffled", bulk=False)
    return path, store, run_id


def test_the_store_reads_a_run_in_suite_order(shuffled_store) -> None:
    _, store, run_id = shuffled_store
    rows = store.measurements(run_id)
    assert [_key(r) for r in rows] == EXPECTED
    assert rows == sorted(rows, key=suite_order)


def test_show_and_its_json_list_the_points_in_suite_order(shuffled_store, tmp_path) -> None:
    path, _, _ = shuffled_store
    document = json_of(benchbench("show", "shuffled", "--json", "--store", str(path), cwd=tmp_path))
    assert [_key(r) for r in document["results"]] == EXPECTED
    table = benchbench("show", "shuffled", "--format", "csv", "--store", str(path), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("workload,variant,dtype,device,size,params")
    body = [line.split(",")[:5] for line in lines[1:] if line.split(",")[0] in {"add", "sqrt"}]
    sizes = {1024: "2^10", 65536: "2^16", 1048576: "2^20"}
    assert body == [[w, v, d, dev, sizes[n]] for _, w, v, d, dev, n, _ in EXPECTED]
