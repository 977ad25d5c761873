"""``benchbench bisect`` on a synthetic repository: is the culprit found, in how many
steps, at what wall time (issue 42's acceptance: 16 commits, one adding 10 % work as
whole extra calls, several changing nothing; the culprit found in >= 9 of 10 tries,
<= log2(16) + 2 steps on average, each try <= 10 minutes).

Each try makes a fresh repository in a temporary folder (``tests/synthetic_repo.py``: a
package whose ``work`` makes CALLS whole calls of ``torch.exp``; the culprit commit
raises CALLS from ``--calls`` to ``--calls`` x (1 + ``--extra``), the others touch a
comment or a note), its culprit at a seeded random place, and runs the real CLI. Sides
are cached in one folder for all tries (``--cache``; tries after the first build only
the commits whose trees are new: every try's repository is new, so every try builds).

    python benchmarks/bisect_bench.py --neighbour              # the acceptance run
    python benchmarks/bisect_bench.py --commits 4 --tries 1 --rounds 2 --budget 0.02
    python benchmarks/bisect_bench.py --neighbour --first 2 --tries 8   # tries 2-9 of a set

Prints one line per try and a summary (found, mean steps, re-measurements, wall times),
with the machine's load before and after: paste it into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).parent))
import gate_bench  # noqa: E402

from tests.synthetic_repo import make_repo, write_suite  # noqa: E402


def one_try(args: argparse.Namespace, index: int, cache: Path) -> dict:
    rng = random.Random(f"{args.seed}:{index}")
    culprit = rng.randrange(1, args.commits)  # never the good end
    more = round(args.calls * (1 + args.extra))
    calls = [args.calls if k < culprit else more for k in range(args.commits)]
    with tempfile.TemporaryDirectory(prefix="bisect-bench-") as folder:
        where = Path(folder)
        shas = make_repo(where / "repo", calls)
        suite = write_suite(where / "suite.py", sizes=args.sizes)
        command = [
            sys.executable,
            "-m",
            "benchbench",
            "bisect",
            str(suite),
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--repo",
            str(where / "repo"),
            "--store",
            str(where / "s.db"),
            "--log",
            str(where / "bisect.jsonl"),
            "--json",
            "--seed",
            str(index),
        ]
        if args.rounds is not None:
            command += ["--rounds", str(args.rounds)]
        if args.budget is not None:
            command += ["--budget", str(args.budget)]
        if args.min_effect is not None:
            command += ["--min-effect", str(args.min_effect)]
        started = time.monotonic()
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env={**os.environ, "BENCHBENCH_SIDES_CACHE": str(cache)},
                timeout=args.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            log = where / "bisect.jsonl"
            steps = log.read_text().splitlines() if log.exists() else []
            return {
                "try": index,
                "culprit_index": culprit,
                "error": f"not done within {args.timeout:g} s",
                "log": steps,
                "wall_s": time.monotonic() - started,
            }
        wall_s = time.monotonic() - started
    if not done.stdout.strip():
        return {"try": index, "error": done.stderr.strip()[-500:], "wall_s": wall_s}
    found = json.loads(done.stdout)
    named = (found.get("culprit") or {}).get("sha")
    return {
        "try": index,
        "culprit_index": culprit,
        "found": named == shas[culprit],
        "status": found["status"],
        "steps": found["steps"],
        "remeasured": found["remeasured"],
        "wall_s": wall_s,
        "exit": done.returncode,
        "looks": found["looks"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=16)
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument(
        "--first", type=int, default=0, help="the first try's index (resume a set of tries)"
    )
    parser.add_argument("--calls", type=int, default=10, help="whole calls before the culprit")
    parser.add_argument("--extra", type=float, default=0.10, help="the culprit's extra work")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536])
    parser.add_argument("--rounds", type=int, help="each step's ab rounds (default ab's)")
    parser.add_argument("--budget", type=float, help="each step's ab budget (default ab's)")
    parser.add_argument("--min-effect", type=float, help="the verdict's min effect")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per try")
    parser.add_argument("--cache", type=Path, help="the sides' cache (default: a temporary one)")
    parser.add_argument("--neighbour", action="store_true", help="gate_bench's noisy neighbour")
    args = parser.parse_args()
    neighbour = None
    if args.neighbour:
        neighbour = gate_bench.start_neighbour()
    print(f"neighbour {args.neighbour}; load before: {os.getloadavg()}", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="bisect-bench-cache-") as scratch:
            cache = args.cache or Path(scratch)
            tries = []
            for index in range(args.first, args.first + args.tries):
                result = one_try(args, index, cache)
                tries.append(result)
                print(json.dumps(result), flush=True)
    finally:
        if neighbour is not None:
            neighbour.terminate()
    done = [t for t in tries if "error" not in t]
    found = sum(t["found"] for t in done)
    steps = [t["steps"] for t in done]
    walls = [t["wall_s"] for t in tries]
    print(
        f"found {found} of {len(tries)}; steps mean "
        f"{sum(steps) / max(len(steps), 1):.2f} (bound log2({args.commits}) + 2 = "
        f"{math.log2(args.commits) + 2:.1f}), re-measurements "
        f"{sum(t['remeasured'] for t in done)}; wall s per try: min {min(walls):.0f}, "
        f"max {max(walls):.0f}; load after: {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
