"""The bisect search driven by scripted oracles: no git, no measurement."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from benchbench.analysis import compare
from benchbench.analysis.bisect import (
    AMBIGUOUS,
    CULPRIT,
    DIFFERENT,
    MAX_LOOKS,
    NOT_SLOWER,
    SAME,
    SKIP,
    UNKNOWN,
    Look,
    bisect,
    judge,
    look_alpha,
    replaying,
    step_outcome,
    together_bound,
)
from benchbench.analysis.compare import PointComparison


def _commits(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def scripted(commits, culprit, unknown=0.0, skips=(), seed=0, calls=None):
    """An oracle whose truth is 'slower from ``culprit`` on', answering unknown with
    probability ``unknown`` per look and skip at ``skips``."""
    rng = random.Random(seed)
    first = commits.index(culprit)

    def oracle(commit, look):
        if calls is not None:
            calls.append((commit, look))
        if commit in skips:
            return Look(commit, look, SKIP)
        if rng.random() < unknown:
            return Look(commit, look, UNKNOWN, seconds=1.0)
        truth = DIFFERENT if commits.index(commit) >= first else SAME
        return Look(commit, look, truth, seconds=1.0)

    return oracle


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 17])
def test_a_clean_oracle_finds_every_culprit_in_about_log2_n_steps(n):
    commits = _commits(n)
    for culprit in commits:
        found = bisect(commits, scripted(commits, culprit))
        assert found.status == CULPRIT and found.culprit == culprit
        assert found.steps <= math.ceil(math.log2(n)) + 1
        index = commits.index(culprit)
        assert found.last_same == (commits[index - 1] if index else None)


def test_over_noisy_oracles_the_average_steps_stay_within_log2_n_plus_2():
    n, trials, found_right = 16, 400, 0
    commits = _commits(n)
    steps = []
    rng = random.Random(7)
    for trial in range(trials):
        culprit = rng.choice(commits)
        result = bisect(commits, scripted(commits, culprit, unknown=0.1, seed=trial))
        steps.append(result.steps)
        assert culprit in ((result.culprit,) if result.culprit else result.candidates)
        found_right += result.culprit == culprit
    assert sum(steps) / trials <= math.log2(n) + 2
    assert found_right >= 0.95 * trials


def test_an_unknown_verdict_is_measured_again_at_most_twice():
    answers = iter([UNKNOWN, UNKNOWN, DIFFERENT])
    looks = judge("c1", lambda c, k: Look(c, k, next(answers)))
    assert [(look.look, look.outcome) for look in looks] == [
        (1, UNKNOWN),
        (2, UNKNOWN),
        (3, DIFFERENT),
    ]
    always = judge("c1", lambda c, k: Look(c, k, UNKNOWN))
    assert len(always) == MAX_LOOKS  # then it stops: two re-measurements, no more


def test_a_commit_unknown_at_every_look_is_set_aside_and_the_culprit_still_found():
    commits = _commits(8)

    def oracle(commit, look):
        if commit == "c03":
            return Look(commit, look, UNKNOWN)
        return Look(commit, look, DIFFERENT if commit >= "c05" else SAME)

    found = bisect(commits, oracle)
    assert found.culprit == "c05" and found.skipped == ("c03",)
    assert sum(look.commit == "c03" for look in found.looks) == MAX_LOOKS


def test_commits_that_fail_to_build_are_skipped_like_git_bisect_skip():
    commits = _commits(16)
    calls: list[tuple[str, int]] = []
    found = bisect(commits, scripted(commits, "c11", skips={"c07", "c08"}, calls=calls))
    assert found.status == CULPRIT and found.culprit == "c11"
    assert {"c07"} <= set(found.skipped)
    assert all(k == 1 for c, k in calls if c in ("c07", "c08"))  # a skip is not looked again
    assert found.steps == sum(1 for c, _ in calls if c not in ("c07", "c08"))


def test_a_skipped_culprit_leaves_the_candidates_as_git_bisect_does():
    commits = _commits(10)
    found = bisect(commits, scripted(commits, "c04", skips={"c04"}))
    assert found.status == AMBIGUOUS and found.culprit is None
    assert found.candidates == ("c04", "c05") and found.last_same == "c03"


def test_a_bad_end_that_is_not_slower_ends_the_search_after_its_looks():
    commits = _commits(6)
    same = bisect(commits, scripted(commits, "c05", skips=()), max_looks=3)
    assert same.status == CULPRIT  # sanity: c05 slower
    nothing = bisect(commits, lambda c, k: Look(c, k, SAME))
    assert nothing.status == NOT_SLOWER and [look.commit for look in nothing.looks] == ["c05"]
    blurred = bisect(commits, lambda c, k: Look(c, k, UNKNOWN))
    assert blurred.status == NOT_SLOWER and len(blurred.looks) == MAX_LOOKS


def test_a_bad_end_that_cannot_be_measured_is_an_error():
    with pytest.raises(ValueError, match="bad end c02"):
        bisect(_commits(3), lambda c, k: Look(c, k, SKIP))


def test_a_resumed_search_replays_its_log_and_measures_only_what_is_left():
    commits = _commits(16)
    first = bisect(commits, scripted(commits, "c09", unknown=0.2, seed=3))
    cut = len(first.looks) // 2

    calls: list[tuple[str, int]] = []
    live = scripted(commits, "c09", unknown=0.0, calls=calls)
    resumed = bisect(commits, replaying(first.looks[:cut], live))
    assert resumed.culprit == "c09"
    assert resumed.looks[:cut] == first.looks[:cut]
    assert len(calls) == len(resumed.looks) - cut  # only the looks after the log were taken


def test_look_alpha_splits_alpha_over_the_looks():
    assert look_alpha(0.05) == pytest.approx(0.05 / 3)
    assert look_alpha(0.05, 1) == 0.05
    with pytest.raises(ValueError):
        look_alpha(0.05, 0)


def test_the_search_refuses_an_oracle_that_answers_another_question_and_bad_input():
    with pytest.raises(ValueError, match="answered"):
        bisect(_commits(3), lambda c, k: Look("elsewhere", k, SAME))
    with pytest.raises(ValueError, match="no commits"):
        bisect([], lambda c, k: Look(c, k, SAME))
    with pytest.raises(ValueError, match="outcome"):
        Look("c1", 1, "maybe")


def test_looks_round_trip_through_their_dict_and_costs_add_up():
    look = Look("c1", 2, DIFFERENT, 3.5, {"points": [{"label": "x", "ratio": 1.1}]})
    assert Look.from_dict(look.to_dict()) == look
    commits = _commits(4)
    found = bisect(commits, scripted(commits, "c02"))
    assert found.seconds == pytest.approx(float(found.steps))
    assert found.deciding("c02") is not None and found.deciding("c02").outcome == DIFFERENT


def _point(mark: str, ratio: float | None = 1.0, mde: float = 0.7) -> PointComparison:
    return PointComparison(
        "id", "exp[n=4096]", "s", "exp", mark, "ok", "ok", ratio=ratio, ratio_ci_high=None, mde=mde
    )


def test_a_step_is_same_when_the_points_together_rule_out_the_minimum_effect():
    # The verdict's MDE (0.97 here, as a real look at --min-effect 0.9 gave) lies above
    # the minimum effect whenever there is noise: it cannot decide `same`; the bound can.
    assert step_outcome([_point("not significant", mde=0.97)], 0.9, together=1.2) == SAME
    assert step_outcome([_point("not significant")], 0.05, together=1.04) == SAME
    assert step_outcome([_point("not significant")], 0.05, together=1.06) == UNKNOWN
    assert step_outcome([_point("not significant")], 0.05, together=None) == UNKNOWN
    # A point whose own ratio reaches the min effect keeps the step unknown, whatever the
    # others dilute it to.
    diluted = [_point("not significant", 1.07), _point("same", 0.99), _point("same", 1.0)]
    assert step_outcome(diluted, 0.05, together=1.04) == UNKNOWN
    assert step_outcome([_point("not significant", None)], 0.05, together=1.01) == UNKNOWN
    assert step_outcome([_point("slower", 6.0), _point("failing", None)], 0.9, 1.0) == DIFFERENT
    assert step_outcome([_point("failing", None), _point("same", 1.1)], 0.9, 1.0) == SKIP
    assert step_outcome([], 0.9, None) == SKIP


def _side_rows(medians: list[list[float]]) -> list[dict]:
    """One ``ab`` side's rows: ``medians[point][round]`` (None: the round failed there)."""
    rows = []
    for index, per_round in enumerate(medians):
        kept = [(r + 1, m) for r, m in enumerate(per_round) if m is not None]
        rows.append(
            {
                "benchmark_id": f"p{index}",
                **dict(suite="s", workload="exp", variant="v", device="cpu", dtype="float32"),
                **dict(size=4096, shape=[4096], params={}, median_s=None, reason=None),
                "status": "ok",
                "samples_s": [m * (1 + 0.001 * (k - 1)) for _, m in kept for k in range(3)],
                "calls_per_sample": 1,
                "process_samples": [3] * len(kept),
                "extra": {"processes": [{"round": r} for r, _ in kept]},
            }
        )
    return rows


def test_the_bound_of_one_point_is_its_paired_one_sided_bound():
    """``exp(mean + t(1 - a, n - 1) * s / sqrt(n))`` over the round log ratios: the upper
    end of the paired t's 1 - 2a interval, as ``compare`` computes it."""
    from scipy import stats

    rng = random.Random(4)
    base = [1e-3 * math.exp(rng.gauss(0, 0.05)) for _ in range(20)]
    head = [b * math.exp(rng.gauss(0.01, 0.04)) for b in base]
    a = look_alpha(0.05)
    rows = _side_rows([base]), _side_rows([head])
    logs = [math.log(h / b) for b, h in zip(base, head, strict=True)]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    bound = math.exp(mean + stats.t.ppf(1 - a, len(logs) - 1) * sd / math.sqrt(len(logs)))
    assert together_bound(*rows, a) == pytest.approx(bound, rel=1e-9)
    paired = compare.compare_rows(*rows, alpha=2 * a, paired=True).points[0]
    assert paired.ratio_ci_high == pytest.approx(bound, rel=1e-9)


def test_points_together_average_each_round_and_keep_the_rounds_all_kept():
    rng = random.Random(7)
    base = [[1e-3 * math.exp(rng.gauss(0, 0.1)) for _ in range(10)] for _ in range(2)]
    head = [[b * math.exp(rng.gauss(0, 0.1)) for b in point] for point in base]
    head[1][3] = None  # round 4 lost at the second point: dropped from the mean
    rounds = [
        (math.log(head[0][r] / base[0][r]) + math.log(head[1][r] / base[1][r])) / 2
        for r in range(10)
        if r != 3
    ]
    mean, sd = statistics.fmean(rounds), statistics.stdev(rounds)
    from scipy import stats

    bound = math.exp(mean + stats.t.ppf(1 - 0.05, len(rounds) - 1) * sd / math.sqrt(9))
    assert together_bound(_side_rows(base), _side_rows(head), 0.05) == pytest.approx(bound)
    failing = _side_rows(head)
    failing[0]["status"] = "error"
    assert together_bound(_side_rows(base), failing, 0.05) is None
    assert together_bound(_side_rows(base), _side_rows(head)[:1], 0.05) is None
    assert together_bound(_side_rows([[1e-3, None]]), _side_rows([[1e-3, 1e-3]]), 0.05) is None


def test_two_independent_points_together_are_narrower_than_either_alone():
    """Identical code, two points whose round ratios scatter independently (sd 10 %): the
    bound of the two together sits nearer 1 than the wider of their own bounds, in most
    of 200 seeded looks (by ~1/sqrt(2) in the noise term)."""
    narrower = 0
    for seed in range(200):
        rng = random.Random(seed)
        base = [[1e-3] * 20, [2e-3] * 20]
        head = [[b * math.exp(rng.gauss(0, 0.1)) for b in point] for point in base]
        both = together_bound(_side_rows(base), _side_rows(head), 0.0167)
        alone = [
            together_bound(_side_rows([base[k]]), _side_rows([head[k]]), 0.0167) for k in (0, 1)
        ]
        narrower += both < max(alone)  # type: ignore[operator,type-var]
    assert narrower >= 180
