"""The defaults and facts that pages and help texts state, filled in from the code.

A docs page or a help text never types a default: it writes ``{{ default.rounds }}``
(or ``{{ fact.hardware }}``), and the MkDocs hook (``mkdocs_hooks.py``) and the help
formatter (``benchbench.cli``) replace it by :func:`fill` with the value read from
:mod:`benchbench.core.defaults` when the page is built or the help printed. A figure
that belongs to a dated measurement (BENCHMARKS.md's entries, a paragraph quoting how
an older version behaved) carries ``{{ asof YYYY-MM-DD }}`` instead, rendered as
"(as of YYYY-MM-DD)", which exempts its sentence; pasted outputs are ``text`` blocks.
``tests/unit/test_stated_defaults.py`` fails on a default stated by hand, and checks
each value below against what the code does when no flag is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from benchbench.core import defaults

#: What has run on which hardware: the one sentence that ``run --help``, the GPUs page,
#: the comparison page and the README state (docs/gpu.md holds the details and dates).
HARDWARE = (
    "Every CPU path runs in CI; the CUDA paths (timing, CUDA graphs, the launch share, "
    "NVML telemetry, fault isolation, the probe, ab) ran on one NVIDIA H100 on 2026-11-27; "
    "MPS, ROCm and more than one GPU have never run on hardware."
)


def _number(value: float) -> str:
    return f"{value:g}"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g} %"


def _values() -> dict[str, str]:
    """Read at each call, so that a default changed in ``defaults`` shows at once."""
    d = defaults
    return {
        "default.rounds": str(d.DEFAULT_ROUNDS),
        "default.max_rounds": str(d.DEFAULT_MAX_ROUNDS),
        "default.bench_rounds": str(d.BENCH_ROUNDS),
        "default.threads": str(d.DEFAULT_THREADS),
        "default.run_to_run_runs": str(d.RUN_TO_RUN_RUNS),
        "default.budget": _number(d.POLICY_MAX_TIME_S),
        "default.target": _number(d.POLICY_TARGET_REL_CI),
        "default.target_pct": _percent(d.POLICY_TARGET_REL_CI),
        "default.time_budget": _number(d.TIME_BUDGET_S),
        "default.ab_rounds": str(d.AB_ROUNDS),
        "default.ab_round_s": _number(d.AB_ROUND_S),
        "default.ab_min_samples": str(d.AB_MIN_SAMPLES),
        "default.timeout": _number(d.RUN_TIMEOUT_S),
        "default.sides_cache_gb": _number(d.SIDES_CACHE_GB),
        "default.store_retry_s": _number(d.STORE_RETRY_S),
        "default.compile_timeout": _number(d.COMPILE_TIMEOUT_S),
        "default.min_effect": _number(d.MIN_EFFECT),
        "default.min_effect_pct": _percent(d.MIN_EFFECT),
        "default.alpha": _number(d.ALPHA),
        "default.confidence_pct": _percent(1 - d.ALPHA),
        "default.power": _number(d.POWER),
        "default.power_pct": _percent(d.POWER),
        "default.instructions_min_effect": _number(d.INSTRUCTIONS_MIN_EFFECT),
        "default.instructions_min_effect_pct": _percent(d.INSTRUCTIONS_MIN_EFFECT),
        "default.counter": d.DEFAULT_COUNTER,
        "fact.hardware": HARDWARE,
    }


def values() -> dict[str, str]:
    """Every name the markup may use, with its text."""
    return _values()


#: ``{{ default.NAME }}``, ``{{ fact.NAME }}``, ``{{ asof DATE }}``; other ``{{ ... }}`` (a
#: GitHub Actions expression in a workflow the docs show) is left as it is.
MARKUP = re.compile(r"\{\{\s*(asof\s+\d{4}-\d{2}-\d{2}|(?:default|fact)\.[a-z_]+)\s*\}\}")


def fill(text: str, escape: Callable[[str], str] = str) -> str:
    """``text`` with every ``{{ name }}`` replaced by its value (``escape``d: argparse's help
    needs ``%`` doubled) and every ``{{ asof DATE }}`` by "(as of DATE)".

    :raises KeyError: a name that :func:`values` does not define, with the names it does.
    """
    known = _values()

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("asof"):
            return escape(f"(as of {name.split()[1]})")
        if name not in known:
            raise KeyError(
                f"{{{{ {name} }}}} is no default or fact of benchbench.core.facts; "
                f"use one of {', '.join(sorted(known))}"
            )
        return escape(known[name])

    return MARKUP.sub(replace, text)
