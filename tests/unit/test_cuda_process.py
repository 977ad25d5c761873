"""CUDA process handling with fakes of ``torch.cuda`` (no GPU here, no GPU result claimed):
the memory guard per device, the fork guard, a poisoned CUDA context retiring its
worker, the runner's resident-memory watch, the point's device and fresh compiles."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from benchbench.measure import memory as memory_module
from benchbench.measure import point as point_module
from benchbench.measure.point import Options, measure_point
from benchbench.run import forksafe, guards, runner
from benchbench.run import worker as child
from benchbench.run.workers import Spawner, Worker, WorkerFailure, launcher
from benchbench.suite.declare import Suite, Variant
from tests.unit.fakes import FAST

GIB = 2**30


class FakeCuda:
    """``torch.cuda`` of a machine with ``count`` GPUs of ``total`` bytes each."""

    def __init__(self, count: int = 1, total: int = 32 * GIB, initialized: bool = False) -> None:
        self.count, self.total, self.initialized = count, total, initialized
        self.fractions: list[tuple[float, int | None]] = []

    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def is_initialized(self) -> bool:
        return self.initialized

    def get_device_properties(self, device: int | None) -> SimpleNamespace:
        return SimpleNamespace(total_memory=self.total)

    def set_per_process_memory_fraction(self, fraction: float, device: int | None) -> None:
        self.fractions.append((fraction, device))


def _torch(cuda: FakeCuda) -> SimpleNamespace:
    def device(text: str) -> SimpleNamespace:
        _kind, _, index = text.partition(":")
        return SimpleNamespace(index=int(index) if index else None)

    return SimpleNamespace(cuda=cuda, device=device)


# -- the memory guard per device ------------------------------------------------------


def test_cpu_points_get_an_address_space_limit_and_cuda_points_none():
    limits: list[tuple[int, tuple[int, int]]] = []
    cuda = FakeCuda()

    def setrlimit(which: int, value: tuple[int, int]) -> None:
        limits.append((which, value))

    assert guards.guard_memory("cpu", 8 * GIB, _torch(cuda), setrlimit) == "address space"
    assert limits == [(resource.RLIMIT_AS, (8 * GIB, 8 * GIB))]
    assert guards.guard_memory("cuda:0", 8 * GIB, _torch(cuda), setrlimit) == "device memory"
    assert limits == [(resource.RLIMIT_AS, (8 * GIB, 8 * GIB))]  # none added: it breaks CUDA
    assert cuda.fractions == [(0.25, 0)]  # 8 GiB of the device's 32, by index


def test_a_limit_above_the_device_caps_at_all_of_it_and_no_limit_or_device_guards_nothing():
    cuda = FakeCuda(total=4 * GIB)
    never = pytest.fail
    guards.guard_memory("cuda", 8 * GIB, _torch(cuda), never)
    assert cuda.fractions == [(1.0, None)]  # None: the current device
    assert guards.guard_memory("cpu", 0, _torch(cuda), never) is None
    assert guards.guard_memory("cuda:1", 8 * GIB, _torch(cuda), never) is None  # absent: skipped
    assert cuda.fractions == [(1.0, None)]


@contextlib.contextmanager
def _silent_worker(**kw):
    """A Worker handle on a child that never answers (its event pipe stays open)."""
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc, Worker(proc.pid, io.StringIO(), read, proc.wait, **kw)
    finally:
        proc.kill()
        proc.wait()
        os.close(read)
        os.close(write)


def test_the_runner_kills_a_worker_whose_resident_memory_passes_the_limit():
    resident = iter([GIB, 2 * GIB, 9 * GIB])
    with _silent_worker(memory_limit=8 * GIB, rss=lambda _pid: next(resident)) as (proc, handle):
        with pytest.raises(WorkerFailure) as failure:
            handle.expect(("result",), timeout_s=30)
        assert proc.poll() == -9  # SIGKILL, by the runner
    assert str(failure.value) == (
        "out of memory: the worker's resident memory reached 9216 MiB, past --memory-limit "
        "8192 MiB (killed by the runner)"
    )


def test_without_a_limit_resident_memory_is_not_read():
    with (
        _silent_worker(rss=lambda _pid: pytest.fail("read")) as (_proc, handle),
        pytest.raises(WorkerFailure, match=r"^timed out after 0\.3 s$"),
    ):
        handle.expect(("result",), timeout_s=0.3)


# -- fork safety ----------------------------------------------------------------------


def test_the_zygote_refuses_to_fork_once_cuda_is_initialised():
    assert forksafe.fork_refusal(None) is None  # torch not imported
    assert forksafe.fork_refusal(_torch(FakeCuda(initialized=False))) is None
    refusal = forksafe.fork_refusal(_torch(FakeCuda(initialized=True)))
    assert refusal is not None and "CUDA was initialised in the worker zygote" in refusal
    assert "fresh interpreters" in refusal


def test_the_worker_entry_point_asks_nvml_before_torch_loads():
    # The check's name is torch's; the variable reaches the zygote through the launcher.
    assert child.NVML_CHECK == "PYTORCH_NVML_BASED_CUDA_CHECK"
    code = (
        "import os, sys; sys.argv = ['w', 'serve', '1', '0']\n"
        "import benchbench.run.worker as w\n"
        "w._become_worker = lambda *a: print(os.environ.get(w.NVML_CHECK), "
        "'torch' in sys.modules, file=sys.stderr)\n"
        "w.main(sys.argv)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != child.NVML_CHECK}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stderr.split() == ["1", "False"], done.stderr


def test_the_launcher_sets_the_nvml_check_for_the_runner_and_its_workers(monkeypatch):
    monkeypatch.delenv(child.NVML_CHECK, raising=False)
    spawner = launcher(fork=False)
    assert isinstance(spawner, Spawner) and spawner.env is not None
    assert spawner.env[child.NVML_CHECK] == "1" and os.environ[child.NVML_CHECK] == "1"
    monkeypatch.setenv(child.NVML_CHECK, "0")  # a person's own choice is kept
    assert launcher(fork=False).env[child.NVML_CHECK] == "0"  # type: ignore[index]


# -- a poisoned CUDA context ----------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "RuntimeError: CUDA error: device-side assert triggered (at s.py:3)",
        "AcceleratorError: CUDA error: an illegal memory access was encountered (at s.py:3)",
        "RuntimeError: CUDA error: unspecified launch failure",
        # ROCm builds say HIP where CUDA builds say CUDA.
        "RuntimeError: HIP error: an illegal memory access was encountered",
        "RuntimeError: HIP error: hipErrorLaunchFailure",
    ],
)
def test_cuda_errors_poison_the_context(reason):
    assert guards.poisons_cuda(reason)


@pytest.mark.parametrize(
    "reason",
    [None, "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB", "timed out after 60 s"],
)
def test_other_failures_do_not(reason):
    assert not guards.poisons_cuda(reason)


SUITE = """
import torch
from benchbench import Suite, Variant

def device_assert(x):
    raise RuntimeError("CUDA error: device-side assert triggered\\nCompile with TORCH_USE_CUDA_DSA")

suite = Suite("poison")
suite.workload(
    "w",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.sqrt", torch.sqrt), Variant("assert", device_assert)],
    sizes=[64],
)
"""


def test_a_worker_whose_point_poisoned_cuda_answers_with_torchs_message_and_retires(
    tmp_path: Path, monkeypatch
):
    monkeypatch.setattr(child, "_stop_signal", None)
    path = tmp_path / "poison.py"
    path.write_text(SUITE)
    from benchbench.suite.load import load_suite

    points = {p.variant: p for p in load_suite(path).get("w").points()}

    def measure(variant: str) -> str:
        return json.dumps(
            {
                "op": "measure",
                "suite_path": str(path),
                "workload": "w",
                "point": points[variant].to_dict(),
                "policy": dataclasses.asdict(FAST),
                "cache": "warm",
                "check": False,
            }
        )

    events = io.StringIO()
    child.serve(events, io.StringIO(f"{measure('assert')}\n{measure('torch.sqrt')}\n"))
    answers = [json.loads(line) for line in events.getvalue().splitlines()]
    assert [a["event"] for a in answers] == ["hello", "result"]  # the second is never read
    assert answers[1]["retire"] is True
    assert answers[1]["result"]["status"] == "error"
    assert answers[1]["result"]["reason"].startswith(
        "RuntimeError: CUDA error: device-side assert triggered (at "
    )


# -- the point's device and fresh compiles ---------------------------------------------


def _workload(fn, compile: bool = False, seen: list[str] | None = None):
    def setup(ctx):
        if seen is not None:
            seen.append("setup")
        return ctx.uniform(0.5, 1.5)

    suite = Suite("s")
    return suite.workload(
        "w", setup=setup, variants=[Variant("v", fn, compile=compile)], sizes=[64, 128]
    )


def test_every_step_of_a_point_runs_inside_its_device_scope(monkeypatch):
    log: list[str] = []

    @contextlib.contextmanager
    def scope(device, _torch):
        log.append(f"enter {device}")
        yield
        log.append("exit")

    def fn(x):
        log.append("call")
        return torch.sqrt(x)

    monkeypatch.setattr(point_module.devices, "device_scope", scope)
    workload = _workload(fn, seen=log)
    result = measure_point(workload, workload.points()[0], Options(policy=FAST))
    assert result.status == "ok"
    assert log[0] == "enter cpu" and log[1] == "setup" and log[-1] == "exit"
    assert log.count("enter cpu") == 1 and "call" in log[2:-1]


def test_peak_memory_names_the_points_device_in_every_call(monkeypatch):
    calls: list[tuple[str, object]] = []
    for name, value in [
        ("synchronize", None),
        ("memory_allocated", 100),
        ("reset_peak_memory_stats", None),
        ("max_memory_allocated", 612),
    ]:
        monkeypatch.setattr(
            torch.cuda, name, lambda device, n=name, v=value: calls.append((n, device)) or v
        )
    peak = memory_module.peak_memory(lambda: None, (), "cuda:1", inplace=False)
    assert peak == 512
    assert {device for _name, device in calls} == {"cuda:1"}
    assert [name for name, _ in calls] == [
        "synchronize",
        "memory_allocated",
        "reset_peak_memory_stats",
        "synchronize",
        "max_memory_allocated",
    ]


def test_a_compile_variant_is_compiled_afresh_for_every_point_with_static_shapes(monkeypatch):
    # A fake compiler: inductor on this CPU takes ~17 s per cold compile, too slow here.
    log: list[str] = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: log.append("reset"))

    def fake_compile(fn, dynamic=None):
        log.append(f"compile dynamic={dynamic}")
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    workload = _workload(torch.sqrt, compile=True)
    results = [measure_point(workload, p, Options(policy=FAST)) for p in workload.points()]
    assert [r.status for r in results] == ["ok", "ok"]
    assert log == ["reset", "compile dynamic=False"] * 2
    assert all(r.extra["compile_s"] >= 0 for r in results)  # recorded per size


def test_compile_points_get_the_compile_timeout_unless_one_is_given(tmp_path: Path):
    workload = _workload(torch.sqrt, compile=True)
    eager = Suite("e").workload(
        "w", setup=lambda c: c.uniform(0.5, 1.5), variants=[Variant("v", torch.sqrt)], sizes=[8]
    )

    def job(config: runner.RunConfig, w) -> float | None:
        return runner.job_for(config, runner.Planned.of(tmp_path, w, w.points()[0]), None).timeout_s

    default = runner.RunConfig(suites=())
    assert job(default, workload) == runner.COMPILE_TIMEOUT_S == 300.0
    assert job(default, eager) is None  # the run's --timeout
    assert job(dataclasses.replace(default, timeout_s=900.0), workload) == 900.0
    assert job(dataclasses.replace(default, compile_timeout_s=20.0), workload) == 20.0


def test_a_cuda_1_point_on_a_one_gpu_machine_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    workload = Suite("s").workload(
        "w", setup=lambda c: c.uniform(0.5, 1.5), variants=[Variant("v", torch.sqrt)], sizes=[8]
    )
    point = dataclasses.replace(workload.points()[0], device="cuda:1")
    result = measure_point(workload, point, Options(policy=FAST))
    assert (result.status, result.reason) == (
        "skipped",
        "CUDA device cuda:1 does not exist: this machine has 1 (present: cuda:0); "
        "choose one of them with --device",
    )


def test_every_compile_point_compiles_with_caches_of_its_own_removed_after(monkeypatch):
    """Inductor's and Triton's on-disk caches persist across processes: with them shared,
    only the first compile point of a machine paid a cold compile."""
    import os

    seen: list[tuple[str | None, str | None]] = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/shared")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)

    def fake_compile(fn, dynamic=None):
        def compiled(*args):
            folders = (
                os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
                os.environ.get("TRITON_CACHE_DIR"),
            )
            if folders not in seen:
                seen.append(folders)
            return fn(*args)

        return compiled

    monkeypatch.setattr(torch, "compile", fake_compile)
    workload = _workload(torch.sqrt, compile=True)
    results = [measure_point(workload, p, Options(policy=FAST)) for p in workload.points()]
    assert [r.status for r in results] == ["ok", "ok"]
    assert len(seen) == 2 and seen[0] != seen[1]  # one folder per point
    for inductor, triton in seen:
        assert inductor and "benchbench-compile-" in inductor
        assert triton == os.path.join(inductor, "triton")
        assert not os.path.exists(inductor)  # removed after the point
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/shared"  # restored
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
