"""Capture the aten operator calls of your own callable (a model's forward, a training
step) into a suite file, one workload per distinct call, to see where its time goes.

TARGET is MODULE_OR_FILE:CALLABLE, e.g. my_model.py:model or pkg.models:step (a
dotted name such as model.forward works). The callable runs once, with the arguments
the --args-from factory returns (a tuple is the positional arguments; the global
torch generator is seeded with 0 first), under a TorchDispatchMode that records every
aten call: its overload, each tensor's shape, strides, dtype, device and value range,
the scalar arguments and how many times the exact call happened. A training step
that calls out.sum().backward() records the backward's calls too.

View and metadata ops (view, t, expand, _unsafe_view, detach...) move no data and are
listed in the file's docstring, not timed. The written file is an ordinary suite:

  benchbench capture my_model.py:model --args-from make_inputs -o my_model_ops.py
  benchbench run my_model_ops.py --budget 0.2
  benchbench breakdown latest
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from benchbench.cli import flags
from benchbench.core.errors import UsageError
from benchbench.views.tables import Column, Grid

HELP = "record the aten calls of your callable into a suite file (see `breakdown`)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE_OR_FILE:CALLABLE", help="the callable to capture")
    parser.add_argument(
        "--args-from",
        metavar="FACTORY",
        help="a function returning the callable's arguments: NAME in the same module, or "
        "MODULE_OR_FILE:NAME (default: the callable takes no arguments)",
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE.py", help="the suite file to write"
    )
    parser.add_argument(
        "--name", help="the suite's name (default: the output file's name without .py)"
    )
    flags.add_format(parser)


def run(args: argparse.Namespace) -> int:
    # torch comes with the capture: here, so that `capture --help` answers at once.
    from benchbench.suite.capture import capture
    from benchbench.suite.capture_file import load_target, render, split_target, suite_name_for
    from benchbench.suite.captured import factory_inputs

    output = Path(args.output)
    if output.suffix != ".py":
        raise UsageError(f"-o {args.output!r}: a suite file ends in .py, e.g. -o my_model_ops.py")
    suite_name = suite_name_for(output, args.name)
    target = split_target(args.target, "target")
    factory = None
    if args.args_from:
        factory = (
            split_target(args.args_from, "--args-from")
            if ":" in args.args_from
            else (target[0], args.args_from)
        )
    fn = load_target(*target)
    make = load_target(*factory) if factory else None
    try:
        inputs = factory_inputs(make)
    except Exception as exc:
        raise UsageError(
            f"--args-from {args.args_from!r} raised {type(exc).__name__}: {exc}"
        ) from None
    captured = capture(fn, *inputs)
    if not captured.calls:
        raise UsageError(
            f"capture of {args.target!r} recorded no aten call that moves data "
            f"({len(captured.views)} view call(s)); does it compute with torch tensors?"
        )
    command = "benchbench capture " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    output.write_text(
        render(captured, suite_name=suite_name, target=target, factory=factory, command=command)
    )
    grid = Grid.of(
        [Column("op"), Column("calls", "right"), Column("distinct", "right")],
        [
            (op, str(calls), str(sum(1 for c in captured.calls if c.op == op)))
            for op, calls in captured.summary()
        ],
        title=f"{captured.total_calls} aten calls of {args.target}, "
        f"{len(captured.calls)} distinct, written to {output}",
        notes=[
            "left out (views, metadata): "
            + (", ".join(f"{op} x{n}" for op, n in captured.view_summary()) or "none")
        ],
    )
    if args.format == "json":
        flags.print_json(
            {
                "suite": str(output),
                "calls": [{"op": op, "calls": n} for op, n in captured.summary()],
                "views": [{"op": op, "calls": n} for op, n in captured.view_summary()],
                "skipped": [c.unsupported for c in captured.calls if c.unsupported],
            }
        )
    else:
        flags.print_tables(args, [grid])
    err = flags.stderr()
    for record in captured.calls:
        if record.unsupported:
            err.print(f"[yellow]skipped:[/yellow] {record.unsupported}", highlight=False)
    err.print(f"wrote {output}; run it with: benchbench run {output}", highlight=False)
    return 0
