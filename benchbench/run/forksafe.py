"""Whether the worker zygote may fork: a forked child cannot use CUDA once the parent
started the CUDA driver, and not every call that starts it says so.

``fork_refusal`` reads ``torch.cuda.is_initialized()`` before every fork; ``fork_proof``
forks a test child that initialises CUDA, once, when the zygote starts. Either one's
reason makes the zygote refuse to fork, and the runner then starts every worker as a
fresh interpreter (:mod:`benchbench.run.workers`).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def cuda_present(torch: Any) -> bool:
    """A CUDA device is visible, asked without initialising CUDA (NVML, see NVML_CHECK)."""
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _cuda_child() -> None:
    """The body of :func:`fork_proof`'s test child: exit 0 once CUDA works in it."""
    code = 1
    try:
        import torch

        torch.empty(1, device="cuda").fill_(1.0)
        torch.cuda.synchronize()
        code = 0
    finally:
        os._exit(code)


def fork_proof(
    torch: Any, fork: Any = os.fork, child: Any = _cuda_child, timeout_s: float = 60.0
) -> str | None:
    """Why a worker forked from this process could not use CUDA, or None when it can.

    ``torch.cuda.is_initialized()`` is not enough: some calls start the CUDA driver
    without setting it (the profiler's first use, the device count's fallback when NVML
    fails). So where a CUDA device is visible, a test child is forked that initialises
    CUDA; its failure is the proof. Costs one CUDA initialisation (~0.5 s on an H100) per
    zygote, nothing where no CUDA device is visible.
    """
    if torch is None or not cuda_present(torch):
        return None
    pid = fork()
    if pid == 0:
        child()
    code = reap(pid, timeout_s)
    if code == 0:
        return None
    return (
        f"a test child forked from the worker zygote could not initialise CUDA (exit code "
        f"{code}): something in the zygote started the CUDA driver; the workers start as "
        "fresh interpreters from now on"
    )


def fork_refusal(torch: Any) -> str | None:
    """Why this process must not fork a worker, or None when it may.

    A child forked after CUDA was initialised cannot use CUDA ("Cannot re-initialize
    CUDA in forked subprocess"). The zygote never initialises it (its availability
    checks go through NVML: ``PYTORCH_NVML_BASED_CUDA_CHECK=1``); this check makes that
    a fact before every fork rather than a hope.
    """
    if torch is not None and torch.cuda.is_initialized():
        return (
            "CUDA was initialised in the worker zygote, and a process forked after that "
            "cannot use CUDA; the workers start as fresh interpreters from now on"
        )
    return None


def reap(pid: int, timeout_s: float) -> int:
    """Exit code of child ``pid`` (negative: killed by that signal); kills it if stuck."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
