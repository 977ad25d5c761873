"""The environment a run measured in: what makes numbers comparable, and the rest.

``fields`` are the comparability fields hashed into the environment id (a change
in any of them starts a new history): machine label ($BENCHBENCH_MACHINE, else the
hostname), CPU model and count, threads, GPU names, MPS, torch version and git hash,
CUDA / cuDNN / ROCm / macOS versions, Python, debug build, and the math-mode flags
that change results and speed (TF32 for matmul and cuDNN, float32 matmul precision,
reduced-precision fp16/bf16 reductions), and the worker's memory allocator (system,
jemalloc or tcmalloc), glibc's malloc thresholds and the transparent-huge-pages mode:
the same operator took 3 ms from reused heap and 23 ms as fresh mappings here, so a
different allocator or THP mode gives different numbers. ``info`` is stored beside them and never
splits history: hostname, kernel, platform, RAM, NumPy, CPU clocks, the cores the
worker may run on (``cpu_affinity``, kernel list notation: ``--cpus`` pins it), NVIDIA
driver, CUDA device properties, and whether the CPU's instruction counter opens here
(``pmu``: ``instructions``, or ``none (why)``; :mod:`benchbench.machine.pmu`). A driver
update or a different clock is worth seeing next to a change, but it must not cut a
benchmark's history in two.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.values import short_hash
from benchbench.machine import allocator
from benchbench.machine.cpus import format_cpus, usable_cpus
from benchbench.machine.nvml import driver_version, load_nvml
from benchbench.machine.pmu import availability


@dataclass(frozen=True)
class Environment:
    """Comparability ``fields`` (hashed into ``id``) and an ``info`` document."""

    fields: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return short_hash(self.fields)

    @property
    def machine(self) -> str:
        return str(self.fields.get("machine", "?"))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def collect(
    torch: Any, threads: int | None = None, allocator_environ: Mapping[str, str] | None = None
) -> Environment:
    """Fingerprint this process's machine and PyTorch build (called in a worker).

    ``allocator_environ``: the environment whose allocator settings to record (default:
    this process's). ``probe`` measures in its own process but stores ceilings for the
    runs of default workers, so it passes theirs and its profile is found by them.
    """
    cuda = torch.cuda.is_available()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    fields: dict[str, Any] = {
        "machine": os.environ.get("BENCHBENCH_MACHINE") or socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": threads if threads is not None else torch.get_num_threads(),
        "gpus": gpus,
        "mps": mps,
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "rocm": getattr(torch.version, "hip", None),
        "macos": platform.mac_ver()[0] or None,
        "python": platform.python_version(),
        "debug_build": bool(getattr(torch.version, "debug", False)),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "fp16_reduced_precision_reduction": bool(
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "bf16_reduced_precision_reduction": bool(
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        **allocator.describe(allocator_environ),
    }
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "ram_bytes": _ram_bytes(),
        "numpy": _numpy_version(),
        "cpu_affinity": format_cpus(usable_cpus()),
        # Info, not a comparability field: a count records its own counter, and a time
        # does not depend on whether a counter could be opened.
        "pmu": availability(),
    }
    info.update(_cpu_clocks())
    if cuda:
        info["nvidia_driver"] = driver_version(load_nvml()[0])
        info["cuda_devices"] = [
            {
                "name": p.name,
                "memory_bytes": p.total_memory,
                "multiprocessors": p.multi_processor_count,
                "capability": f"{p.major}.{p.minor}",
                # What NVML matches the device by (machine/nvml.py, nvml_handle).
                "uuid": str(getattr(p, "uuid", "")) or None,
            }
            for p in (torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count()))
        ]
    return Environment(fields=fields, info=info)


def _cpu_clocks() -> dict[str, Any]:
    """Current and maximum CPU clock (MHz) as psutil reads them; empty where it cannot."""
    try:
        import psutil

        freq = psutil.cpu_freq()
    except Exception:
        return {}
    if freq is None:
        return {}
    return {"cpu_mhz": round(freq.current), "cpu_max_mhz": round(freq.max) or None}


def _ram_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:
        return None


def _numpy_version() -> str | None:
    try:
        import numpy

        return str(numpy.__version__)
    except Exception:
        return None
