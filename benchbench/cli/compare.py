"""Compare two runs point by point and exit 3 when the head regressed.

BASE and HEAD are run ids, id prefixes, labels, ``latest`` or ``latest~N``
(the N-th run before the latest), or run groups (the ``--group`` value or group id
shared by the shards of one run: all their points as one run, so two sharded
nightlies compare as ``benchbench compare nightly-2026-11-23 nightly-2026-11-24``);
``--environment`` (an environment id or a machine label) makes run references pick
among that environment's runs only, e.g.
``benchbench compare latest~1 latest --environment gpu-box-3``.

Per point, on the per-call times of the raw samples: the ratio (head / base,
above 1 is slower; of the geometric means of the per-process medians when both runs
have several processes, else of the medians) with its CI at 1 - --alpha (Welch's
t-test on the per-process log medians, else a bootstrap), the p-value, its q-value
(the p-value adjusted over all the points compared, Benjamini-Hochberg: the points of
a comparison are one family; 20 points tested at --alpha each would flag identical code
in up to 64 % of comparisons) and a mark by benchbench's one verdict
(:mod:`benchbench.analysis.verdict`): slower (q < --alpha and ratio >= 1 + m), faster
(q < --alpha and ratio <= 1 / (1 + m)), same (significant but inside those bounds), not
significant; m is --min-effect. A point's CI is its own, so it can exclude 1 while the
point is not significant in the family. Points without a verdict are new, gone or
failing. Geometric means of the ratios per workload and overall follow.

MDE, per point: the minimum detectable effect, the smallest slowdown the verdict would
find there with probability --power (default {{ default.power }}), from the variance the two runs
showed (each run's spread between its processes, as the test reads them): the
noncentral t of the same test, at alpha x power a point (what Benjamini-Hochberg asks
of each point when a change at every point is found at that share of them; where the
points are judged beyond a judged shared shift, a change at every point is the shift
line's and the MDE is for a change at a third of the points, alpha x power / 3; a change
at one point alone needs alpha / N, `mde_alone` in --format json). Below --min-effect it
reads "< {{ default.min_effect_pct }}": the verdict calls nothing smaller a change. The
summary line gives the comparison's median MDE; when every point's MDE is above
--min-effect it says the comparison could not have seen a change below the smallest of
them. Two runs measured apart also differ from run to run: the test's standard error is
multiplied by the run-to-run factor read from the store's earlier runs of these suites on
this machine (the title says so), and what every point moved by together is one shift
line under the table, judged against the shifts between those runs (`benchbench ab`
cancels both): the median of the points' ratios, less the points that changed on their
own (significant beyond it over the family; read again until they stay the same).

Where both runs counted a point's instructions (run --metric instructions), the
table adds the instructions per call of each run, their ratio and a mark by the
instruction verdict: slower or faster when the counts differ by --instructions-min-effect
or more (its default is below), same inside it, not significant when a side's repeated counts
moved by half of it. Counts are blind to memory stalls and other threads, and no
neighbour process can change them: a nightly on a shared runner can gate on them. Counts
of two counters (run --counter callgrind or pmu) are never compared: such a point's mark
is "counters differ", and a note says how many.

Exit codes: 3 when a point is slower (in time or in instructions) or newly failing
(regressed), or the shift line is slower, unless
--no-fail-on-regression; 0 otherwise; 1 error; 2 usage. Runs from different
environments can be compared; the differing fields are shown.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from benchbench.cli import flags
from benchbench.core.defaults import ALPHA, INSTRUCTIONS_MIN_EFFECT, MIN_EFFECT, POWER
from benchbench.core.errors import UsageError
from benchbench.core.units import format_time
from benchbench.views.tables import Column, Grid, wrap_note

if TYPE_CHECKING:
    from rich.text import Text

    from benchbench.analysis import compare

HELP = "compare two runs; exit 3 on regression"
EXIT_REGRESSION = 3


def _style(mark: str | None) -> str:
    """The colour of a mark in the table (numpy and scipy come with the verdict: here,
    not at the top, so that ``--help`` does not wait for them)."""
    from benchbench.analysis import compare

    styles = {
        compare.SLOWER: "red",
        compare.FAILING: "red",
        compare.FASTER: "green",
        compare.NEW: "cyan",
        compare.GONE: "yellow",
    }
    return styles.get(mark or "", "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "base", metavar="BASE", help="run id, prefix, label, latest, latest~N or run group"
    )
    parser.add_argument("contender", metavar="HEAD", help="the run judged against BASE")
    parser.add_argument(
        "--environment",
        metavar="ENV",
        help="resolve both runs among this environment's runs (id, prefix or machine label)",
    )
    add_verdict(parser)
    flags.add_store(parser)
    flags.add_format(parser)


def _percent(fraction: float) -> str:
    """``5%%``: a fraction as a percentage, escaped for argparse's help."""
    return f"{fraction:.0%}".replace("%", "%%")


def add_verdict(parser: argparse.ArgumentParser) -> None:
    """The verdict's flags (``compare`` and ``ab``): minimum effects, alpha, exit code."""
    parser.add_argument(
        "--min-effect",
        type=float,
        default=MIN_EFFECT,
        metavar="FRACTION",
        help="smallest change of the median that counts "
        f"(default %(default)s = {_percent(MIN_EFFECT)})",
    )
    parser.add_argument(
        "--instructions-min-effect",
        type=float,
        default=INSTRUCTIONS_MIN_EFFECT,
        metavar="FRACTION",
        help="smallest change of an instruction count that counts (default %(default)s = "
        f"{_percent(INSTRUCTIONS_MIN_EFFECT)}: twice what identical code varied between fresh "
        "callgrind processes, allocator left out; 0.01 suits points of 2^16 elements and up)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=ALPHA,
        metavar="P",
        help="significance level of the points compared as one family (their false "
        "discovery rate, Benjamini-Hochberg); each point's CI is at 1 - P "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--power",
        type=float,
        default=POWER,
        metavar="P",
        help="the chance at which the printed minimum detectable effect (MDE) is found "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--fail-on-regression",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="exit 3 when a point regressed (default on; --no-fail-on-regression exits 0)",
    )


def run(args: argparse.Namespace) -> int:
    from benchbench.run import sharding

    check_verdict(args)
    store = flags.store_from(args)
    base, base_rows = sharding.run_or_group(store, args.base, args.environment)
    contender, contender_rows = sharding.run_or_group(store, args.contender, args.environment)
    return judge(args, store, base, contender, rows=(base_rows, contender_rows))


def check_verdict(args: argparse.Namespace) -> None:
    """UsageError for a verdict flag out of range (before anything is read or measured)."""
    if not 0 <= args.min_effect < 1:
        raise UsageError(f"--min-effect must be a fraction in [0, 1), got {args.min_effect}")
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be in (0, 1), got {args.alpha}")
    if not 0 < args.power < 1:
        raise UsageError(f"--power must be in (0, 1), e.g. 0.8, got {args.power}")
    if not 0 <= args.instructions_min_effect < 1:
        raise UsageError(
            "--instructions-min-effect must be a fraction in [0, 1), "
            f"got {args.instructions_min_effect}"
        )


def judge(
    args: argparse.Namespace,
    store: Any,
    base: dict,
    contender: dict,
    rows: tuple[list[dict], list[dict]] | None = None,
) -> int:
    """Compare two stored runs, print the table (or JSON) and return the exit code: 3 on
    a regression unless ``--no-fail-on-regression``. The two sides of one ``benchbench
    ab`` run are judged paired (per-round log ratios). ``benchbench ab`` ends here too.
    ``rows`` are the two sides' measurements when they are not the runs' own (a run
    group's shards); by default each run's."""
    from benchbench.analysis import compare
    from benchbench.analysis.calibration import calibration_of
    from benchbench.analysis.rerun import run_to_run

    base_rows, contender_rows = rows or (
        store.measurements(base["id"]),
        store.measurements(contender["id"]),
    )
    paired = compare.lockstep_pair(base, contender) or compare.lockstep_pair(contender, base)
    rerun = shift = None
    if not paired:  # two runs measured apart: the store's earlier runs say how runs differ
        # A shift judged against earlier ones is taken out of every point, and the factor
        # is then read from the earlier pairs' points beyond their own shifts.
        rerun, shift = run_to_run(
            store,
            (base, base_rows),
            (contender, contender_rows),
            args.alpha,
            args.min_effect,
            calibration_of(store, contender, [*base_rows, *contender_rows]),
        )
    envs = [
        store.environment(r["environment_id"]) if r["environment_id"] else None
        for r in (base, contender)
    ]
    result = compare.compare_rows(
        base_rows,
        contender_rows,
        min_effect=args.min_effect,
        alpha=args.alpha,
        base_environment=(envs[0] or {}).get("fields"),
        contender_environment=(envs[1] or {}).get("fields"),
        instructions_min_effect=args.instructions_min_effect,
        paired=paired,
        power=args.power,
        rerun=rerun,
        shift=shift,
    )
    if args.format == "json":
        flags.print_json(
            {"base": _run_info(base), "contender": _run_info(contender), **result.to_dict()}
        )
    else:
        _print(args, result, base, contender)
    regressed = bool(result.regressions) or result.shift_regressed
    return EXIT_REGRESSION if regressed and args.fail_on_regression else 0


def _run_info(run: dict) -> dict:
    started = run.get("started_at")
    return {
        "run_id": run["id"],
        "label": run.get("label"),
        "started_at": started.isoformat() if started is not None else None,
        "git_sha": run.get("git_sha"),
        "environment_id": run.get("environment_id"),
    }


def _name(run: dict) -> str:
    return run["id"][:8] + (f" ({run['label']})" if run.get("label") else "")


def grid(result: compare.Comparison, base: dict, contender: dict) -> Grid:
    """Per point: both medians, the ratio with its CI, q and the mark; geometric means
    as notes under it."""
    from rich.text import Text

    from benchbench.analysis.detectable import change_at, format_effect, point_alpha
    from benchbench.analysis.rerun import scope

    rows: list[tuple[str | Text, ...]] = [
        (
            p.label,
            format_time(p.base_median_s) if p.base_median_s is not None else "-",
            format_time(p.contender_median_s) if p.contender_median_s is not None else "-",
            f"{p.ratio:.3f}" if p.ratio is not None else "-",
            f"{p.ratio_ci_low:.3f}-{p.ratio_ci_high:.3f}"
            if p.ratio_ci_low is not None and p.ratio_ci_high is not None
            else "-",
            f"{p.q_value:.2g}" if p.q_value is not None else "-",
            format_effect(p.mde, result.min_effect),
            Text(p.mark + (f": {p.reason}" if p.reason else ""), style=_style(p.mark)),
        )
        for p in result.points
    ]
    notes = [f"geometric mean {w}: {v:.3f}" for w, v in result.geomean_by_workload().items()]
    tested = sum(p.q_value is not None for p in result.points)
    if tested:
        notes.insert(
            0,
            f"q: a point's p-value adjusted over the {tested} points tested "
            f"(Benjamini-Hochberg); significant when q < {result.alpha:g}",
        )
        notes.insert(
            1,
            f"MDE: the smallest slowdown found at power {100 * result.power:.0f} % "
            f"(alpha {point_alpha(result.alpha, result.power, result.share):.2g} a point: "
            f"{change_at(result.share)}); "
            "a change at one point alone needs more (mde_alone in --format json)",
        )
    if result.paired:
        pairing = ((contender.get("config") or {}).get("ab") or {}).get("pairing")
        notes.insert(0, paired_note(result, pairing or "lockstep"))
    if result.geomean is not None and math.isfinite(result.geomean):
        notes.append(f"geometric mean overall: {result.geomean:.3f} (head / base)")
    if result.shift is not None:
        notes.append(result.shift.line)
    if result.after_shift and result.shift is not None:
        notes.append(
            f"ratio ÷ shift: each point's ratio over the shared shift (x{result.shift.ratio:.3f}),"
            " as its interval, q, MDE and mark are; the geometric means are of the points' own"
            " ratios"
        )
    columns: tuple[Column, ...] = (
        Column("point"),
        Column("base", "right"),
        Column("head", "right"),
        Column("ratio ÷ shift" if result.after_shift else "ratio", "right"),
        Column(f"{1 - result.alpha:.0%} CI", "right"),
        Column("q", "right"),
        Column("MDE", "right"),
        Column("mark"),
    )
    if result.counted:
        columns = (*columns[:-1], *INSTRUCTION_COLUMNS, columns[-1])
        rows = [
            (*r[:-1], *_instruction_cells(p), r[-1])
            for r, p in zip(rows, result.points, strict=True)
        ]
    # Two runs measured apart also differ by the machine's drift between runs: the title
    # says whether the intervals hold it (the run-to-run factor) or not.
    held = "paired by round" if result.paired else scope(result.rerun, "these runs")
    title = f"head {_name(contender)} vs base {_name(base)}: {1 - result.alpha:.0%} CI {held}"
    return Grid.of(columns, rows, title=title, notes=notes)


def paired_note(result: compare.Comparison, pairing: str = "lockstep") -> str:
    """How an ``ab`` comparison was tested: ``measured in lockstep (benchbench ab):
    paired t on the per-round log ratios, 5 pairs a point`` (``in duet`` for
    ``ab --duet``'s runs), and the points that could not be paired, named with the test
    they fell back to."""
    tested = [p for p in result.points if p.test]
    pairs = sorted({p.pairs for p in tested if p.test == "paired t"})
    counted = (
        f"{pairs[0]} pairs a point"
        if len(pairs) == 1
        else f"{pairs[0]}-{pairs[-1]} pairs a point (rounds lost on a side dropped from both)"
        if pairs
        else "no pairs"
    )
    text = f"measured in {pairing} (benchbench ab): paired t on the per-round log ratios, {counted}"
    unpaired = [f"{p.label}: {p.test}" for p in tested if p.test != "paired t"]
    if unpaired:
        text += f"; {len(unpaired)} point(s) not paired: " + "; ".join(unpaired[:6])
    return text


#: The columns a comparison adds where both runs counted instructions.
INSTRUCTION_COLUMNS = (
    Column("base instr", "right"),
    Column("head instr", "right"),
    Column("instr ratio", "right"),
    Column("instr mark"),
)


def _instruction_cells(p: compare.PointComparison) -> tuple[str | Text, ...]:
    from rich.text import Text

    from benchbench.views.results import format_instructions

    if p.instructions_mark is None:
        return ("-", "-", "-", "-")
    return (
        format_instructions(p.base_instructions),
        format_instructions(p.contender_instructions),
        f"{p.instructions_ratio:.4f}" if p.instructions_ratio is not None else "-",
        Text(p.instructions_mark, style=_style(p.instructions_mark)),
    )


def _print(
    args: argparse.Namespace, result: compare.Comparison, base: dict, contender: dict
) -> None:
    from benchbench.analysis import compare
    from benchbench.analysis.sides import COUNTERS_DIFFER

    flags.print_tables(args, [grid(result, base, contender)])
    failing = [p for p in result.points if p.mark == compare.FAILING]
    flags.print_failures([(p.label, p.reason or "no reason recorded") for p in failing])
    err = flags.stderr()
    if not result.same_environment:
        err.print("[yellow]the runs come from different environments; differing fields:[/yellow]")
        for key, (b, c) in result.environment_diff.items():
            err.print(f"  {key}: {b!r} -> {c!r}")
    counts = ", ".join(f"{n} {mark}" for mark, n in result.counts().items() if n)
    if marks := ", ".join(f"{n} {m}" for m, n in result.instruction_counts().items()):
        counts += f"; instructions: {marks} (min effect {result.instructions_min_effect:.1%})"
    if apart := sum(p.instructions_mark == COUNTERS_DIFFER for p in result.points):
        err.print(
            f"[yellow]instructions not compared at {apart} point(s): the runs counted them "
            "with different --counter (callgrind, pmu), whose counts are not one series[/yellow]"
        )
    verdict = (
        f"{counts}; {len(result.regressions)} regressed (min effect {result.min_effect:.0%}, "
        f"alpha {result.alpha})"
    )
    if result.shift_regressed:
        verdict += "; every point slower together beyond the machine's shifts (the shift line)"
    for text in wrap_note(verdict):
        err.print(text)
    if (line := result.detectable.sentence(result.paired)) is not None:
        for text in wrap_note(line):  # within the width of the notes under a table
            err.print(text, style="yellow" if result.detectable.blind else None)
