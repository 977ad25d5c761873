"""System checks before benchmarking: what on this machine makes numbers noisy or biased.

In the spirit of ``python -m pyperf system show``: each check is one small function that
reads the system through :class:`SystemSources` (injectable, so the logic is tested on fake
files) and returns :class:`Check` values whose advice is the command that fixes the problem.
A value that cannot be read gives status ``unknown`` with the reason, never a guess.

    for check in check_system():
        print(check.status, check.name, check.value, check.advice)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping

import psutil

from benchbench.core.defaults import DEFAULT_THREADS
from benchbench.machine.cpus import format_cpus, idle_cores
from benchbench.machine.doctor_gpu import check_gpus
from benchbench.machine.doctor_sources import Check, Status, SystemSources, TorchInfo
from benchbench.machine.pmu import AVAILABLE
from benchbench.machine.telemetry import BUSY_PROCESS_CPU_PERCENT

# Status and TorchInfo live in doctor_sources, check_gpus in doctor_gpu; all three are
# part of this module's interface, where callers and tests have always found them.
__all__ = [
    "ASLR_PATH",
    "BENCHMARK_GOVERNOR",
    "BOOST_PATH",
    "CHECKS",
    "GOVERNOR_FIX",
    "GOVERNOR_GLOB",
    "LOAD_PER_CORE_WARN",
    "NO_TURBO_PATH",
    "SWAP_USED_WARN_BYTES",
    "Check",
    "Status",
    "SystemSources",
    "TorchInfo",
    "check_aslr",
    "check_busy_processes",
    "check_cpu_governor",
    "check_cpu_isolation",
    "check_gpus",
    "check_hardware_counters",
    "check_idle_cores",
    "check_load",
    "check_swap",
    "check_system",
    "check_threads",
    "check_torch_build",
    "check_turbo_boost",
]

BENCHMARK_GOVERNOR = "performance"
# Swap in use beyond this means pages were pushed out under memory pressure; a few MiB are
# routinely swapped out at boot and do not matter.
SWAP_USED_WARN_BYTES = 64 << 20
# A 1-minute load above half the logical cores means other work shares the CPUs.
LOAD_PER_CORE_WARN = 0.5

GOVERNOR_FIX = f"sudo cpupower frequency-set -g {BENCHMARK_GOVERNOR}"
NO_TURBO_PATH = "/sys/devices/system/cpu/intel_pstate/no_turbo"
BOOST_PATH = "/sys/devices/system/cpu/cpufreq/boost"
ASLR_PATH = "/proc/sys/kernel/randomize_va_space"
GOVERNOR_GLOB = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"


def _cpu_number(path: str) -> int:
    match = re.search(r"/cpu(\d+)/", path)
    return int(match.group(1)) if match else -1


def check_cpu_governor(src: SystemSources) -> list[Check]:
    """All CPUs should use the ``performance`` governor (others ramp the clock up and down)."""
    paths = sorted(src.list_paths(GOVERNOR_GLOB), key=_cpu_number)
    if not paths:
        return [
            Check(
                "CPU governor",
                "unknown",
                "no cpufreq scaling_governor in /sys "
                "(a VM, or a kernel without cpufreq): frequency scaling is not visible",
            )
        ]
    by_governor: dict[str, list[int]] = {}
    try:
        for path in paths:
            by_governor.setdefault(src.read_text(path).strip(), []).append(_cpu_number(path))
    except OSError as exc:
        return [Check("CPU governor", "unknown", f"cannot read {exc.filename}: {exc.strerror}")]
    value = "; ".join(f"{gov} on CPUs {format_cpus(cpus)}" for gov, cpus in by_governor.items())
    if set(by_governor) == {BENCHMARK_GOVERNOR}:
        return [Check("CPU governor", "ok", value)]
    return [Check("CPU governor", "warn", value, GOVERNOR_FIX)]


def check_turbo_boost(src: SystemSources) -> list[Check]:
    """Turbo makes the clock depend on temperature and on how many cores are busy."""
    try:
        no_turbo = src.read_text(NO_TURBO_PATH).strip()
    except OSError:
        no_turbo = None
    if no_turbo in ("0", "1"):
        if no_turbo == "1":
            return [Check("turbo boost", "ok", "disabled (intel_pstate)")]
        return [
            Check(
                "turbo boost",
                "warn",
                "enabled (intel_pstate)",
                f"echo 1 | sudo tee {NO_TURBO_PATH}",
            )
        ]
    try:
        boost = src.read_text(BOOST_PATH).strip()
    except OSError:
        return [
            Check(
                "turbo boost",
                "unknown",
                f"neither {NO_TURBO_PATH} nor {BOOST_PATH} "
                "is readable (a VM, or a cpufreq driver without boost control)",
            )
        ]
    if boost == "0":
        return [Check("turbo boost", "ok", "disabled (cpufreq boost)")]
    if boost == "1":
        return [
            Check(
                "turbo boost", "warn", "enabled (cpufreq boost)", f"echo 0 | sudo tee {BOOST_PATH}"
            )
        ]
    return [Check("turbo boost", "unknown", f"unexpected {BOOST_PATH} content {boost!r}")]


def check_aslr(src: SystemSources) -> list[Check]:
    """Full address-space randomisation is what we want, as pyperf advises: each worker
    process gets another memory layout, so results average over layouts instead of
    depending on one lucky or unlucky one."""
    try:
        mode = src.read_text(ASLR_PATH).strip()
    except OSError as exc:
        return [Check("ASLR", "unknown", f"cannot read {ASLR_PATH}: {exc.strerror}")]
    states = {"0": "disabled", "1": "conservative randomization", "2": "full randomization"}
    if mode not in states:
        return [Check("ASLR", "unknown", f"unexpected {ASLR_PATH} content {mode!r}")]
    if mode == "2":
        return [Check("ASLR", "ok", states[mode])]
    return [Check("ASLR", "warn", states[mode], f"echo 2 | sudo tee {ASLR_PATH}")]


def check_load(src: SystemSources) -> list[Check]:
    """The 1-minute load average against the logical core count."""
    cores = src.logical_cpus()
    try:
        load_1m = src.load_average()[0]
    except OSError as exc:
        return [Check("load average", "unknown", f"load average not available: {exc}")]
    if not cores:
        return [Check("load average", "unknown", f"{load_1m:.2f} (core count unknown)")]
    value = f"{load_1m:.2f} over 1 min on {cores} logical cores"
    if load_1m > LOAD_PER_CORE_WARN * cores:
        return [
            Check(
                "load average",
                "warn",
                value,
                "stop other jobs or wait until idle; `top -o %CPU` shows the busiest",
            )
        ]
    return [Check("load average", "ok", value)]


def check_swap(src: SystemSources) -> list[Check]:
    """Swapped-out pages turn memory accesses into disk reads."""
    try:
        used, total = src.swap_bytes()
    except (OSError, RuntimeError) as exc:
        return [Check("swap", "unknown", f"swap usage not available: {exc}")]
    if total == 0:
        return [Check("swap", "ok", "no swap configured")]
    value = f"{used / 2**20:.0f} MiB of {total / 2**20:.0f} MiB in use"
    if used > SWAP_USED_WARN_BYTES:
        return [
            Check(
                "swap",
                "warn",
                value,
                "free memory, then `sudo swapoff -a && sudo swapon -a` to page back in",
            )
        ]
    return [Check("swap", "ok", value)]


def check_busy_processes(src: SystemSources) -> list[Check]:
    """Other processes using CPU now, over a 0.5 s window."""
    try:
        usages = src.busy_processes()
    except (OSError, psutil.Error) as exc:
        return [Check("other processes", "unknown", f"cannot list processes: {exc}")]
    busy = [u for u in usages if u.cpu_percent_mean >= BUSY_PROCESS_CPU_PERCENT]
    if not busy:
        return [Check("other processes", "ok", f"none above {BUSY_PROCESS_CPU_PERCENT:.0f}% CPU")]
    value = ", ".join(f"{u.name or '?'} (pid {u.pid}) {u.cpu_percent_mean:.0f}%" for u in busy)
    pids = " ".join(str(u.pid) for u in busy)
    return [Check("other processes", "warn", value, f"stop them if you can: kill {pids}")]


def _thread_env(environ: Mapping[str, str], name: str) -> tuple[int | None, str | None]:
    raw = environ.get(name)
    if raw is None:
        return None, None
    return (int(raw), None) if raw.strip().isdigit() and int(raw) > 0 else (None, raw)


def check_threads(src: SystemSources) -> list[Check]:
    """OMP_NUM_THREADS / MKL_NUM_THREADS against torch's thread count and the cores.

    CPU results depend on the thread count, which is recorded with every point; this check
    flags the settings that make it wrong (oversubscription, contradictory variables).
    """
    logical, physical = src.logical_cpus(), src.physical_cpus()
    omp, omp_bad = _thread_env(src.environ, "OMP_NUM_THREADS")
    mkl, mkl_bad = _thread_env(src.environ, "MKL_NUM_THREADS")
    try:
        torch = src.torch_info()
    except ImportError as exc:
        return [Check("threads", "unknown", f"torch is not importable: {exc}")]
    cores = f"{logical or '?'} logical / {physical or '?'} physical cores"
    env = (
        f"OMP_NUM_THREADS={src.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"MKL_NUM_THREADS={src.environ.get('MKL_NUM_THREADS', 'unset')}"
    )
    value = f"torch uses {torch.num_threads} threads ({env}; {cores})"
    suggested = physical or logical or 1
    fix = f"export OMP_NUM_THREADS={suggested} MKL_NUM_THREADS={suggested}"
    for name, bad in (("OMP_NUM_THREADS", omp_bad), ("MKL_NUM_THREADS", mkl_bad)):
        if bad is not None:
            return [Check("threads", "warn", f"{name}={bad!r} is not a positive integer", fix)]
    if omp is not None and mkl is not None and omp != mkl:
        return [Check("threads", "warn", f"{value}: OMP and MKL disagree", fix)]
    if logical and torch.num_threads > logical:
        return [Check("threads", "warn", f"{value}: more threads than cores", fix)]
    return [Check("threads", "info", value)]


def check_idle_cores(src: SystemSources) -> list[Check]:
    """Cores the machine's load leaves idle against a run's threads (one by default) and
    torch's default thread count (``--threads all``).

    Other work, in cores, is the larger of the 1-minute load average and the CPU use
    of every process now; the rule that turns it into idle cores is the one a point's
    warning uses (:func:`benchbench.machine.cpus.idle_cores`). A parallel region with
    more threads than idle cores waits for a descheduled thread (``torch.softmax`` of
    2^12 values: 7.58 ms with 2 threads on a loaded 2-core machine, 3.21 µs with 1).
    """
    cores = len(src.usable_cpus()) or src.logical_cpus() or 0
    readings: dict[str, float] = {}
    with contextlib.suppress(OSError):
        readings["load"] = src.load_average()[0]
    with contextlib.suppress(OSError, psutil.Error):
        readings["CPU use"] = src.busy_cores()
    if not readings or not cores:
        return [Check("idle cores", "unknown", "neither the load nor the CPU use is readable")]
    try:
        torch = src.torch_info()
    except ImportError as exc:
        return [Check("idle cores", "unknown", f"torch is not importable: {exc}")]
    idle = idle_cores(cores, max(readings.values()))
    seen = ", ".join(f"{name} {value:.2f}" for name, value in readings.items())
    value = (
        f"{idle} of {cores} cores idle ({seen}); runs use {DEFAULT_THREADS} torch thread, "
        f"--threads all torch's {torch.num_threads}"
    )
    if idle < DEFAULT_THREADS:
        return [
            Check(
                "idle cores",
                "warn",
                value,
                "no core is idle for a run's thread: measure on a quieter machine, or with "
                "--cpus LIST naming an idle core (run retakes a crowded process once, while "
                "its budget allows)",
            )
        ]
    if torch.num_threads > idle:
        return [
            Check(
                "idle cores",
                "info",
                value,
                f"keep the default --threads {DEFAULT_THREADS}: --threads all would wait for "
                "descheduled threads here (a parallel region waits for its last thread)",
            )
        ]
    return [Check("idle cores", "ok", value)]


def check_torch_build(src: SystemSources) -> list[Check]:
    """A debug build of torch is many times slower and measures nothing useful. The
    value names the GPU toolkit torch was built with: CUDA, ROCm (HIP) or neither."""
    try:
        torch = src.torch_info()
    except ImportError as exc:
        return [Check("torch build", "unknown", f"torch is not importable: {exc}")]
    toolkit = (
        f"ROCm/HIP {torch.hip}" if torch.hip else f"CUDA {torch.cuda}" if torch.cuda else "no GPU"
    )
    build = f"torch {torch.version}, {toolkit}"
    if torch.debug_build:
        return [
            Check(
                "torch build",
                "warn",
                f"debug build ({build})",
                "pip install --force-reinstall torch  # a release build",
            )
        ]
    return [Check("torch build", "ok", f"release build ({build})")]


def check_cpu_isolation(src: SystemSources) -> list[Check]:
    """isolcpus / nohz_full from the kernel command line (information: rarely set up)."""
    try:
        cmdline = src.read_text("/proc/cmdline")
    except OSError as exc:
        return [Check("CPU isolation", "unknown", f"cannot read /proc/cmdline: {exc.strerror}")]
    found = dict(re.findall(r"\b(isolcpus|nohz_full|rcu_nocbs)=(\S+)", cmdline))
    if found:
        return [Check("CPU isolation", "info", ", ".join(f"{k}={v}" for k, v in found.items()))]
    return [
        Check(
            "CPU isolation",
            "info",
            "no CPU isolated",
            "for the quietest runs boot with isolcpus=<cpus> nohz_full=<cpus> and run "
            "`taskset -c <cpus> benchbench run ...`",
        )
    ]


def check_hardware_counters(src: SystemSources) -> list[Check]:
    """Whether the CPU's instruction counter opens (``run --metric instructions --counter
    pmu``); where not, why (information: callgrind counts instructions anywhere)."""
    found = src.pmu()
    if found == AVAILABLE:
        return [Check("hardware counters", "ok", "instructions (run --counter pmu counts them)")]
    return [
        Check(
            "hardware counters",
            "info",
            found,
            "run --metric instructions counts under callgrind (its default --counter)",
        )
    ]


CHECKS: tuple[Callable[[SystemSources], list[Check]], ...] = (
    check_cpu_governor,
    check_turbo_boost,
    check_aslr,
    check_load,
    check_swap,
    check_busy_processes,
    check_threads,
    check_idle_cores,
    check_torch_build,
    check_cpu_isolation,
    check_hardware_counters,
    check_gpus,
)


def check_system(sources: SystemSources | None = None) -> list[Check]:
    """Run every check in :data:`CHECKS` (about 0.5 s for the process window, plus the
    torch import when not already imported) and return their results in order."""
    src = sources or SystemSources()
    return [check for function in CHECKS for check in function(src)]
