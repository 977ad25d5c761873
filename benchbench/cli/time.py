"""Compare Python statements at several sizes, like `python -m timeit` with devices and CIs.

Each statement is a variant: `n` (elements), `shape`, `device`, `dtype` (a
torch.dtype), `torch`, `np` and `ctx` (a seeded input generator) are bound at every
point, and the setup makes the inputs (default: `x` and `y` of the point's shape,
dtype and device, uniform in [0.5, 1.5)). Every statement is evaluated once before
anything is timed; one that computes something different from the base statement
(--base) is reported as a wrong result and not timed. The statements are measured
interleaved (one sample of each per pass, passes in a shuffled order) in each worker
process, so drift hits them alike and a crash costs one point.

The table gives per size each statement's median time and its ratio to the base
(median time over the base's: below 1 is faster) with a 95 %
confidence interval and benchbench's one verdict (:mod:`benchbench.analysis.verdict`):
slower / faster when significant and the ratio is beyond 1 + m / 1 / (1 + m), same
when significant but inside, not significant otherwise (m is --min-effect). It ends
with the sizes where a verdict flips between faster and slower (crossovers), then the
warnings of the points on stderr (one line per kind, with how many points had it).

--threads sets torch's threads in the worker (default {{ default.threads }}; 'all':
torch's default, one per core), --cpus pins it to cores; a point with more threads
than the cores other processes left idle during it gets a warning.

Example: benchbench time 'torch.rsqrt(x)' '1 / torch.sqrt(x)' --size 2**10..2**22

--size takes numbers of elements (one-dimensional inputs) or shapes, separated by
commas: 1024,4096; 2**10..2**22 and 1k..16M (the start, then the powers of two up to
the end); 64x1024 or (64,1024); 64x1024..8192 (a range on one dimension: 64x1024,
64x2048, 64x4096, 64x8192). Sizes are at least 1 and at most 2**62 elements.

Every flag, --plot's file name included (its extension and folder), is checked before
anything is measured or a store opened: a bad name never loses a measurement.

Exit codes: 0 every statement measured at every point; 1 a point failed (including
a wrong result) or nothing could be measured; 2 usage error (a statement with a
syntax or name error, a malformed --size, a --plot that cannot be written).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.text import Text

from benchbench.cli import flags
from benchbench.core.defaults import MIN_EFFECT, PLOT_FORMATS, TIME_BUDGET_S
from benchbench.core.errors import UsageError
from benchbench.core.notes import merge_warnings, names_process
from benchbench.core.units import SHAPE_FORMS, format_size, format_time, parse_shapes
from benchbench.core.values import ITEMSIZE, Result, point_name
from benchbench.measure.statements import check_names, parse_statements
from benchbench.views.tables import Cell, Column, Grid

if TYPE_CHECKING:
    from benchbench.analysis.variants import Crossover, Row
    from benchbench.run.statements import TimeConfig, TimeOutcome

HELP = "compare statements at several sizes (ratio, CI, verdict, crossover)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("statements", nargs="+", metavar="STATEMENT", help="Python expressions")
    parser.add_argument(
        "--setup",
        metavar="CODE",
        help="code making the inputs at each point, e.g. "
        "'x = torch.rand(n, device=device, dtype=dtype) + 0.5' (default: x and y uniform "
        "in [0.5, 1.5))",
    )
    parser.add_argument(
        "--size",
        default="2**10..2**22",
        metavar="SIZES",
        help=f"sizes in elements or shapes: {SHAPE_FORMS}; a range gives its start and "
        "the powers of two up to its end; the statements see n (elements) and shape "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--device",
        metavar="LIST",
        help="cpu,cuda,mps (default: $BENCHBENCH_DEVICE or the settings file's device, else cpu)",
    )
    parser.add_argument(
        "--dtype", default="float32", metavar="LIST", help="e.g. float32,bfloat16 (default float32)"
    )
    parser.add_argument(
        "--base",
        "--reference",  # its name until 0.1.0; kept as an alias until 0.2
        dest="reference",
        type=int,
        default=1,
        metavar="N",
        help="the base: the statement the others (each a head) are compared with "
        "(default: the first; --reference is its old name)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=TIME_BUDGET_S,
        metavar="SECONDS",
        help="sampling time cap per point, split across its rounds (default %(default)s)",
    )
    flags.add_rounds(parser)
    flags.add_allocator(parser)
    parser.add_argument(
        "--min-effect",
        type=float,
        default=MIN_EFFECT,
        metavar="FRACTION",
        help="smaller significant differences are reported as 'same' (default %(default)s)",
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="write throughput versus size (png, svg, pdf)"
    )
    flags.add_threads(parser)
    flags.add_store(parser, create=True)
    parser.add_argument("--label", metavar="NAME", help="a name for the stored run")
    parser.add_argument("--no-store", action="store_true", help="do not store the results")
    flags.add_format(parser)


def _list(text: str, flag: str, known: Sequence[str]) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise UsageError(f"{flag} is empty; give e.g. {known[0]}")
    for name in names:
        if name.partition(":")[0] not in known:
            raise UsageError(f"{flag} {name!r} is unknown; known: {', '.join(known)}")
    return names


def config_from(args: argparse.Namespace) -> TimeConfig:
    from benchbench.measure.policy import Policy
    from benchbench.run.statements import TimeConfig

    if args.budget <= 0:
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget}")
    if not 0 <= args.min_effect < 1:
        raise UsageError(f"--min-effect must be a fraction in [0, 1), got {args.min_effect}")
    if not 1 <= args.reference <= len(args.statements):
        raise UsageError(
            f"--base {args.reference} is not a statement number; give 1 to {len(args.statements)}"
        )
    # Checked here too, so that a bad statement is reported before a store is opened.
    check_names(parse_statements(args.statements), args.setup)
    return TimeConfig(
        statements=tuple(args.statements),
        sizes=tuple(parse_shapes(args.size)),
        setup=args.setup,
        devices=_list(args.device, "--device", flags.DEVICES),
        dtypes=_list(args.dtype, "--dtype", list(ITEMSIZE)),
        reference=args.reference - 1,
        policy=Policy(max_time_s=args.budget),
        rounds=flags.rounds_from(args),
        min_effect=args.min_effect,
        label=args.label,
        threads=flags.threads_from(args),
        cpus=flags.cpus_from(args),
        allocator=args.allocator or "system",
    )


def run(args: argparse.Namespace) -> int:
    # torch comes with the runner: here, not at the top, so that `time --help` answers at once.
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from benchbench.analysis.variants import find_crossovers, rows_from_results
    from benchbench.run.statements import time_statements

    config = config_from(args)
    if args.plot:  # before measuring: a bad name would lose the whole measurement
        flags.check_output("--plot", args.plot, PLOT_FORMATS)
    store = None if args.no_store else flags.store_from(args)
    err = flags.stderr()
    started = time.monotonic()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=err,
        transient=True,
    ) as progress:
        on_event = flags.progress_events(progress, "timing")

        outcome = time_statements(config, store, on_event)
    elapsed = time.monotonic() - started
    min_effect = MIN_EFFECT if config.min_effect is None else config.min_effect
    rows = rows_from_results(outcome.results, config.reference_text, min_effect)
    crossovers = find_crossovers(rows)
    if args.plot:
        from benchbench.views.plot import save_figure

        save_figure(_plot(rows, config), args.plot)
    if args.format == "json":
        flags.print_json(document(config, outcome, rows, crossovers, elapsed))
    else:
        found = grids(config, rows)
        if crossovers:
            crossings = tuple(f"crossover: {c.describe()}" for c in crossovers)
            found[-1] = dataclasses.replace(found[-1], notes=(*found[-1].notes, *crossings))
        flags.print_tables(args, found)
    flags.print_failures(failures(rows))
    statuses = [r.status for r in outcome.results]
    stored = f"; run {outcome.run_id} stored in {store.url}" if store and outcome.run_id else ""
    err.print(
        f"{statuses.count('ok')} measured, {statuses.count('skipped')} skipped, "
        f"{statuses.count('error')} failed in {elapsed:.1f} s{stored}"
    )
    for line in warning_lines(outcome.results):
        err.print(f"[yellow]warning: {escape(line)}[/yellow]")
    if args.plot:
        err.print(f"plot written to {args.plot}")
    if "ok" not in statuses:
        err.print("[red]nothing could be measured[/red]")
        return 1
    return 1 if "error" in statuses else 0


def warning_lines(results: Sequence[Result]) -> list[str]:
    """One line per kind of warning (its text before the first colon or parenthesis):
    the first full text of that kind (for other processes, the busiest of them, as
    :func:`~benchbench.core.notes.merge_warnings` says), and how many results had one."""
    texts: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for result in results:
        kinds = []
        for text in dict.fromkeys(result.warnings):
            kind = text.split(":", 1)[0].split(" (", 1)[0]
            texts.setdefault(kind, []).append(text)
            kinds.append(kind)
        for kind in dict.fromkeys(kinds):
            counts[kind] = counts.get(kind, 0) + 1
    lines = []
    for kind, found in texts.items():
        named = [t for t in found if names_process(t)]
        text = merge_warnings(named)[0] if named else found[0]
        lines.append(f"{text} ({counts[kind]} result(s))" if counts[kind] > 1 else text)
    return lines


def _plot(rows: Sequence[Row], config: TimeConfig) -> Any:
    from benchbench.views.variants import plot_rows

    return plot_rows(rows, title=" vs ".join(config.statements))


def document(
    config: TimeConfig,
    outcome: TimeOutcome,
    rows: Sequence[Row],
    crossovers: Sequence[Crossover],
    elapsed_s: float,
) -> dict[str, Any]:
    """The ``--json`` document: statements, one result per statement and point, crossovers."""
    return {
        "run_id": outcome.run_id,
        "label": config.default_label() if outcome.run_id else config.label,
        "statements": list(config.statements),
        "reference": config.reference_text,
        "setup": config.setup,
        "min_effect": config.min_effect,
        "elapsed_s": elapsed_s,
        "results": [row.to_dict() for row in rows],
        "crossovers": [
            {
                "variant": c.variant,
                "reference": c.reference,
                "device": c.device,
                "dtype": c.dtype,
                "size": c.size,
                "below": c.below,
                "above": c.above,
                "between": list(c.between),
                "shapes": [list(s) for s in c.shapes] if c.shapes else None,
            }
            for c in crossovers
        ],
    }


_VERDICT_STYLE = {"faster": "green", "slower": "red", "same": "dim", "not significant": "dim"}


def _time_cell(row: Row | None) -> Text:
    if row is None:
        return Text("-")
    if row.status != "ok" or row.median_s is None:
        style = "yellow" if row.status == "skipped" else "red"
        return Text((row.reason or row.status).split(":")[0], style=style)
    from benchbench.views.run_notes import unstable  # numpy and the store: not for --help

    if unstable(dataclasses.asdict(row)):  # as `run`'s table: no ±5,000,000,000 %
        return Text(f"{format_time(row.median_s)} unstable", style="yellow")
    half = (row.ci_high_s or 0) - (row.ci_low_s or 0)
    return Text(f"{format_time(row.median_s)} ±{half / (2 * row.median_s):.1%}")


def _ratio_cell(row: Row | None) -> Text:
    if row is None or row.ratio is None:
        return Text("-")
    from benchbench.views.run_notes import unstable

    low, high = row.ratio_ci_low, row.ratio_ci_high
    if low is None or high is None:
        interval = "[-]"
    elif unstable({"median_s": row.ratio, "ci_low_s": low, "ci_high_s": high}):
        interval = "[unstable]"  # [0.000, 2940908358486.411] said less
    else:
        interval = f"[{low:.3f}, {high:.3f}]"
    text = Text(f"{row.ratio:.3f} {interval} ")
    text.append(row.verdict or "", style=_VERDICT_STYLE.get(row.verdict or "", ""))
    return text


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) if len(shape) > 1 else format_size(shape[0])


def grids(config: TimeConfig, rows: Sequence[Row]) -> list[Grid]:
    """One table per device and dtype: median per statement, ratio and verdict per size;
    skipped points' reasons as notes under it."""
    out: list[Grid] = []
    numbers = {text: i for i, text in enumerate(config.statements, start=1)}
    ref = config.reference + 1
    others = [i for i in numbers.values() if i != ref]
    columns = [
        Column("size", "right"),
        *(Column(f"#{i} {text}", "right") for text, i in numbers.items()),
        *(Column(f"#{i} vs #{ref}") for i in others),
    ]
    for device in config.devices:
        for dtype in config.dtypes:
            by_shape: dict[tuple[int, ...], dict[int, Row]] = {}
            for row in rows:
                if row.device == device and row.dtype == dtype:
                    shape = row.shape or (row.size,)
                    by_shape.setdefault(shape, {})[numbers[row.variant]] = row
            title = f"{dtype}, {device}"
            if others:
                title += (
                    f" (ratio: median time / median time of the base, #{ref}; below 1 is faster)"
                )
            cells: list[tuple[Cell, ...]] = []
            notes: list[str] = []
            for shape in sorted(by_shape, key=lambda s: (math.prod(s), s)):
                found = by_shape[shape]
                cells.append(
                    (
                        _shape_text(shape),
                        *(_time_cell(found.get(i)) for i in numbers.values()),
                        *(_ratio_cell(found.get(i)) for i in others),
                    )
                )
                notes.extend(
                    f"{_shape_text(shape)} #{i}: {row.reason}"
                    for i, row in sorted(found.items())
                    if row.status == "skipped" and row.reason
                )
            out.append(Grid.of(columns, cells, title=title, notes=notes))
    return out


def failures(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """``(label, full reason)`` of every failed statement at every point."""
    return [
        (
            point_name("time", row.variant, row.dtype, row.device)
            + f"(n={'x'.join(map(str, row.shape or (row.size,)))})",
            row.reason or "no reason recorded",
        )
        for row in rows
        if row.status == "error"
    ]
