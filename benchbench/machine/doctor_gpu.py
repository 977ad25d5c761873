"""``benchbench doctor``'s checks of each NVIDIA GPU, through NVML.

Persistence mode (off: the driver unloads when idle and the first calls pay for
re-initialisation), application clocks (lowered: every kernel runs slower) and other
processes with a context on the GPU. A value NVML cannot give is ``unknown`` with
NVML's reason; a machine without NVML gets one ``info`` line.

The GPUs checked are the ones CUDA sees here, named as the runs name them
(``cuda:1``) and matched to NVML by UUID (NVML's index is not CUDA's under
``CUDA_VISIBLE_DEVICES``); the fixes name the GPU by its UUID, which ``nvidia-smi -i``
takes. Where CUDA's view cannot be read, every NVML GPU is checked by NVML index. The
clock read is the SM clock, as the clock guard and ``run --lock-clocks`` read it.
"""

from __future__ import annotations

from typing import Any

from benchbench.machine.doctor_sources import Check, SystemSources
from benchbench.machine.nvml import call, nvml_handle, process_name, running_processes


def _gpu_checks(nvml: Any, handle: Any, gpu: str, target: str, own_pid: int) -> list[Check]:
    """The checks of the GPU of ``handle``, named ``gpu``; ``target`` is what
    ``nvidia-smi -i`` takes for it (its UUID, or its NVML index)."""
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
                f"sudo nvidia-smi -i {target} -pm 1",
            )
        )
    except Exception as exc:
        checks.append(Check(f"{gpu} persistence mode", "unknown", f"not readable: {exc}"))
    sm, memory = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
    try:
        app = call(getattr(nvml, "nvmlDeviceGetApplicationsClock", None), handle, sm)
        app_mem = call(getattr(nvml, "nvmlDeviceGetApplicationsClock", None), handle, memory)
        default = call(getattr(nvml, "nvmlDeviceGetDefaultApplicationsClock", None), handle, sm)
        value = f"{app} MHz SM, {app_mem} MHz memory (default {default} MHz SM)"
        if app < default:
            checks.append(
                Check(
                    f"{gpu} application clocks",
                    "warn",
                    f"{value}: lowered",
                    f"sudo nvidia-smi -i {target} -rac",
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
    uuids = src.cuda_uuids()
    if uuids is None:  # CUDA's view unknown: every GPU NVML sees, by NVML index
        targets = [
            (f"GPU {j}", str(j), lambda j=j: nvml.nvmlDeviceGetHandleByIndex(j))
            for j in range(count)
        ]
    elif not uuids:
        return [Check("GPU", "info", f"NVML sees {count} GPU(s), CUDA none from here")]
    else:
        targets = [
            (f"cuda:{i}", u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}",
             lambda u=u: nvml_handle(nvml, u))
            for i, u in sorted(uuids.items())
        ]  # fmt: skip
    checks = []
    for gpu, target, handle_of in targets:
        try:
            handle = handle_of()
            if handle is None:
                raise LookupError(f"NVML knows no GPU with UUID {target}")
            checks.extend(_gpu_checks(nvml, handle, gpu, target, src.own_pid))
        except Exception as exc:
            checks.append(Check(gpu, "unknown", f"not readable: {exc}"))
    return checks
