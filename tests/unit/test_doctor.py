"""System checks: the logic on fake files and fake sources; one real run for structure."""

from __future__ import annotations

import dataclasses
import errno
import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from benchbench.machine.cpus import format_cpus
from benchbench.machine.doctor import (
    ASLR_PATH,
    BOOST_PATH,
    CHECKS,
    GOVERNOR_FIX,
    NO_TURBO_PATH,
    Check,
    SystemSources,
    TorchInfo,
    check_aslr,
    check_busy_processes,
    check_cpu_governor,
    check_cpu_isolation,
    check_gpus,
    check_idle_cores,
    check_load,
    check_swap,
    check_system,
    check_threads,
    check_torch_build,
    check_turbo_boost,
)
from benchbench.machine.telemetry import ProcessUsage

NO_SUCH_PID = 999_999_999  # above Linux's pid_max: never a real process
UNREADABLE = object()


class FakeFiles:
    """Path -> content; ``UNREADABLE`` stands for a permission error."""

    def __init__(self, files: dict[str, Any]) -> None:
        self.files = files

    def read_text(self, path: str) -> str:
        if path not in self.files:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        content = self.files[path]
        if content is UNREADABLE:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return str(content)

    def list_paths(self, pattern: str) -> list[str]:
        return [path for path in self.files if fnmatch.fnmatchcase(path, pattern)]


def _sources(files: dict[str, Any] | None = None, **overrides: Any) -> SystemSources:
    fake = FakeFiles(files or {})
    defaults: dict[str, Any] = {
        "read_text": fake.read_text,
        "list_paths": fake.list_paths,
        "logical_cpus": lambda: 8,
        "physical_cpus": lambda: 4,
        "load_average": lambda: (0.2, 0.3, 0.4),
        "swap_bytes": lambda: (0, 0),
        "busy_processes": lambda: [],
        "usable_cpus": lambda: tuple(range(8)),
        "busy_cores": lambda: 0.1,
        "environ": {},
        "torch_info": lambda: TorchInfo("2.13.0", 4, False),
        "nvml": lambda: (None, "fake: no GPU"),
        "cuda_uuids": lambda: None,  # CUDA's view unknown: every NVML GPU by index
        "pmu": lambda: "none (fake: no PMU)",
        "own_pid": 4242,
    }
    defaults.update(overrides)
    return SystemSources(**defaults)


def _governors(*names: str) -> dict[str, str]:
    return {
        f"/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor": f"{name}\n"
        for i, name in enumerate(names)
    }


def _one(checks: Sequence[Check]) -> Check:
    assert len(checks) == 1, checks
    return checks[0]


# --- CPU frequency ---------------------------------------------------------------------------


def test_powersave_governor_warns_with_the_cpupower_fix() -> None:
    check = _one(check_cpu_governor(_sources(_governors("powersave", "powersave"))))
    assert check.status == "warn"
    assert check.value == "powersave on CPUs 0-1"
    assert check.advice == GOVERNOR_FIX == "sudo cpupower frequency-set -g performance"


def test_mixed_governors_name_the_cpus_of_each() -> None:
    names = ["performance"] * 10 + ["powersave", "performance"]
    check = _one(check_cpu_governor(_sources(_governors(*names))))
    assert check.status == "warn"
    assert check.value == "performance on CPUs 0-9,11; powersave on CPUs 10"


def test_performance_governor_everywhere_is_ok() -> None:
    check = _one(check_cpu_governor(_sources(_governors(*["performance"] * 12))))
    assert (check.status, check.value, check.advice) == ("ok", "performance on CPUs 0-11", "")


def test_governor_without_cpufreq_or_unreadable_is_unknown() -> None:
    assert _one(check_cpu_governor(_sources())).status == "unknown"
    files: dict[str, Any] = _governors("performance", "performance")
    files["/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"] = UNREADABLE
    check = _one(check_cpu_governor(_sources(files)))
    assert check.status == "unknown"
    assert "cpu1/cpufreq/scaling_governor: Permission denied" in check.value


@pytest.mark.parametrize(
    ("cpus", "text"), [([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([4, 0, 2, 1], "0-2,4")]
)
def test_cpu_list_uses_the_kernel_notation(cpus: list[int], text: str) -> None:
    assert format_cpus(cpus) == text


@pytest.mark.parametrize(
    ("files", "status", "advice"),
    [
        ({NO_TURBO_PATH: "0\n"}, "warn", f"echo 1 | sudo tee {NO_TURBO_PATH}"),
        ({NO_TURBO_PATH: "1\n", BOOST_PATH: "1"}, "ok", ""),
        ({BOOST_PATH: "1\n"}, "warn", f"echo 0 | sudo tee {BOOST_PATH}"),
        ({BOOST_PATH: "0\n"}, "ok", ""),
        ({}, "unknown", ""),
        ({BOOST_PATH: UNREADABLE}, "unknown", ""),
    ],
)
def test_turbo_boost(files: dict[str, Any], status: str, advice: str) -> None:
    check = _one(check_turbo_boost(_sources(files)))
    assert (check.status, check.advice) == (status, advice)


@pytest.mark.parametrize(
    ("content", "status", "value"),
    [
        ("2\n", "ok", "full randomization"),
        ("0\n", "warn", "disabled"),
        ("1\n", "warn", "conservative randomization"),
        ("7\n", "unknown", f"unexpected {ASLR_PATH} content '7'"),
    ],
)
def test_aslr(content: str, status: str, value: str) -> None:
    check = _one(check_aslr(_sources({ASLR_PATH: content})))
    assert (check.status, check.value) == (status, value)
    if status == "warn":
        assert check.advice == f"echo 2 | sudo tee {ASLR_PATH}"


def test_aslr_unreadable_is_unknown() -> None:
    assert _one(check_aslr(_sources())).status == "unknown"


# --- load, swap, other processes ---------------------------------------------------------------


def test_load_against_cores() -> None:
    busy = _one(check_load(_sources(logical_cpus=lambda: 2, load_average=lambda: (3.0, 1, 1))))
    assert busy.status == "warn" and busy.value == "3.00 over 1 min on 2 logical cores"
    assert busy.advice
    idle = _one(check_load(_sources(logical_cpus=lambda: 8, load_average=lambda: (3.0, 1, 1))))
    assert idle.status == "ok"
    assert _one(check_load(_sources(logical_cpus=lambda: None))).status == "unknown"


def test_load_average_unavailable_is_unknown() -> None:
    def no_load() -> tuple[float, float, float]:
        raise OSError("getloadavg unavailable")

    assert _one(check_load(_sources(load_average=no_load))).status == "unknown"


@pytest.mark.parametrize(
    ("used", "total", "status"),
    [(0, 0, "ok"), (1 << 20, 8 << 30, "ok"), (1 << 30, 8 << 30, "warn")],
)
def test_swap(used: int, total: int, status: str) -> None:
    check = _one(check_swap(_sources(swap_bytes=lambda: (used, total))))
    assert check.status == status
    if status == "warn":
        assert check.value == "1024 MiB of 8192 MiB in use"
        assert "swapoff -a" in check.advice


# --- idle cores versus torch's threads ----------------------------------------------------------


def _idle(load: float, busy: float, threads: int, cores: int = 2) -> Check:
    return _one(
        check_idle_cores(
            _sources(
                usable_cpus=lambda: tuple(range(cores)),
                load_average=lambda: (load, 0.0, 0.0),
                busy_cores=lambda: busy,
                torch_info=lambda: TorchInfo("2.13.0", threads, False),
            )
        )
    )


def test_idle_cores_say_when_torchs_threads_would_wait_but_a_runs_one_would_not() -> None:
    check = _idle(load=1.1, busy=0.4, threads=2)
    assert check.status == "info"
    assert check.value == (
        "1 of 2 cores idle (load 1.10, CPU use 0.40); runs use 1 torch thread, "
        "--threads all torch's 2"
    )
    assert check.advice.startswith("keep the default --threads 1: --threads all would wait")


def test_idle_cores_warn_when_no_core_is_left_for_a_runs_thread() -> None:
    check = _idle(load=0.1, busy=1.8, threads=2)
    assert check.status == "warn" and "0 of 2 cores idle" in check.value
    assert "--cpus LIST naming an idle core" in check.advice


def test_idle_cores_are_ok_on_a_quiet_machine_or_with_few_threads() -> None:
    assert _idle(load=0.2, busy=0.1, threads=2).status == "ok"
    assert _idle(load=1.1, busy=1.0, threads=1).status == "ok"
    assert _idle(load=2.1, busy=2.0, threads=4, cores=8).status == "ok"  # 6 idle


def test_idle_cores_unknown_without_readings_or_torch() -> None:
    def unreadable() -> Any:
        raise OSError("no /proc/loadavg")

    check = _one(check_idle_cores(_sources(load_average=unreadable, busy_cores=unreadable)))
    assert check.status == "unknown" and "neither the load nor the CPU use" in check.value
    half = _one(check_idle_cores(_sources(load_average=unreadable, busy_cores=lambda: 1.5)))
    assert half.status == "ok" and half.value.startswith("6 of 8 cores idle (CPU use 1.50)")

    def no_torch() -> TorchInfo:
        raise ImportError("No module named 'torch'")

    assert _one(check_idle_cores(_sources(torch_info=no_torch))).status == "unknown"


def test_busy_processes_are_named_and_quiet_ones_ignored() -> None:
    usages = [ProcessUsage(31, "ffmpeg", 55.0, 90.0), ProcessUsage(2, "sshd", 3.0, 5.0)]
    check = _one(check_busy_processes(_sources(busy_processes=lambda: usages)))
    assert check.status == "warn"
    assert check.value == "ffmpeg (pid 31) 55%"
    assert check.advice == "stop them if you can: kill 31"
    quiet = _one(check_busy_processes(_sources(busy_processes=lambda: usages[1:])))
    assert quiet.status == "ok"


# --- threads and torch -------------------------------------------------------------------------


def test_threads_info_when_consistent() -> None:
    check = _one(check_threads(_sources(environ={"OMP_NUM_THREADS": "4"})))
    assert check.status == "info"
    assert "torch uses 4 threads" in check.value and "OMP_NUM_THREADS=4" in check.value
    assert "8 logical / 4 physical cores" in check.value


@pytest.mark.parametrize(
    ("environ", "torch_threads", "reason"),
    [
        ({"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "8"}, 4, "OMP and MKL disagree"),
        ({"OMP_NUM_THREADS": "four"}, 4, "OMP_NUM_THREADS='four' is not a positive integer"),
        ({"MKL_NUM_THREADS": "0"}, 4, "MKL_NUM_THREADS='0' is not a positive integer"),
        ({}, 16, "more threads than cores"),
    ],
)
def test_threads_warn(environ: dict[str, str], torch_threads: int, reason: str) -> None:
    sources = _sources(environ=environ, torch_info=lambda: TorchInfo("2.13", torch_threads, False))
    check = _one(check_threads(sources))
    assert check.status == "warn"
    assert reason in check.value
    assert check.advice == "export OMP_NUM_THREADS=4 MKL_NUM_THREADS=4"  # physical cores


def _no_torch() -> TorchInfo:
    raise ImportError("No module named 'torch'")


def test_without_torch_the_torch_checks_are_unknown() -> None:
    sources = _sources(torch_info=_no_torch)
    assert _one(check_threads(sources)).status == "unknown"
    check = _one(check_torch_build(sources))
    assert check.status == "unknown" and "No module named 'torch'" in check.value


def test_torch_debug_build_warns() -> None:
    debug = _one(check_torch_build(_sources(torch_info=lambda: TorchInfo("2.13", 4, True))))
    assert debug.status == "warn" and "debug build" in debug.value and debug.advice
    assert _one(check_torch_build(_sources())).status == "ok"


def test_cpu_isolation_is_information() -> None:
    cmdline = "BOOT_IMAGE=/vmlinuz ro quiet isolcpus=2-3 nohz_full=2-3\n"
    check = _one(check_cpu_isolation(_sources({"/proc/cmdline": cmdline})))
    assert (check.status, check.value) == ("info", "isolcpus=2-3, nohz_full=2-3")
    plain = _one(check_cpu_isolation(_sources({"/proc/cmdline": "ro quiet"})))
    assert (
        plain.status == "info" and plain.value == "no CPU isolated" and "isolcpus" in plain.advice
    )


# --- GPUs through a fake NVML ------------------------------------------------------------------


class FakeNvmlError(Exception):
    """Stands for pynvml.NVMLError_NotSupported in the fake."""


@dataclass
class FakeProcessInfo:
    pid: int


@dataclass
class FakeGpu:
    persistence: int | None
    app_mhz: int
    default_app_mhz: int
    pids: list[int]


class FakeNvml:
    """A stand-in for an initialised ``pynvml`` module; never reported as real data."""

    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        index = int(uuid.removeprefix("GPU-nvml"))  # NVML's GPU i is "GPU-nvml<i>"
        return self.gpus[index]

    def nvmlDeviceGetPersistenceMode(self, gpu: FakeGpu) -> int:
        if gpu.persistence is None:
            raise FakeNvmlError("Not Supported")
        return gpu.persistence

    def nvmlDeviceGetApplicationsClock(self, gpu: FakeGpu, clock: int) -> int:
        # The SM clock, as the clock guard and --lock-clocks read it; graphics is refused.
        assert clock != self.NVML_CLOCK_GRAPHICS
        return gpu.app_mhz if clock == self.NVML_CLOCK_SM else 1215

    def nvmlDeviceGetDefaultApplicationsClock(self, gpu: FakeGpu, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return gpu.default_app_mhz

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[FakeProcessInfo]:
        return [FakeProcessInfo(pid) for pid in gpu.pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, gpu: FakeGpu) -> list[FakeProcessInfo]:
        return []


def _gpu_checks(*gpus: FakeGpu) -> dict[str, Check]:
    nvml = FakeNvml(list(gpus))
    return {c.name: c for c in check_gpus(_sources(nvml=lambda: (nvml, "")))}


def test_no_gpu_is_one_info_line() -> None:
    check = _one(check_gpus(_sources()))
    assert (check.name, check.status) == ("GPU", "info")
    assert check.value == "no NVIDIA GPU visible (fake: no GPU)"
    empty = _one(check_gpus(_sources(nvml=lambda: (FakeNvml([]), ""))))
    assert empty.status == "info"


def test_gpu_persistence_off_warns_with_the_nvidia_smi_fix() -> None:
    checks = _gpu_checks(FakeGpu(1, 1410, 1410, []), FakeGpu(0, 1410, 1410, []))
    assert checks["GPU 0 persistence mode"].status == "ok"
    assert checks["GPU 1 persistence mode"].status == "warn"
    assert checks["GPU 1 persistence mode"].advice == "sudo nvidia-smi -i 1 -pm 1"


def test_gpu_lowered_application_clocks_warn_and_default_ones_inform() -> None:
    checks = _gpu_checks(FakeGpu(1, 1410, 1410, []), FakeGpu(1, 900, 1410, []))
    assert checks["GPU 0 application clocks"].status == "info"
    assert checks["GPU 0 application clocks"].value.startswith("1410 MHz SM, 1215 MHz")
    assert checks["GPU 1 application clocks"].status == "warn"
    assert checks["GPU 1 application clocks"].advice == "sudo nvidia-smi -i 1 -rac"


def test_other_gpu_processes_warn_and_ours_does_not() -> None:
    checks = _gpu_checks(FakeGpu(1, 1410, 1410, [4242, NO_SUCH_PID]), FakeGpu(1, 1, 1, [4242]))
    assert checks["GPU 0 other processes"].status == "warn"
    assert checks["GPU 0 other processes"].value == f"? (pid {NO_SUCH_PID})"
    assert checks["GPU 0 other processes"].advice == f"stop them if you can: kill {NO_SUCH_PID}"
    assert checks["GPU 1 other processes"].status == "ok"


def test_the_gpus_checked_are_cudas_matched_by_uuid_with_fixes_naming_the_uuid() -> None:
    # CUDA_VISIBLE_DEVICES=1: cuda:0 is NVML's GPU 1 (persistence off); NVML's GPU 0 is
    # not this machine's user's to check.
    nvml = FakeNvml([FakeGpu(1, 1410, 1410, [NO_SUCH_PID]), FakeGpu(0, 900, 1410, [])])
    checks = {
        c.name: c
        for c in check_gpus(_sources(nvml=lambda: (nvml, ""), cuda_uuids=lambda: {0: "nvml1"}))
    }
    assert sorted(checks) == [
        "cuda:0 application clocks", "cuda:0 other processes", "cuda:0 persistence mode",
    ]  # fmt: skip
    assert checks["cuda:0 persistence mode"].advice == "sudo nvidia-smi -i GPU-nvml1 -pm 1"
    assert checks["cuda:0 application clocks"].advice == "sudo nvidia-smi -i GPU-nvml1 -rac"
    assert checks["cuda:0 other processes"].status == "ok"
    none = check_gpus(_sources(nvml=lambda: (nvml, ""), cuda_uuids=lambda: {}))
    assert [(c.name, c.value) for c in none] == [("GPU", "NVML sees 2 GPU(s), CUDA none from here")]


def test_unreadable_gpu_values_are_unknown() -> None:
    checks = _gpu_checks(FakeGpu(None, 1410, 1410, []))
    assert checks["GPU 0 persistence mode"].status == "unknown"
    assert "Not Supported" in checks["GPU 0 persistence mode"].value


# --- the whole report ----------------------------------------------------------------------------


def test_check_system_runs_every_check_in_order() -> None:
    files = {**_governors("powersave"), ASLR_PATH: "2", "/proc/cmdline": "ro"}
    checks = check_system(_sources(files))
    assert [c.name for c in checks] == [
        "CPU governor", "turbo boost", "ASLR", "load average", "swap", "other processes",
        "threads", "idle cores", "torch build", "CPU isolation", "hardware counters", "GPU",
    ]  # fmt: skip
    assert len(CHECKS) == len(checks)
    assert checks[0].status == "warn"


def test_to_dict_is_json_safe() -> None:
    check = Check("ASLR", "warn", "disabled", f"echo 2 | sudo tee {ASLR_PATH}")
    assert json.loads(json.dumps(check.to_dict())) == dataclasses.asdict(check)


def test_real_system_report_is_well_formed() -> None:
    checks = check_system()
    names = {check.name for check in checks}
    assert {"CPU governor", "turbo boost", "ASLR", "threads", "CPU isolation"} <= names
    assert any(name.startswith("GPU") for name in names)
    for check in checks:
        assert check.status in ("ok", "warn", "info", "unknown"), check
        assert check.name and check.value, check
        if check.status == "warn":
            assert check.advice, f"a warning without a fix: {check}"
    json.dumps([check.to_dict() for check in checks])


def test_torch_build_names_its_gpu_toolkit() -> None:
    def build(cuda: str | None, hip: str | None) -> str:
        info = TorchInfo("2.13", 4, False, cuda=cuda, hip=hip)
        return _one(check_torch_build(_sources(torch_info=lambda: info))).value

    assert build(None, None) == "release build (torch 2.13, no GPU)"
    assert build("12.4", None) == "release build (torch 2.13, CUDA 12.4)"
    assert build(None, "6.1.40091") == "release build (torch 2.13, ROCm/HIP 6.1.40091)"
