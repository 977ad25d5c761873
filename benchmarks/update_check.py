"""An in-place operator against the copy and update ceilings, side by side in one process.

Run from the repository root:  PYTHONPATH=. python benchmarks/update_check.py [ROUNDS [THREADS]]

For ``x.sqrt_()`` of 2^16 ... 2^22 float32 (credited 8 bytes an element, read and
written back), times in interleaved rounds, best of each (another process only slows a
block down): the operator itself, the probe's update sweep over its buffer (working set
4 bytes an element, as the roofline reads an update), and the probe's read, write and
copy sweeps at a working set of its credited bytes (as every point was held before the
update curve). Prints the operator's bytes/s as a percentage of each ceiling: held to
the copy curves an in-place operator can read well over 100 %; held to its own it
should not pass 110 %. Repeated ``sqrt_`` on values in [0.5, 1.5) stays finite and
positive (it tends to 1), so the buffer needs no restoring.
"""

from __future__ import annotations

import sys

import torch

from benchbench.machine.probe_bandwidth import PASS_BYTES, block_runner, op_call, passes_for
from benchbench.machine.probe_cuda import best_seconds_per_call


def main(rounds: int) -> None:
    exps = (16, 18, 20, 22)
    n_max = 2 * (1 << max(exps))  # the copy sweep's working set: 8 bytes an element
    src, dst = torch.rand(n_max), torch.full((n_max,), 1.5)
    xs = {e: torch.rand(1 << e) + 0.5 for e in exps}
    runs = {}
    for e in exps:
        n = 1 << e
        runs[(e, "sqrt_")] = (block_runner("cpu", xs[e].sqrt_), 8 * n)
        ws = 4 * n
        fn, nbytes = op_call("update", src, dst, ws, passes=passes_for(ws, PASS_BYTES))
        runs[(e, "update")] = (block_runner("cpu", fn), nbytes)
        for op in ("read", "write", "copy"):
            ws = 8 * n
            fn, nbytes = op_call(
                op, src, dst, ws, passes=passes_for(ws, PASS_BYTES), threads=torch.get_num_threads()
            )
            runs[(e, op)] = (block_runner("cpu", fn), nbytes)
    best = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for key, (run, nbytes) in runs.items():
            best[key] = max(best[key], nbytes / best_seconds_per_call(run, blocks=2))
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), best of {rounds} rounds"
    )
    print("| n | x.sqrt_() GB/s | update ceiling GB/s | % of it | copy ceiling GB/s | % of it |")
    print("|---|---|---|---|---|---|")
    for e in exps:
        op_rate, update = best[(e, "sqrt_")], best[(e, "update")]
        copy = max(best[(e, op)] for op in ("read", "write", "copy"))
        print(
            f"| 2^{e} | {op_rate / 1e9:.1f} | {update / 1e9:.1f} | {100 * op_rate / update:.0f} "
            f"| {copy / 1e9:.1f} | {100 * op_rate / copy:.0f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 2:
        torch.set_num_threads(int(sys.argv[2]))
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
