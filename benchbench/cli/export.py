"""Export one run for another store or another tool.

Formats: ``bundle`` (a self-contained JSON document that ``benchbench import`` reads;
gzip-compressed when the file name ends in .gz), ``pyperf`` (``python -m pyperf
stats/hist/compare_to`` read it), ``pytest-benchmark`` (``pytest-benchmark compare``
reads it), ``csv`` (one row per point), ``github-action-benchmark`` (its
``customSmallerIsBetter`` JSON list) and ``bmf`` (Bencher Metric Format). Times are per
call, in seconds, except in the two CI trackers' formats: nanoseconds, the median with
its 95 % interval (github-action-benchmark's ``range`` is ``± `` the larger half-width,
the exact bounds in ``extra``; BMF's ``lower_value`` and ``upper_value`` are the bounds).

A pyperf file holds 9 values per point, the octiles of its per-call times (min, Q1,
median, Q3 and max exact), so that two exports always have equal counts and
``compare_to`` can test each benchmark for significance; the metadata
``benchbench_samples`` is the real sample count. The store must exist.

Instruction counts (``run --metric instructions``) travel in ``csv`` and ``bundle``;
pyperf and pytest-benchmark files hold times, so a run that only counted is refused
there with a usage error that names those two formats.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchbench.cli import flags
from benchbench.core.errors import NotFoundError, UsageError

HELP = (
    "export a run as a bundle, pyperf, pytest-benchmark, CSV, github-action-benchmark "
    "or Bencher (bmf) file"
)
FORMATS = ("bundle", "pyperf", "pytest-benchmark", "csv", "github-action-benchmark", "bmf")
#: The CI trackers' JSON documents: format name -> the builder's name in
#: ``interchange.ci_formats`` (run, env, rows) -> document; imported when used.
CI_FORMATS = {
    "github-action-benchmark": "github_action_benchmark",
    "bmf": "bencher_metric_format",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="run id, id prefix, label or 'latest'")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="bundle",
        help="default bundle; github-action-benchmark is its customSmallerIsBetter tool, "
        "bmf is Bencher's JSON adapter (both in ns, median and 95%% interval)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", required=True, help="file to write ('-' for stdout)"
    )
    flags.add_store(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.interchange import ci_formats, exports
    from benchbench.interchange.bundle import export_bundle, write_bundle

    flags.check_output("-o", args.output)
    store = flags.store_from(args)
    out = Path(args.output)
    run_row = store.resolve_run(args.run_ref)
    if args.format == "bundle":
        document = export_bundle(store, run_row["id"])
        if args.output == "-":
            flags.print_json(document)
        else:
            write_bundle(document, out)
        count = len(document["measurements"])
    else:
        env = store.environment(run_row["environment_id"]) if run_row["environment_id"] else None
        rows = store.measurements(run_row["id"])
        count = len(rows)
        if args.format == "csv":
            text = exports.csv_text(run_row, env, rows)
        elif args.format in CI_FORMATS:
            ci_document = getattr(ci_formats, CI_FORMATS[args.format])(run_row, env, rows)
            if not ci_document:
                raise NotFoundError(
                    f"run {run_row['id']} has no measured point: a {args.format} file needs one"
                )
            count = len(ci_document)
            text = json.dumps(ci_document, indent=2, allow_nan=False) + "\n"
        elif args.format == "pytest-benchmark":
            document = exports.pytest_benchmark_document(run_row, env, rows)
            count = len(document["benchmarks"])
            text = json.dumps(document, indent=2, allow_nan=False) + "\n"
        else:
            suite = exports.pyperf_suite(run_row, env, rows)
            if suite is None:
                raise NotFoundError(
                    f"run {run_row['id']} has no measured point: a pyperf file needs one"
                )
            count = len(suite)
            if args.output == "-":
                raise UsageError("--format pyperf needs a file name (-o FILE), not '-'")
            suite.dump(str(out), replace=True)
            text = ""
        if text:
            if args.output == "-":
                flags.stdout().file.write(text)
            else:
                out.write_text(text, encoding="utf-8")
    if args.output != "-":
        flags.stderr().print(
            f"run {run_row['id']}: {count} points written to {out} ({args.format})"
        )
    return 0
