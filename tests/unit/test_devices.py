"""Logic of the CUDA and MPS timers with injected fakes (no GPU result is claimed)."""

import contextlib
from types import SimpleNamespace

from pytest import approx

from benchbench.machine.caches import cpu_cache_sizes, parse_size
from benchbench.measure.policy import Block
from benchbench.measure.timers import CudaTimer, MpsTimer, device_scope, unavailable_reason


class FakeCuda:
    """Records the order of calls; events carry the virtual time they were recorded at."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.now_ms = 0.0
        self.synchronizes = 0

    def synchronize(self, device=None) -> None:
        self.synchronizes += 1
        self.log.append("sync" if device is None else f"sync {device}")

    def Event(self, enable_timing: bool = False):
        assert enable_timing
        cuda = self

        class Event:
            def record(self) -> None:
                self.at = cuda.now_ms
                cuda.log.append("record")

            def elapsed_time(self, end) -> float:
                return end.at - self.at

        return Event()


def test_cuda_timer_uses_event_pairs_and_one_sync_per_batch():
    cuda = FakeCuda()

    def loop(n: int) -> None:
        cuda.now_ms += 0.5 * n
        cuda.log.append(f"loop{n}")

    def pre() -> None:
        cuda.log.append("flush")

    timer = CudaTimer(cuda)
    times = timer.measure([Block(loop, 2, pre), Block(loop, 4, pre)])
    assert times == [0.001, 0.002]  # ms from elapsed_time converted to seconds
    assert cuda.synchronizes == 1
    assert cuda.log == [
        "flush",
        "record",
        "loop2",
        "record",
        "flush",
        "record",
        "loop4",
        "record",
        "sync",
    ]


def test_cuda_timer_synchronizes_the_points_device_not_the_current_one():
    cuda = FakeCuda()
    timer = CudaTimer(cuda, device="cuda:1")
    timer.measure([Block(lambda n: None, 1)])
    timer.sync()
    assert cuda.log == ["record", "record", "sync cuda:1", "sync cuda:1"]


def test_device_scope_makes_the_points_cuda_device_current_and_nothing_elsewhere():
    entered: list[str] = []

    @contextlib.contextmanager
    def device(where):
        entered.append(where)
        yield

    torch = _fake_torch(cuda=True)
    torch.cuda.device = device
    torch.device = str
    with device_scope("cuda:0", torch):
        assert entered == ["cuda:0"]
    for elsewhere in ("cpu", "mps", "cuda:1"):  # cuda:1 is absent: the point is skipped
        with device_scope(elsewhere, torch):
            pass
    assert entered == ["cuda:0"]


def test_mps_timer_synchronizes_around_each_block():
    calls: list[str] = []
    mps = SimpleNamespace(synchronize=lambda: calls.append("sync"))
    ticks = iter(range(0, 10**9, 1_000_000))
    timer = MpsTimer(mps, clock=lambda: next(ticks))
    out = timer.measure([Block(lambda n: calls.append("loop"), 1)])
    assert calls == ["sync", "loop", "sync"]
    assert out == [0.001]


def _fake_torch(cuda: bool = False, mps_built: bool = False, mps_available: bool = False):
    return SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: cuda, device_count=lambda: 1 if cuda else 0),
        backends=SimpleNamespace(
            mps=SimpleNamespace(is_built=lambda: mps_built, is_available=lambda: mps_available)
        ),
    )


def test_unavailable_reasons_name_what_is_missing():
    assert unavailable_reason("cpu", _fake_torch()) is None
    assert unavailable_reason("cuda", _fake_torch()) == "CUDA is not available"
    assert unavailable_reason("cuda", _fake_torch(cuda=True)) is None
    assert "does not exist" in str(unavailable_reason("cuda:3", _fake_torch(cuda=True)))
    assert "not built with MPS" in str(unavailable_reason("mps", _fake_torch()))
    assert "no MPS device" in str(unavailable_reason("mps", _fake_torch(mps_built=True)))
    assert unavailable_reason("mps", _fake_torch(mps_built=True, mps_available=True)) is None


def test_a_cuda_1_point_on_a_one_gpu_machine_says_which_devices_exist():
    one_gpu = _fake_torch(cuda=True)
    assert unavailable_reason("cuda:0", one_gpu) is None
    assert unavailable_reason("cuda:1", one_gpu) == (
        "CUDA device cuda:1 does not exist: this machine has 1 (present: cuda:0); "
        "choose one of them with --device"
    )


def test_cache_sizes_from_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate(
        [
            ("1", "Data", "32K"),
            ("1", "Instruction", "32K"),
            ("2", "Unified", "1024K"),
            ("3", "Unified", "36608K"),
        ]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    assert cpu_cache_sizes(tmp_path) == {"L1d": 32 * 1024, "L2": 1024 * 1024, "L3": 36608 * 1024}
    assert parse_size("2M") == 2 * 2**20
    assert cpu_cache_sizes(tmp_path / "missing") == {}


def test_cuda_timer_calls_before_sync_while_the_gpu_still_runs_the_batch():
    """``before_sync`` (the clock guard's read) runs once the batch is queued and before
    its synchronize: the device is still busy then, idle after."""
    from tests.unit.fake_cuda import FakeGpu

    gpu = FakeGpu()
    busy_at_note: list[bool] = []

    def loop(n: int) -> None:
        for _ in range(n):
            gpu.launch(100_000)  # 100 µs kernels: the launches (5 µs) run ahead

    timer = CudaTimer(gpu, clock=gpu.clock)
    timer.before_sync = lambda: busy_at_note.append(gpu.host_ns < gpu.device_free_ns)
    times = timer.measure([Block(loop, 3), Block(loop, 5)])
    assert times == [approx(3e-4, rel=0.05), approx(5e-4, rel=0.05)]
    assert busy_at_note == [True] and gpu.synchronizes == 1
    assert gpu.host_ns >= gpu.device_free_ns  # idle once synchronized
