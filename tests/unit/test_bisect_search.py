"""The bisect search driven by scripted oracles: no git, no measurement."""

from __future__ import annotations

import math
import random

import pytest

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
    same_alpha,
    step_outcome,
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


def _point(mark: str, ci_high: float | None, mde: float = 0.7) -> PointComparison:
    return PointComparison(
        "id", "exp[n=4096]", "s", "exp", mark, "ok", "ok", ratio=1.0, ratio_ci_high=ci_high, mde=mde
    )


def test_a_step_is_same_when_every_interval_rules_out_the_minimum_effect():
    # The verdict's MDE (0.97 here, as a real look at --min-effect 0.9 gave) lies above
    # the minimum effect whenever there is noise: it cannot decide `same`; the interval can.
    assert step_outcome([_point("not significant", 1.2, mde=0.97)], 0.9) == SAME
    assert step_outcome([_point("not significant", 1.2), _point("same", 1.95)], 0.9) == UNKNOWN
    assert step_outcome([_point("not significant", None)], 0.9) == UNKNOWN
    assert step_outcome([_point("slower", 6.0), _point("failing", None)], 0.9) == DIFFERENT
    assert step_outcome([_point("failing", None), _point("same", 1.1)], 0.9) == SKIP
    assert step_outcome([], 0.9) == SKIP


def test_same_is_one_sided_at_the_looks_alpha():
    point = _point("not significant", 1.06)  # its two-sided 1 - alpha upper end
    assert step_outcome([point], 0.05) == UNKNOWN
    assert step_outcome([point], 0.05, upper=[1.04]) == SAME
    assert step_outcome([point, point], 0.05, upper=[1.04, None]) == UNKNOWN
    assert step_outcome([_point("slower", 1.3)], 0.05, upper=[1.04]) == DIFFERENT
    with pytest.raises(ValueError, match="1 points"):
        step_outcome([point], 0.05, upper=[])


def test_the_upper_end_at_same_alpha_is_the_one_sided_bound_at_the_looks_alpha():
    """A paired look's interval at ``same_alpha(a)`` ends where a one-sided t bound at
    ``a`` does: ``exp(mean + t(1 - a, k - 1) * s / sqrt(k))`` over the round log ratios."""
    from scipy import stats

    from benchbench.analysis.compare import compare_samples

    rng = random.Random(4)
    base = [1e-3 * math.exp(rng.gauss(0, 0.05)) for _ in range(20)]
    head = [b * math.exp(rng.gauss(0.01, 0.04)) for b in base]
    a = look_alpha(0.05)
    found = compare_samples(
        base,
        head,
        alpha=same_alpha(a),
        base_processes=[1] * 20,
        contender_processes=[1] * 20,
        paired=True,
    )
    logs = [math.log(h / b) for b, h in zip(base, head, strict=True)]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    bound = math.exp(mean + stats.t.ppf(1 - a, len(logs) - 1) * sd / math.sqrt(len(logs)))
    assert found.ci_high == pytest.approx(bound, rel=1e-9)
