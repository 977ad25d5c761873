"""Plot an operator's relative error versus input magnitude per dtype (not from the store).

Inputs spread log-uniformly from --low to --high are rounded to each dtype, the
operator runs in it, and the result is compared with float64 on the exact inputs.
Each dtype's smallest subnormal, smallest normal and max are marked. Example:
``benchbench accuracy sqrt -o sqrt.png`` shows float16 returning 0 for inputs below
6e-8 and Inf above 65504.
"""

from __future__ import annotations

import argparse

from benchbench.cli import flags
from benchbench.core.defaults import ACCURACY_DTYPES, PLOT_FORMATS
from benchbench.core.errors import UsageError

HELP = "plot relative error versus input magnitude per dtype for an operator"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", metavar="OP", help="unary torch or torch.special function: sqrt")
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="image file (png, svg, pdf)"
    )
    parser.add_argument(
        "--dtype",
        metavar="LIST",
        default=",".join(ACCURACY_DTYPES),
        help="comma-separated floating dtypes (default %(default)s)",
    )
    parser.add_argument(
        "--low", type=float, default=1e-12, help="smallest input (default %(default)g)"
    )
    parser.add_argument(
        "--high", type=float, default=1e12, help="largest input (default %(default)g)"
    )
    parser.add_argument("--points", type=int, default=2001, help="inputs (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    from benchbench.views.accuracy_plot import accuracy_figure  # torch and matplotlib

    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    if not dtypes:
        raise UsageError("--dtype is empty; give e.g. float16,float32")
    flags.check_output("-o", args.output, PLOT_FORMATS)
    if not 0 < args.low < args.high:
        raise UsageError(
            f"--low {args.low:g} and --high {args.high:g}: need 0 < low < high, e.g. "
            "--low 1e-12 --high 1e12"
        )
    if args.points < 2:
        raise UsageError(f"--points must be >= 2, got {args.points}; e.g. --points 2001")
    figure = accuracy_figure(args.op, dtypes, args.low, args.high, args.points)
    try:
        figure.savefig(args.output, dpi=120)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write {args.output!r}: {exc}") from None
    flags.stderr().print(f"wrote {args.output}")
    return 0
