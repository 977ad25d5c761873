"""Detect regressions over the stored history and list the open alerts.

Every (benchmark, environment) series is analysed with E-divisive change-point
detection (Hunter / Apache Otava's method); a worsening step of at least
--min-effect becomes an alert with the last good and first bad run and their
commits. Series too noisy to judge are listed as unstable instead of alerting.
Alerts stay until annotated: `benchbench annotate ALERT --acknowledge | --ignore |
--expected` (expected resets the series' baseline).

A series needs at least 6 runs with a measured value before a change can be found
in it (3 at the old level, 3 at the new); the command says how many series have
fewer and how many runs they have. It needs an existing store (a missing one is an
error, not a new empty store) and saves new alerts into it.

--metric instructions judges the series of instruction counts per call (runs made with
`run --metric instructions`) instead of times; no neighbour moves a count, and
fresh processes' counts of one point agree within ~0.5 % (the C allocator's own
instructions left out), so the default there is compare's --instructions-min-effect
(0.02); 0.01 suits points of 2^16 elements and more.
These are callgrind's counts: a run counted with the CPU's own counter (run --counter pmu,
the C allocator's instructions in its counts) is a gap in them, never a step.

The series are read from the store's series index without a row object per
measurement and judged in one process per CPU (--jobs) once there are 2,000 or more.

The smallest step each series could show (its minimum detectable effect, MDE): the
step at the newest 3 runs that the detector's t-test (p < 0.001) finds with probability
0.8, from the series' own run-to-run noise and length (analysis/detectable.py,
`step_effect`; the split search finds such a step somewhat less often, so it is a
floor). The summary gives the median over the series judged and says when no series
could see --min-effect; --format json lists it per series (`detectable`).

Exit codes: 0; 3 with --fail when an open (unannotated) regression is listed.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import TYPE_CHECKING

from benchbench.cli import flags
from benchbench.core.defaults import INSTRUCTIONS_MIN_EFFECT
from benchbench.core.errors import UsageError
from benchbench.core.units import format_size, format_time
from benchbench.core.values import point_name
from benchbench.views.tables import Grid

if TYPE_CHECKING:
    from benchbench.analysis.detectable import Detectable
    from benchbench.analysis.regressions import SeriesReport

HELP = "detect regressions over history and list alerts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_store(parser)
    flags.add_format(parser)
    parser.add_argument(
        "--since",
        metavar="DATE",
        help="only alerts whose first bad run started on or after DATE (YYYY-MM-DD)",
    )
    parser.add_argument(
        "--metric",
        choices=("time", "instructions"),
        default="time",
        help="the series judged and the alerts listed: median times (default) or instruction "
        "counts per call",
    )
    parser.add_argument(
        "--min-effect",
        type=float,
        default=None,
        metavar="FRACTION",
        help="smallest relative slowdown that alerts (default {{ default.min_effect }}; with "
        "--metric instructions {{ default.instructions_min_effect }})",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes that judge the series (default: one per CPU, from 2,000 series on)",
    )
    parser.add_argument(
        "--all", action="store_true", help="also list acknowledged, ignored and expected alerts"
    )
    parser.add_argument(
        "--fail", action="store_true", help="exit 3 when an open regression is listed"
    )


def parse_since(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since {text!r} is not a date; use YYYY-MM-DD or an ISO timestamp"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def history_note(reports: list[SeriesReport], store_url: str) -> str | None:
    """Why some (or all) series cannot alert yet: the runs they need and have, or None."""
    from benchbench.analysis.regressions import MIN_RUNS

    short = [r for r in reports if r.too_short]
    if not reports:
        return (
            f"no history in {store_url}: regression detection needs at least {MIN_RUNS} runs "
            "per series (benchmark, environment), it has 0 runs with a measured point; "
            f"`benchbench run` the same suites on this machine {MIN_RUNS} times or more"
        )
    if not short:
        return None
    counts = sorted(r.points for r in short)
    has = f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]} to {counts[-1]}"
    return (
        f"{len(short)} of {len(reports)} series have too little history to judge: "
        f"regression detection needs at least {MIN_RUNS} runs with a measured value per "
        f"series (benchmark, environment), they have {has}; run the suites again to "
        "extend them"
    )


#: The columns of :func:`alerts_grid`.
ALERT_COLUMNS = (
    "alert",
    "status",
    "severity",
    "change",
    "benchmark",
    "before → after",
    "commits",
    "first bad run",
)


def alerts_grid(alerts: list[dict], title: str) -> Grid:
    """One row per alert: its change, the benchmark's label, the times and commits."""
    rows = []
    for a in alerts:
        d = a["detail"] or {}
        good, bad = d.get("good_sha"), d.get("bad_sha")
        commits = f"{(good or '?')[:8]}..{(bad or '?')[:8]}" if good or bad else "-"
        name = point_name(a["workload"], a["variant"], a["dtype"], a["device"])
        rows.append(
            (
                str(a["id"]),
                a["status"],
                a["severity"],
                f"{a['rel_change']:+.1%}",
                f"{name}(n={format_size(a['size'])})",
                _before_after(d),
                commits,
                f"{a['first_bad_run_id'][:8]} {a['first_bad_at']:%Y-%m-%d}",
            )
        )
    return Grid.of(ALERT_COLUMNS, rows, title=title)


def _before_after(detail: dict) -> str:
    """``1.2 ms → 1.4 ms``, or instruction counts for an alert on counts."""
    from benchbench.views.results import format_instructions

    if detail.get("metric") == "instructions":
        before, after = detail.get("before_instructions"), detail.get("after_instructions")
        return f"{format_instructions(before)} → {format_instructions(after)} instr"
    return f"{format_time(detail.get('before_s'))} → {format_time(detail.get('after_s'))}"


def _steps(reports: list[SeriesReport]) -> dict[tuple[str, str], float]:
    """The MDE of each judged series (neither too short nor unstable)."""
    from benchbench.analysis.detectable import step_effect

    return {
        (r.benchmark_id, r.environment_id): step_effect(r.noise_rel, r.points)
        for r in reports
        if not r.too_short and not r.unstable
    }


def _step_line(seen: Detectable) -> str:
    from benchbench.analysis.detectable import below, format_effect

    how = f"power {100 * seen.power:.0f} %, the detector's p < 0.001, at the newest 3 runs"
    if seen.blind:
        return (
            "no series could have shown a step below "
            f"{format_effect(below(seen.smallest))} ({how}; "
            f"median {format_effect(seen.median)}); more runs per series, or `--metric "
            "instructions`"
        )
    return (
        f"smallest step a series could show: median {format_effect(seen.median)} over "
        f"{len(seen.known)} series, {seen.below_min_effect} could see the "
        f"{100 * seen.min_effect:g} % minimum effect ({how})"
    )


def run(args: argparse.Namespace) -> int:
    from benchbench.analysis.changepoint import P_THRESHOLD
    from benchbench.analysis.detectable import detectable, finite
    from benchbench.analysis.regressions import MIN_RUNS, detect
    from benchbench.store.history import list_alerts
    from benchbench.views.results import _iso

    if args.min_effect is None:
        args.min_effect = INSTRUCTIONS_MIN_EFFECT if args.metric == "instructions" else 0.05
    if not 0 < args.min_effect < 1:
        raise UsageError(f"--min-effect must be a fraction between 0 and 1, got {args.min_effect}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    since = parse_since(args.since)
    store = flags.store_from(args)
    reports, new = detect(store, min_effect=args.min_effect, metric=args.metric, jobs=args.jobs)
    # In the series' order, not the order the engine read them in: the same store content
    # lists the same way from SQLite and PostgreSQL (the soak compares the two).
    reports = sorted(reports, key=lambda r: (r.benchmark_id, r.environment_id))
    alerts = [
        alert
        for alert in list_alerts(store, since=since, statuses=None if args.all else ("open",))
        # One metric's alerts: a summary that lists the counts' and then the times'
        # regressions would otherwise show each alert twice, once under the wrong metric.
        if ((alert.get("detail") or {}).get("metric") or "time") == args.metric
    ]
    unstable = [r for r in reports if r.unstable]
    note = history_note(reports, store.url)
    open_count = sum(1 for a in alerts if a["status"] == "open")
    steps = _steps(reports)
    seen = detectable(list(steps.values()), args.min_effect)
    if args.format == "json":
        flags.print_json(
            {
                "series": len(reports),
                "new_alerts": new,
                "alerts": [{k: _iso(v) for k, v in a.items()} for a in alerts],
                "unstable": [
                    {
                        "benchmark_id": r.benchmark_id,
                        "environment_id": r.environment_id,
                        "noise_rel": r.noise_rel,
                    }
                    for r in unstable
                ],
                "min_runs": MIN_RUNS,
                "detectable": {
                    **seen.to_dict(),
                    "alpha_point": P_THRESHOLD,
                    "series": [
                        {"benchmark_id": b, "environment_id": e, "mde": finite(m)}
                        for (b, e), m in steps.items()
                    ],
                },
                "too_short": [
                    {
                        "benchmark_id": r.benchmark_id,
                        "environment_id": r.environment_id,
                        "runs": r.points,
                    }
                    for r in reports
                    if r.too_short
                ],
            }
        )
        if note:
            flags.print_note(note)
    else:
        flags.print_tables(args, [alerts_grid(alerts, f"regressions in {store.url}")])
        flags.stderr().print(
            f"{len(reports)} series, {len(unstable)} too noisy to judge, {new} new alert(s), "
            f"{open_count} open"
        )
        if seen.smallest is not None and seen.median is not None:
            flags.print_note(_step_line(seen))
        if note:
            flags.print_note(note)
    return 3 if args.fail and open_count else 0
