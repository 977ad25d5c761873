"""`--shard auto`: the shard of a Slurm array task or a Kubernetes Indexed Job pod."""

from __future__ import annotations

import pytest

from benchbench.core.errors import UsageError
from benchbench.run.sharding import Shard, parse_shard, shard_from_environment


def _slurm(task: int, low: int, high: int, step: int = 1, **extra: str) -> dict[str, str]:
    """What Slurm sets for ``--array=low-high:step`` (count included, as Slurm does)."""
    env = {
        "SLURM_ARRAY_TASK_ID": str(task),
        "SLURM_ARRAY_TASK_MIN": str(low),
        "SLURM_ARRAY_TASK_MAX": str(high),
        "SLURM_ARRAY_TASK_STEP": str(step),
        "SLURM_ARRAY_TASK_COUNT": str((high - low) // step + 1),
    }
    return {**env, **extra}


@pytest.mark.parametrize(
    ("low", "high", "step"),
    [(1, 8, 1), (0, 7, 1), (0, 14, 2), (5, 12, 1)],
    ids=["1-8", "0-7", "0-14:2", "5-12"],
)
def test_every_task_of_a_slurm_array_gets_its_own_shard_of_eight(low, high, step):
    shards = [shard_from_environment(_slurm(t, low, high, step)).shard
              for t in range(low, high + 1, step)]  # fmt: skip
    assert shards == [Shard(i, 8) for i in range(1, 9)]


def test_slurm_count_or_bounds_alone_are_enough_and_min_defaults_to_zero():
    by_count = shard_from_environment({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"})
    assert by_count.shard == Shard(3, 4)  # ids 0..3 (Slurm's MIN unset reads as 0)
    by_bounds = {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1",
                 "SLURM_ARRAY_TASK_MAX": "4"}  # fmt: skip
    assert shard_from_environment(by_bounds).shard == Shard(4, 4)


def test_it_says_which_variables_it_read():
    found = shard_from_environment(_slurm(3, 1, 4))
    said = str(found)
    assert said.startswith("--shard auto: shard 3/4 from the Slurm array job (")
    for read in ("TASK_ID=3", "TASK_MIN=1", "TASK_MAX=4", "TASK_COUNT=4", "TASK_STEP=1"):
        assert f"SLURM_ARRAY_{read}" in said
    k8s = shard_from_environment({"JOB_COMPLETION_INDEX": "0", "BENCHBENCH_SHARD_COUNT": "3"})
    assert k8s.shard == Shard(1, 3)
    assert str(k8s) == (
        "--shard auto: shard 1/3 from the Kubernetes Indexed Job "
        "(JOB_COMPLETION_INDEX=0, BENCHBENCH_SHARD_COUNT=3)"
    )


def test_every_pod_of_an_indexed_job_gets_its_own_shard():
    shards = [
        shard_from_environment({"JOB_COMPLETION_INDEX": str(i), "BENCHBENCH_SHARD_COUNT": "5"})
        for i in range(5)
    ]
    assert [s.shard for s in shards] == [Shard(i, 5) for i in range(1, 6)]


def test_parse_shard_takes_i_of_n_as_given_and_auto_from_the_environment():
    assert parse_shard("2/4", _slurm(1, 1, 8)) == (Shard(2, 4), None)  # I/N wins
    shard, found = parse_shard("AUTO", _slurm(2, 1, 8))
    assert shard == Shard(2, 8) and found is not None and found.scheduler == "Slurm array job"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {},
            r"found no scheduler's shard .*SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT "
            r"or SLURM_ARRAY_TASK_MIN/SLURM_ARRAY_TASK_MAX .*JOB_COMPLETION_INDEX with "
            r"BENCHBENCH_SHARD_COUNT.*give --shard I/N",
        ),
        ({"JOB_COMPLETION_INDEX": "1"}, r"BENCHBENCH_SHARD_COUNT is not.*\.spec\.completions"),
        (
            {"JOB_COMPLETION_INDEX": "3", "BENCHBENCH_SHARD_COUNT": "3"},
            r"JOB_COMPLETION_INDEX=3 must be in 0\.\.BENCHBENCH_SHARD_COUNT-1",
        ),
        ({"SLURM_ARRAY_TASK_ID": "1"}, r"neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX"),
        (
            {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"},
            r"SLURM_ARRAY_TASK_ID must be an integer, got 'x'",
        ),
        # --array=1,2,7: three tasks, ids not a range.
        (_slurm(7, 1, 7, SLURM_ARRAY_TASK_COUNT="3"), r"not a range .*would make 7 tasks"),
        (_slurm(3, 0, 14, 2), r"SLURM_ARRAY_TASK_ID=3 is not one of the array's 8 task ids"),
        ({**_slurm(1, 1, 2), "JOB_COMPLETION_INDEX": "0"}, r"both .* ambiguous"),
    ],
    ids=[
        "none",
        "k8s-no-count",
        "k8s-index-too-big",
        "slurm-no-count",
        "not-int",
        "slurm-list",
        "slurm-off-step",
        "both",
    ],
)
def test_what_auto_cannot_use_is_a_usage_error_naming_the_variables(environ, message):
    with pytest.raises(UsageError, match=message):
        shard_from_environment(environ)
