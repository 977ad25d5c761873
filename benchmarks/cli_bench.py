"""How fast the CLI answers, against `python -c "import torch"` (BENCHMARKS.md, "A CLI
that answers at once"; issue 22's targets: `--help` <= 0.25x, `runs` and `show` <= 0.8x).

    python benchmarks/cli_bench.py [--repeats 10] [--seed 0] [--json]

Each repetition runs the five commands once each, in a seeded shuffled order, every one
in a fresh interpreter timed from the outside (``subprocess.run`` wall time: start-up,
imports, the command, exit). `runs`, `show latest` and `claims` read a small SQLite store
written for the benchmark through tests/storedata.py (two runs of three points; no torch;
every claim is `not measured` on it, so `claims` times reading the built-in claims and
the run, not their evaluators). The
ratios are per repetition, command / `import torch` of the same repetition, so that a
machine whose load drifts over the benchmark slows both sides of a ratio alike; the
table gives their median and range, beside each command's median wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchbench.store import open_store  # noqa: E402
from tests.storedata import T0, add_run, point, result  # noqa: E402

#: The reference and the commands, with the ratio each must stay under (issue 22;
#: `claims` since its claims moved out of the suite files, part 7).
TORCH = "import torch"
TARGETS = {"--help": 0.25, "runs": 0.8, "show latest": 0.8, "claims": 0.8}


def small_store(folder: Path) -> Path:
    """Two runs of three points, as `benchbench run` would store them (no torch)."""
    path = folder / "cli_bench.db"
    store = open_store(str(path), create=True)
    for i, label in enumerate(("base", "head")):
        results = [result(point(size=n), seed=i) for n in (1024, 4096, 16384)]
        add_run(store, results, label=label, started_at=T0 + dt.timedelta(hours=i))
    return path


def argv_of(name: str, store: Path) -> list[str]:
    if name == TORCH:
        return [sys.executable, "-c", "import torch"]
    extra = [] if name == "--help" else ["--store", str(store)]
    return [sys.executable, "-m", "benchbench", *name.split(), *extra]


def wall_s(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def measure(repeats: int, seed: int, store: Path) -> dict[str, list[float]]:
    """Wall seconds per command, one per repetition, the order shuffled each time."""
    rng = random.Random(seed)
    names = [TORCH, *TARGETS]
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # one untimed pass: the page cache warm for every command
        wall_s(argv_of(name, store))
    for _ in range(repeats):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            times[name].append(wall_s(argv_of(name, store)))
    return times


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float | bool]]:
    torch_s = times[TORCH]
    out: dict[str, dict[str, float | bool]] = {TORCH: {"median_s": statistics.median(torch_s)}}
    for name, target in TARGETS.items():
        ratios = [t / r for t, r in zip(times[name], torch_s, strict=True)]
        ratio = statistics.median(ratios)
        out[name] = {
            "median_s": statistics.median(times[name]),
            "ratio": ratio,
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "target": target,
            "met": ratio <= target,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = small_store(Path(folder))
        figures = summary(measure(args.repeats, args.seed, store))
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'command':<20} {'median s':>9} {'x import torch':>15} {'range':>13} {'target':>7}")
    for name, f in figures.items():
        if name == TORCH:
            print(f"{'python -c ' + repr(TORCH):<20} {f['median_s']:>9.3f}")
            continue
        span = f"{f['ratio_min']:.2f}-{f['ratio_max']:.2f}"
        met = "met" if f["met"] else "MISSED"
        print(
            f"{'benchbench ' + name:<20} {f['median_s']:>9.3f} {f['ratio']:>15.2f} {span:>13} "
            f"{'<= ' + str(f['target']):>7} {met}"
        )
    return 0 if all(f.get("met", True) for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
