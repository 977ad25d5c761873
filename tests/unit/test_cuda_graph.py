"""CUDA graphs mode on a fake ``torch.cuda`` that records what was called and can raise.

No GPU result is claimed: the fake stands for the documented torch.cuda graph API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from benchbench.measure.cuda_graph import (
    ESTIMATE_CALLS,
    MAX_CALLS_PER_REPLAY,
    WARMUP_CALLS,
    GraphCaptureError,
    calls_per_replay,
    graph_mode,
    graph_subject,
    per_call,
    rotating_calls,
)
from benchbench.measure.policy import Measured, Subject


class FakeGraphCuda:
    """``torch.cuda`` with streams, events, graphs; ``call_ms`` of device time per call.

    ``log`` records every call in order; ``capture_error`` is raised when the graph
    capture ends (as torch raises for a synchronize inside a capture).
    """

    def __init__(self, call_ms: float = 0.002, capture_error: Exception | None = None) -> None:
        self.log: list[str] = []
        self.call_ms = call_ms
        self.now_ms = 0.0
        self.capture_error = capture_error
        self.capturing: FakeGraph | None = None
        self.on_side_stream = False

    def run_calls(self, n: int) -> None:
        """What the workload's loop does: record onto a capture, or run now."""
        where = "capture" if self.capturing else "side" if self.on_side_stream else "eager"
        self.log.append(f"{where}{n}")
        if self.capturing is not None:
            self.capturing.calls += n
        else:
            self.now_ms += n * self.call_ms

    def Stream(self) -> str:
        self.log.append("new-stream")
        return _Stream(self)

    def current_stream(self) -> str:
        return _Stream(self)

    @contextlib.contextmanager
    def stream(self, stream: object) -> Iterator[None]:
        self.on_side_stream = True
        try:
            yield
        finally:
            self.on_side_stream = False

    def Event(self, enable_timing: bool = False) -> object:
        cuda = self

        class Event:
            def record(self) -> None:
                self.at = cuda.now_ms

            def elapsed_time(self, end: object) -> float:
                return end.at - self.at  # type: ignore[attr-defined]

        return Event()

    def synchronize(self) -> None:
        self.log.append("sync")

    def CUDAGraph(self) -> FakeGraph:
        return FakeGraph(self)

    @contextlib.contextmanager
    def graph(self, graph: FakeGraph) -> Iterator[None]:
        self.log.append("capture-begin")
        self.capturing = graph
        try:
            yield
        finally:
            self.capturing = None
        if self.capture_error is not None:
            raise self.capture_error
        self.log.append("capture-end")


class _Stream:
    def __init__(self, cuda: FakeGraphCuda) -> None:
        self.cuda = cuda

    def wait_stream(self, other: object) -> None:
        self.cuda.log.append("wait")


class FakeGraph:
    def __init__(self, cuda: FakeGraphCuda) -> None:
        self.cuda = cuda
        self.calls = 0
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        self.cuda.now_ms += self.calls * self.cuda.call_ms


def _subject(cuda: FakeGraphCuda) -> Subject:
    return Subject("add", cuda.run_calls, pre=lambda: cuda.log.append("flush"))


def test_capture_warms_up_on_a_side_stream_then_captures_k_calls() -> None:
    cuda = FakeGraphCuda(call_ms=0.002)  # 2 µs per call: K = 1 ms / 2 µs = 500
    subject, k = graph_subject(_subject(cuda), cuda)
    assert k == 500
    assert cuda.log == [
        "new-stream",
        "wait",
        f"side{WARMUP_CALLS}",
        "wait",
        f"eager{ESTIMATE_CALLS}",
        "sync",
        "capture-begin",
        "capture500",
        "capture-end",
        "sync",
    ]
    before = cuda.now_ms
    subject.loop(3)  # three replays of the 500 captured calls
    assert cuda.now_ms - before == pytest.approx(3 * 500 * 0.002)
    assert subject.name == "add"
    subject.pre()  # the flush stays outside the graph
    assert cuda.log[-1] == "flush"


def test_a_failed_capture_raises_with_torchs_reason() -> None:
    reason = RuntimeError(
        "CUDA error: operation not permitted when stream is capturing\nmore lines"
    )
    cuda = FakeGraphCuda(capture_error=reason)
    with pytest.raises(GraphCaptureError, match=r"^CUDA error: operation not permitted") as info:
        graph_subject(_subject(cuda), cuda)
    assert "more lines" not in str(info.value)


def test_calls_per_replay_is_bounded_and_one_when_cold() -> None:
    assert calls_per_replay(1e-6) == MAX_CALLS_PER_REPLAY  # 1000 calls of 1 µs
    assert calls_per_replay(0.0) == MAX_CALLS_PER_REPLAY  # a timer that read nothing
    assert calls_per_replay(0.5) == 1  # a 500 ms call replays alone
    assert calls_per_replay(1e-4) == 10
    assert calls_per_replay(1e-6, cold=True) == 1


def test_graph_mode_applies_to_cuda_points_only() -> None:
    assert graph_mode(False, "cuda", False) == (False, None)
    assert graph_mode(True, "cuda:1", False) == (True, None)
    used, note = graph_mode(True, "cpu", False)
    assert not used and note is not None and "cpu is not a CUDA device" in note
    used, note = graph_mode(True, "cuda", True)
    assert not used and note is not None and "in-place" in note


def test_per_call_counts_replays_as_k_calls() -> None:
    measured = Measured("add", (1e-3, 1e-3), calls_per_sample=4, minor_faults_per_call=8.0)
    scaled = per_call(measured, 500)
    assert scaled.calls_per_sample == 2000
    assert scaled.minor_faults_per_call == pytest.approx(8.0 / 500)
    assert scaled.stats.median_s == pytest.approx(1e-3 / 2000)
    assert scaled.samples_s == measured.samples_s


def test_a_rotating_graph_captures_whole_cycles_of_its_copies() -> None:
    """A graph replays the calls it captured: fewer calls than copies would cycle
    through a few copies only, and rotate would read as warm."""
    assert rotating_calls(76, 64) == 128
    assert rotating_calls(500, 64) == 512
    assert rotating_calls(3, 1) == 3
    cuda = FakeGraphCuda(call_ms=0.013)  # K = 1 ms / 13 µs = 77 -> two cycles of 64
    _replaying, k = graph_subject(_subject(cuda), cuda, copies=64)
    assert k == 128
    realign = (-(WARMUP_CALLS + ESTIMATE_CALLS)) % 64
    assert cuda.log[cuda.log.index("sync") + 1] == f"eager{realign}"  # the cycle realigned
    assert "capture128" in cuda.log
