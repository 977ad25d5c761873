"""What one ``benchbench run`` costs in CPU, the runner apart from its workers, for two
checkouts side by side (BENCHMARKS.md, "A runner that never imports torch").

    python benchmarks/runner_cost.py BEFORE_CHECKOUT AFTER_CHECKOUT [--repeats 6] [--rounds 1]

Each repetition runs the same small run (the tests' ``tiny`` suite, ``--budget 0.01``)
once from each checkout, in alternating order, each a fresh interpreter with that
checkout first on ``PYTHONPATH``; the run happens in that interpreter through the CLI's
``main`` and then prints the interpreter's own CPU time (the runner: imports, planning,
the store, the table) and its children's (the zygote and its workers: ``RUSAGE_CHILDREN``
counts the processes it waited for). Printed: the median of each and their range, per
checkout, with the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "integration" / "suites" / "tiny.py"

_WRAP = """
import json, resource, sys
import benchbench
from benchbench.cli import main
code = main(sys.argv[1:])
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "runner_s": me.ru_utime + me.ru_stime,
                  "workers_s": kids.ru_utime + kids.ru_stime,
                  "torch": "torch" in sys.modules, "from": benchbench.__file__}),
      file=sys.__stderr__)
"""


def one(checkout: Path, rounds: int, folder: Path) -> dict[str, float]:
    environ = dict(os.environ, PYTHONPATH=str(checkout), BENCHBENCH_ROUNDS=str(rounds))
    environ.pop("BENCHBENCH_STORE", None)
    store = folder / f"{checkout.name}-{time.monotonic_ns()}.db"
    argv = ["run", str(TINY), "--budget", "0.01", "--store", str(store), "--json"]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _WRAP, *argv],
        cwd=folder,  # not a checkout: `python -c` puts the current folder first on sys.path
        env=environ,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    last = done.stderr.strip().splitlines()[-1]
    measured = json.loads(last)
    if measured["code"] != 0 or not measured.pop("from").startswith(str(checkout)):
        raise SystemExit(f"{checkout}: exit {measured['code']}\n{done.stderr[-2000:]}")
    return {**measured, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    got: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="runner-cost-") as tmp:
        for k in range(args.repeats):
            order = list(sides) if k % 2 == 0 else list(reversed(sides))
            for name in order:
                got[name].append(one(sides[name], args.rounds, Path(tmp)))
    print(f"load before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}; {args.repeats} repeats")
    print(f"{'side':<8} {'runner CPU s':>16} {'workers CPU s':>16} {'wall s':>16}  torch")
    for name, rows in got.items():
        cells = []
        for key in ("runner_s", "workers_s", "wall_s"):
            values = [r[key] for r in rows]
            cells.append(f"{statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})")
        torch = sorted({str(r["torch"]) for r in rows})
        print(f"{name:<8} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}  {','.join(torch)}")


if __name__ == "__main__":
    main()
