"""Every default a page or a help text states is filled in from the code, and is what the
code does.

Pages and help texts write ``{{ default.NAME }}`` (``benchbench.core.facts``); the MkDocs
hook and the help formatter fill it in. These tests fail on a default typed by hand
(tests/statedefaults.py says what reads as one), on a name the markup does not know, and
on a filled-in value that is not what a command with no flags then uses.
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest

from benchbench import api
from benchbench.analysis import verdict
from benchbench.cli import build_parser
from benchbench.cli import run as run_cli
from benchbench.cli import time as time_cli
from benchbench.core import facts
from tests.docblocks import doc_pages
from tests.integration.cli import SUITES, walk_parsers
from tests.statedefaults import stated_by_hand

ROOT = Path(__file__).resolve().parents[2]


def _help_texts() -> list[tuple[str, str]]:
    """Every description, epilog and option help as written (before it is filled in)."""
    texts = []
    for path, parser in walk_parsers(build_parser()):
        where = "benchbench " + " ".join(path)
        texts += [(where, parser.description or ""), (where, parser.epilog or "")]
        texts += [(f"{where} {'/'.join(a.option_strings)}", a.help or "") for a in parser._actions]
    return texts


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_types_a_default(page: Path) -> None:
    typed = stated_by_hand(page.read_text())
    assert not typed, (
        f"{page.relative_to(ROOT)} states a default by hand; write {{{{ default.NAME }}}} "
        f"(benchbench/core/facts.py), or {{{{ asof YYYY-MM-DD }}}} for a dated figure: {typed}"
    )


@pytest.mark.parametrize(
    ("typed", "marked"),
    [
        (
            "within the verdict's 5 % minimum effect do not",
            "within the verdict's {{ default.min_effect_pct }} minimum effect do not",
        ),
        (
            "with m the minimum effect (5 %), symmetric",
            "with m the minimum effect ({{ default.min_effect_pct }}), symmetric",
        ),
        (
            "`not significant` beyond a minimum effect of 5 % (Comparing runs)",
            "`not significant` beyond a minimum effect of {{ default.min_effect_pct }}",
        ),
        (
            "of the ratio of medians at 1 − alpha (95 %): 2,000 resamples",
            "of the ratio of medians at 1 − alpha ({{ default.confidence_pct }}): 2,000",
        ),
        (
            "a cold compile takes 20-90 s, hence its points' 300 s timeout.",
            "a cold compile takes 20-90 s, hence its points' {{ default.compile_timeout }} s "
            "timeout.",
        ),
        (
            "Their points get 300 s rather than 60 s unless `--timeout` is given",
            "Their points get {{ default.compile_timeout }} s rather than {{ default.timeout }} s "
            "unless `--timeout` is given",
        ),
    ],
    ids=[
        "pct-minimum-effect",
        "minimum-effect-paren",
        "minimum-effect-of",
        "alpha-paren",
        "s-timeout",
        "s-rather-than-s",
    ],
)
def test_a_threshold_or_timeout_typed_by_hand_is_caught(typed: str, marked: str) -> None:
    assert stated_by_hand(typed), typed
    assert not stated_by_hand(marked), marked


def test_a_dated_figure_a_pasted_output_or_an_example_s_value_is_no_default() -> None:
    dated = "Taken {{ asof 2026-11-27 }}: the MDE counts the 5 % minimum effect."
    pasted = "```text\n0 regressed (min effect 5%, alpha 0.05): the 5 % minimum effect\n```\n"
    example = "four rounds and a 50 % min effect, on a 2-core VM beside five busy jobs"
    assert stated_by_hand(dated.replace("{{ asof 2026-11-27 }}", ""))  # undated, it is one
    assert not stated_by_hand(dated)
    assert not stated_by_hand(pasted)
    assert not stated_by_hand(example)


def test_no_help_text_types_a_default() -> None:
    typed = [(where, found) for where, text in _help_texts() for found in stated_by_hand(text)]
    assert not typed, f"help states a default by hand; write {{{{ default.NAME }}}}: {typed}"


def test_every_page_and_help_names_known_defaults() -> None:
    for page in doc_pages():
        facts.fill(page.read_text())  # raises KeyError naming an unknown one
    for path, parser in walk_parsers(build_parser()):
        assert "{{" not in parser.format_help(), f"benchbench {' '.join(path)} --help"


def test_the_readme_states_the_one_hardware_sentence() -> None:
    assert facts.HARDWARE in " ".join((ROOT / "README.md").read_text().split())


def _parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_the_stated_defaults_are_what_a_run_and_time_use(monkeypatch) -> None:
    from benchbench.run import runner

    monkeypatch.delenv("BENCHBENCH_ROUNDS", raising=False)
    stated = facts.values()
    run = run_cli._fresh_config(_parsed("run", str(SUITES / "tiny.py")))
    used = {
        "default.rounds": str(run.rounds.count),
        "default.budget": f"{run.policy.max_time_s:g}",
        "default.target": f"{run.policy.target_rel_ci:g}",
        "default.timeout": f"{run.timeout_s:g}",
        "default.compile_timeout": f"{max(run.timeout_s, runner.COMPILE_TIMEOUT_S):g}",
        "default.threads": str(run.threads),
        "default.counter": run.counter,
    }
    timed = time_cli.config_from(_parsed("time", "x + 1", "--device", "cpu"))
    used["default.time_budget"] = f"{timed.policy.max_time_s:g}"
    used["default.bench_rounds"] = str(inspect.signature(api.bench).parameters["rounds"].default)
    assert {name: stated[name] for name in used} == used
    # --max-rounds' help: "the larger of --rounds and {{ default.max_rounds }}".
    assert run.rounds.max_count == max(run.rounds.count, int(stated["default.max_rounds"]))


def test_the_stated_thresholds_are_what_the_verdict_and_ab_apply() -> None:
    stated = facts.values()
    compare = _parsed("compare", "a", "b")
    ab = _parsed("ab", "quick", "--base", "python", "--head", "python")
    mark_ratio = inspect.signature(verdict.mark_ratio).parameters
    used = {
        "default.min_effect": f"{compare.min_effect:g}",
        "default.alpha": f"{compare.alpha:g}",
        "default.power": f"{compare.power:g}",
        "default.instructions_min_effect": f"{compare.instructions_min_effect:g}",
        "default.ab_rounds": str(ab.rounds),
    }
    assert {name: stated[name] for name in used} == used
    assert f"{mark_ratio['min_effect'].default:g}" == stated["default.min_effect"]
