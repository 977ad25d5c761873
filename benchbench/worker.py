"""The worker process: loads suites, measures points, sends results to the runner.

Started by :mod:`benchbench.runner` as ``python -m benchbench.worker FD``. Requests
arrive as JSON lines on stdin; events go back as JSON lines on file descriptor FD
(stdout is pointed at stderr so that a suite's prints cannot corrupt the channel).
One worker lives for many points, because importing torch costs seconds; the
runner replaces it when it dies.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import Any, TextIO


def _send(channel: TextIO, event: dict[str, Any]) -> None:
    channel.write(json.dumps(event) + "\n")
    channel.flush()


def serve(channel: TextIO, requests: TextIO) -> None:
    """Answer requests until ``exit`` or end of input."""
    import torch

    from benchbench import environment
    from benchbench.catalog import load_suite
    from benchbench.engine import Policy
    from benchbench.measure import Options, measure_point
    from benchbench.model import Point, Result

    _send(channel, {"event": "hello", "pid": os.getpid()})
    for line in requests:
        request = json.loads(line)
        op = request.get("op")
        if op == "exit":
            return
        if op == "environment":
            if request.get("threads"):
                torch.set_num_threads(int(request["threads"]))
            env = environment.collect(torch, request.get("threads"))
            _send(channel, {"event": "environment", "fields": env.fields, "info": env.info})
        elif op == "measure":
            point = Point.from_dict(request["point"])
            try:
                workload = load_suite(Path(request["suite_path"])).get(request["workload"])
                options = Options(
                    policy=Policy(**request["policy"]),
                    cache=request["cache"],
                    threads=request.get("threads"),
                    profile_dir=request.get("profile_dir"),
                )
            except Exception as exc:  # reported as this point's error, the worker lives on
                failed = Result(point=point, status="error", reason=f"{type(exc).__name__}: {exc}")
                _send(channel, {"event": "result", "result": failed.to_dict()})
                continue
            result = measure_point(workload, point, options)
            _send(channel, {"event": "result", "result": result.to_dict()})
        else:
            _send(channel, {"event": "error", "message": f"unknown request {op!r}"})


def main(argv: list[str]) -> int:
    channel = os.fdopen(int(argv[1]), "w", buffering=1)
    memory_limit = int(argv[2]) if len(argv) > 2 else 0
    if memory_limit > 0:
        # Address-space limit: an allocation past it fails inside the worker (and is
        # recorded as "out of memory") instead of waking the kernel's OOM killer.
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(channel, sys.stdin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
