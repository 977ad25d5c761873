"""The defaults a command's `--help` quotes are the ones the command then uses.

The help reads its numbers from ``core.defaults`` so that it imports no torch; these tests
parse a command line with no flags, ask the code what it would use, and look for that
value in the help, so a default changed in the code but not in the help (or the other
way round) fails here.
"""

from __future__ import annotations

import argparse
import inspect
import re

import pytest

from benchbench.analysis import verdict
from benchbench.cli import build_parser
from benchbench.cli import run as run_cli
from benchbench.cli import time as time_cli
from tests.integration.cli import SUITES


def _command(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _help(name: str, flag: str) -> str:
    """The help text of ``flag`` of command ``name``, as --help prints it."""
    parser = _command(name)
    action = next(a for a in parser._actions if flag in a.option_strings)
    text = parser._get_formatter()._expand_help(action)  # filled in as --help prints it
    return re.sub(r"\s+", " ", text)


def _parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_run_uses_the_budget_target_and_rounds_its_help_quotes(monkeypatch) -> None:
    monkeypatch.delenv("BENCHBENCH_ROUNDS", raising=False)
    config = run_cli._fresh_config(_parsed("run", str(SUITES / "tiny.py")))
    assert f"(default {config.policy.max_time_s:g})" in _help("run", "--budget")
    assert f"(default {config.policy.target_rel_ci:g})" in _help("run", "--target")
    assert f"$BENCHBENCH_ROUNDS or {config.rounds.count};" in _help("run", "--rounds")
    assert f"(default {config.timeout_s:g};" in _help("run", "--timeout")


def test_max_rounds_is_the_larger_of_rounds_and_the_number_its_help_quotes(monkeypatch) -> None:
    from benchbench.cli import flags

    monkeypatch.delenv("BENCHBENCH_ROUNDS", raising=False)
    quoted = re.search(
        r"\(default: the larger of --rounds and (\d+);", _help("run", "--max-rounds")
    )
    assert quoted is not None
    least = int(quoted.group(1))
    suite = str(SUITES / "tiny.py")
    config = run_cli._fresh_config(_parsed("run", suite))
    assert config.rounds.max_count == max(config.rounds.count, least)
    for count in (2, least + 3):  # below the quoted number, then above it
        rounds = flags.rounds_from(_parsed("run", suite, "--rounds", str(count)))
        assert rounds.max_count == max(count, least)


def test_a_compile_variants_timeout_is_the_one_the_help_quotes(monkeypatch) -> None:
    from benchbench.run import runner

    config = run_cli._fresh_config(_parsed("run", str(SUITES / "tiny.py")))
    quoted = re.search(r"; (\d+) for torch.compile variants", _help("run", "--timeout"))
    assert quoted is not None
    assert config.compile_timeout_s is None  # the runner's default applies, which is:
    assert float(quoted.group(1)) == max(config.timeout_s, runner.COMPILE_TIMEOUT_S)


def test_time_uses_the_budget_its_help_quotes() -> None:
    config = time_cli.config_from(_parsed("time", "x + 1", "--device", "cpu"))
    assert f"(default {config.policy.max_time_s:g})" in _help("time", "--budget")


@pytest.mark.parametrize(
    ("flag", "function", "parameter"),
    [
        ("--min-effect", verdict.mark_ratio, "min_effect"),
        ("--instructions-min-effect", verdict.mark_counts, "min_effect"),
    ],
)
def test_compare_quotes_the_thresholds_the_verdict_applies(flag, function, parameter) -> None:
    default = inspect.signature(function).parameters[parameter].default
    assert f"{default:g}" in _help("compare", flag)
    assert getattr(_parsed("compare", "a", "b"), flag.lstrip("-").replace("-", "_")) == default
