"""``benchbench doctor``'s checks of each NVIDIA GPU, through NVML.

Persistence mode (off: the driver unloads when idle and the first calls pay for
re-initialisation), application clocks (lowered: every kernel runs slower) and other
processes with a context on the GPU. A value NVML cannot give is ``unknown`` with
NVML's reason; a machine without NVML gets one ``info`` line.
"""

from __future__ import annotations

from typing import Any

from benchbench.machine.doctor_sources import Check, SystemSources
from benchbench.machine.nvml import call, process_name, running_processes


def _gpu_checks(nvml: Any, index: int, own_pid: int) -> list[Check]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    gpu = f"GPU {index}"
    checks: list[Check] = []
    try:
        enabled = call(nvml.nvmlDeviceGetPersistenceMode, handle) == 1
        checks.append(
            Check(f"{gpu} persistence mode", "ok", "enabled")
            if enabled
            else Check(
                f"{gpu} persistence mode",
                "warn",
                "disabled (the driver unloads when idle: first calls pay for re-initialisation)",
                f"sudo nvidia-smi -i {index} -pm 1",
            )
        )
    except Exception as exc:
        checks.append(Check(f"{gpu} persistence mode", "unknown", f"not readable: {exc}"))
    graphics, memory = getattr(nvml, "NVML_CLOCK_GRAPHICS", 0), getattr(nvml, "NVML_CLOCK_MEM", 2)
    try:
        app = call(nvml.nvmlDeviceGetApplicationsClock, handle, graphics)
        app_mem = call(nvml.nvmlDeviceGetApplicationsClock, handle, memory)
        default = call(nvml.nvmlDeviceGetDefaultApplicationsClock, handle, graphics)
        value = f"{app} MHz graphics, {app_mem} MHz memory (default {default} MHz graphics)"
        if app < default:
            checks.append(
                Check(
                    f"{gpu} application clocks",
                    "warn",
                    f"{value}: lowered",
                    f"sudo nvidia-smi -i {index} -rac",
                )
            )
        else:
            checks.append(Check(f"{gpu} application clocks", "info", value))
    except Exception as exc:
        checks.append(Check(f"{gpu} application clocks", "unknown", f"not readable: {exc}"))
    others: dict[int, str] = {}
    try:
        for proc in running_processes(nvml, handle, strict=True):
            if proc.pid != own_pid:
                others[proc.pid] = process_name(proc.pid) or "?"
    except Exception as exc:
        checks.append(Check(f"{gpu} other processes", "unknown", f"not readable: {exc}"))
        return checks
    if others:
        value = ", ".join(f"{name} (pid {pid})" for pid, name in sorted(others.items()))
        kill = " ".join(str(pid) for pid in sorted(others))
        checks.append(
            Check(f"{gpu} other processes", "warn", value, f"stop them if you can: kill {kill}")
        )
    else:
        checks.append(Check(f"{gpu} other processes", "ok", "none"))
    return checks


def check_gpus(src: SystemSources) -> list[Check]:
    """Persistence mode, application clocks and other processes of each NVIDIA GPU."""
    nvml, reason = src.nvml()
    if nvml is None:
        return [Check("GPU", "info", f"no NVIDIA GPU visible ({reason})")]
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception as exc:
        return [Check("GPU", "unknown", f"nvmlDeviceGetCount failed: {exc}")]
    if count == 0:
        return [Check("GPU", "info", "NVML is loaded but reports no GPU")]
    checks = []
    for index in range(count):
        try:
            checks.extend(_gpu_checks(nvml, index, src.own_pid))
        except Exception as exc:
            checks.append(Check(f"GPU {index}", "unknown", f"not readable: {exc}"))
    return checks
