"""Sharding: deterministic, disjoint, covering and balanced (properties), group ids."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchbench.core.errors import UsageError
from benchbench.run.sharding import Shard, assign, group_id_for, scheduler_group

ids_strategy = st.lists(st.text("0123456789abcdef", min_size=1, max_size=16), max_size=120)


@settings(max_examples=300, deadline=None)
@given(
    ids=ids_strategy,
    count=st.integers(1, 12),
    cost_values=st.lists(st.one_of(st.none(), st.floats(0, 1e4)), max_size=120),
)
def test_shards_are_disjoint_covering_deterministic_and_balanced(ids, count, cost_values):
    costs = {i: c for i, c in zip(ids, cost_values, strict=False) if c is not None}
    shards = assign(ids, count, costs)
    assert len(shards) == count
    flat = [k for shard in shards for k in shard]
    assert sorted(flat) == list(range(len(ids)))  # every point exactly once
    assert shards == assign(list(ids), count, dict(costs))  # same input, same split
    assert all(shard == sorted(shard) for shard in shards)  # plan order kept
    # Balance (longest-processing-time bound): heaviest - lightest <= the dearest point.
    known = [c for i in ids if (c := costs.get(i)) is not None and c > 0]
    fallback = _median(known) if known else 1.0
    price = [c if (c := costs.get(i)) is not None and c > 0 else fallback for i in ids]
    loads = [sum(price[k] for k in shard) for shard in shards]
    assert max(loads) - min(loads) <= max(price, default=0.0) * (1 + 1e-9)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.uuids().map(str), unique=True, max_size=60), count=st.integers(1, 8))
def test_split_does_not_depend_on_the_order_ids_were_listed_in(ids, count):
    forward = assign(ids, count)
    backward = assign(ids[::-1], count)
    as_sets = [{ids[k] for k in shard} for shard in forward]
    assert as_sets == [{ids[::-1][k] for k in shard} for shard in backward]


def test_costs_put_one_heavy_point_alone():
    ids = ["heavy", "a", "b", "c", "d"]
    costs = {"heavy": 10.0, "a": 2.5, "b": 2.5, "c": 2.5, "d": 2.5}
    shards = assign(ids, 2, costs)
    assert [ids[k] for k in shards[0]] == ["heavy"]
    assert sorted(ids[k] for k in shards[1]) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(("text", "expected"), [("1/1", Shard(1, 1)), (" 3 / 4 ", Shard(3, 4))])
def test_shard_parses_i_of_n(text, expected):
    assert Shard.parse(text) == expected
    assert str(expected) == f"{expected.index}/{expected.count}"


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "a/b", "2", "-1/3", "1/2/3", ""])
def test_bad_shard_is_a_usage_error_echoing_it(text):
    with pytest.raises(UsageError, match="--shard"):
        Shard.parse(text)


def test_group_ids_are_stable_and_uuid_shaped():
    value = str(uuid.uuid4())
    assert group_id_for(value) == value
    assert group_id_for("nightly-2026-11-22") == group_id_for("nightly-2026-11-22")
    assert group_id_for("nightly-2026-11-22") != group_id_for("nightly-2026-11-23")
    assert len(group_id_for("x" * 500)) == 36  # fits run.group_id (36 chars)


def test_scheduler_group_comes_from_ci_or_slurm_variables():
    assert scheduler_group({}) is None
    assert scheduler_group({"GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2"}) == (
        "GITHUB_RUN_ID=77.2"
    )
    assert scheduler_group({"SLURM_ARRAY_JOB_ID": "123"}) == "SLURM_ARRAY_JOB_ID=123"
    assert scheduler_group({"BENCHBENCH_GROUP": "g", "GITHUB_RUN_ID": "1"}) == (
        "BENCHBENCH_GROUP=g"
    )
