"""The defaults `--help` quotes (core.defaults) are the ones the code uses.

The help reads them from the leaf so that it imports no torch or scipy; the modules
that still define their own copy (the measurement policy, the rounds, the runner) must
agree with it until they import it.
"""

from __future__ import annotations

from benchbench.analysis import verdict
from benchbench.core import defaults
from benchbench.measure.policy import Policy
from benchbench.run import ab, rounds, runner, statements
from benchbench.views import accuracy_plot


def test_the_help_quotes_the_policy_rounds_and_runner_the_code_uses() -> None:
    policy = Policy()
    assert (
        policy.max_time_s,
        policy.target_rel_ci,
    ) == (defaults.POLICY_MAX_TIME_S, defaults.POLICY_TARGET_REL_CI)
    assert (defaults.DEFAULT_ROUNDS, defaults.DEFAULT_MAX_ROUNDS) == (
        rounds.DEFAULT_ROUNDS,
        rounds.DEFAULT_MAX_ROUNDS,
    )
    assert (defaults.RUN_KINDS, defaults.COMPILE_TIMEOUT_S) == (
        runner.RUN_KINDS,
        runner.COMPILE_TIMEOUT_S,
    )


def test_the_modules_that_read_the_defaults_read_these() -> None:
    assert (verdict.MIN_EFFECT, verdict.ALPHA, verdict.INSTRUCTIONS_MIN_EFFECT) == (
        defaults.MIN_EFFECT,
        defaults.ALPHA,
        defaults.INSTRUCTIONS_MIN_EFFECT,
    )
    assert statements.DEFAULT_BUDGET_S == defaults.TIME_BUDGET_S
    assert ab.DEFAULT_AB_ROUNDS == defaults.AB_ROUNDS
    assert accuracy_plot.DEFAULT_DTYPES == defaults.ACCURACY_DTYPES
