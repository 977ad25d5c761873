"""The driver the GPU acceptance scripts share: rows in groups, each under its own time
limit, each written as it finishes with the GPU's state while it ran.

A lent GPU machine gives 15 minutes of device time in all (its start included) and at
most 10 minutes a command, and goes back after ~30 s idle: a script is run as groups of
rows whose limits add up to 5 minutes at most, so that every group runs once and a
failed row can be rerun alone (``--only ROW``) in what is left.

Per row it writes one JSON line to ``OUT/NAME.jsonl`` (name, status, the numbers, the
row's seconds, and ``gpu``: the SM and memory clocks, temperature, power and
clock-event reasons NVML read every 0.25 s while the row ran) and rewrites
``OUT/NAME.md``, a markdown table of every row so far: a command cut off by its limit
still leaves what it did.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PASS, FAIL, NOT_AVAILABLE = "pass", "FAIL", "n/a"
#: What one invocation may take: a third of the 15 minutes a lent machine gives.
GROUP_LIMIT_S = 300
#: How often the GPU's clocks, temperature and power are read while a row runs.
SAMPLE_PERIOD_S = 0.25


@dataclass(frozen=True)
class Row:
    """One line of the table: what was checked, pass / FAIL / n/a, the numbers behind it."""

    name: str
    status: str
    numbers: str


@dataclass(frozen=True)
class Spec:
    """One runnable row: what it measures on a device, its time limit, its group and
    what it checks (one line, for ``--list``)."""

    measure: Callable[[str], list[Row]]
    limit_s: int
    group: int
    checks: str


class RowTimeout(Exception):
    """A row ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """RowTimeout in this (main) thread after ``seconds``."""

    def expire(_signum: int, _frame: Any) -> None:
        raise RowTimeout(f"ran past its {seconds} s limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def within(measured: float, plain: float, tolerance: float) -> bool:
    """``measured`` within ``tolerance`` (relative) of ``plain``."""
    return plain > 0 and abs(measured / plain - 1.0) <= tolerance


def no_cuda_message(torch: Any) -> str | None:
    """Why this machine cannot run the acceptance, or None when it can."""
    if torch.cuda.is_available():
        return None
    built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    return (
        f"no CUDA device: torch.cuda.is_available() is False (torch {torch.__version__}, "
        f"{built}); nothing to accept here: run this script on a CUDA machine"
    )


def select(specs: Mapping[str, Spec], only: str | None, group: int | None) -> dict[str, Spec]:
    """The rows ``--only`` names (in the script's order) or those of ``--group``; all of
    them when neither is given. ValueError naming an unknown row or group."""
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in specs]
        if unknown:
            raise ValueError(
                f"--only: unknown row {', '.join(map(repr, unknown))}; "
                f"the rows are {', '.join(specs)} (see --list)"
            )
        return {k: v for k, v in specs.items() if k in names}
    if group is not None:
        chosen = {k: v for k, v in specs.items() if v.group == group}
        if not chosen:
            groups = sorted({s.group for s in specs.values()})
            raise ValueError(f"--group: no row in group {group}; the groups are {groups}")
        return chosen
    return dict(specs)


def plan(specs: Mapping[str, Spec]) -> str:
    total = sum(s.limit_s for s in specs.values())
    lines = [f"plan: {len(specs)} rows, at most {total} s"]
    lines += [f"  {name}: at most {s.limit_s} s" for name, s in specs.items()]
    return "\n".join(lines)


def listing(specs: Mapping[str, Spec]) -> str:
    """``--list``: every row with its group, limit and what it checks, then each group's
    total."""
    width = max(len(n) for n in specs)
    lines = [f"{'row':<{width}}  group  limit  checks"]
    lines += [
        f"{name:<{width}}  {s.group:>5}  {s.limit_s:>4} s  {s.checks}" for name, s in specs.items()
    ]
    for group in sorted({s.group for s in specs.values()}):
        total = sum(s.limit_s for s in specs.values() if s.group == group)
        lines.append(f"group {group}: at most {total} s")
    return "\n".join(lines)


def line(row: Row, width: int = 28) -> str:
    return f"{row.name:<{width}}  {row.status:<4}  {row.numbers}"


# -- the GPU's state while a row runs ----------------------------------------------------


def summarize_gpu(samples: Sequence[Mapping[str, float | None]], reasons: Sequence[str]) -> dict:
    """NVML readings (``gpu0_sm_clock_mhz`` ... as :class:`NvmlReader` gives them) as
    the state a row's figures were measured in: clocks' median and range, temperature
    and power at their median and highest, every clock-event reason seen."""

    def values(key: str) -> list[float]:
        return [float(v) for s in samples if (v := s.get(f"gpu0_{key}")) is not None]

    out: dict[str, Any] = {"samples": len(samples), "reasons": sorted(set(reasons))}
    for key, name in (
        ("sm_clock_mhz", "sm_mhz"),
        ("mem_clock_mhz", "mem_mhz"),
        ("temp_c", "temperature_c"),
        ("power_w", "power_w"),
    ):
        got = values(key)
        if got:
            out[name] = {
                "median": round(statistics.median(got), 1),
                "min": min(got),
                "max": max(got),
            }
    return out


def gpu_text(state: Mapping[str, Any]) -> str:
    """``SM 1980 MHz (1755-1980), 61 °C, 402 W`` for the summary table."""

    def median(key: str) -> float | None:
        part = state.get(key)
        return None if not part else part["median"]

    parts = []
    if (sm := median("sm_mhz")) is not None:
        low, high = state["sm_mhz"]["min"], state["sm_mhz"]["max"]
        parts.append(f"SM {sm:.0f} MHz ({low:.0f}-{high:.0f})")
    if (temp := state.get("temperature_c")) is not None:
        parts.append(f"{temp['max']:.0f} °C max")
    if (power := state.get("power_w")) is not None:
        parts.append(f"{power['max']:.0f} W max")
    if state.get("reasons"):
        parts.append("reasons " + "/".join(state["reasons"]))
    return ", ".join(parts) or "no NVML readings"


class GpuSampler:
    """Reads the GPU's clocks, temperature and power every ``period_s`` in a thread,
    through benchbench's own NVML reader; ``state()`` summarises what it read."""

    def __init__(self, reader: Any, period_s: float = SAMPLE_PERIOD_S) -> None:
        self.reader, self.period_s = reader, period_s
        self.samples: list[dict[str, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.reader.sample())
            self._stop.wait(self.period_s)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def state(self) -> dict[str, Any]:
        reasons = self.reader.throttle_reasons().get(0, ())
        return summarize_gpu(self.samples, list(reasons))


def nvml_reader(torch: Any, device: str) -> Any:
    """benchbench's NVML reader for ``device`` (its GPU named ``gpu0``), or None without
    NVML."""
    from benchbench.machine.nvml import cuda_uuid, load_nvml
    from benchbench.machine.sensors import NvmlReader

    nvml, _why = load_nvml()
    uuid = cuda_uuid(torch, torch.device(device).index or 0)
    if nvml is None or uuid is None:
        return None
    return NvmlReader(nvml, {0: uuid}, exclude_pids=())


# -- writing rows as they finish ---------------------------------------------------------

#: The folder of this invocation's files (``--out``, else a temporary one): rows that
#: leave files (a store, a table) put them here.
_FOLDER: list[Path] = []


def out_folder() -> Path:
    """``--out``'s folder, or a temporary folder made on first use when none was given."""
    if not _FOLDER:
        _FOLDER.append(Path(tempfile.mkdtemp(prefix="benchbench-acceptance-")))
    return _FOLDER[0]


def summary_markdown(title: str, records: Sequence[Mapping[str, Any]]) -> str:
    """The rows so far as one markdown table (pipes in numbers escaped)."""
    lines = [
        f"## {title}",
        "",
        "| row | status | numbers | s | GPU while it ran |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        numbers = str(r["numbers"]).replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r['name']} | {r['status']} | {numbers} | {r['row_s']:.0f} | "
            f"{gpu_text(r.get('gpu') or {})} |"
        )
    return "\n".join(lines) + "\n"


class Recorder:
    """Appends each row's JSON line to ``OUT/NAME.jsonl`` and rewrites ``OUT/NAME.md``;
    writes nothing without a folder."""

    def __init__(self, out: str | None, name: str, title: str) -> None:
        self.folder = Path(out) if out else None
        self.name, self.title = name, title
        self.records: list[dict[str, Any]] = []
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)

    def add(self, row: Row, row_s: float, gpu: Mapping[str, Any]) -> None:
        record = {**asdict(row), "row_s": round(row_s, 2), "gpu": dict(gpu)}
        self.records.append(record)
        if self.folder is None:
            return
        with (self.folder / f"{self.name}.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        (self.folder / f"{self.name}.md").write_text(summary_markdown(self.title, self.records))


def run_row(spec: Spec, name: str, device: str, reader: Any) -> tuple[list[Row], float, dict]:
    """One row under its limit, with the GPU sampled meanwhile; a row that raises or runs
    past its limit is a FAIL with the reason."""
    started = time.perf_counter()
    sampler = GpuSampler(reader) if reader is not None else None
    with sampler if sampler is not None else contextlib.nullcontext():
        try:
            with time_limit(spec.limit_s):
                got = spec.measure(device)
        except Exception as exc:  # one row's crash is that row's FAIL
            got = [Row(name, FAIL, f"{type(exc).__name__}: {exc}")]
    state = sampler.state() if sampler is not None else {}
    return got, time.perf_counter() - started, state


def main(
    argv: Sequence[str] | None,
    specs: Mapping[str, Spec],
    *,
    description: str,
    name: str,
    heading: str,
) -> int:
    """The scripts' command line: run the chosen rows, print and record each, exit 1
    when a row fails (0 without CUDA: a skip, not a failure; 2 on a bad argument)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (default cuda)")
    parser.add_argument(
        "--out",
        default=os.environ.get("OUT"),
        help=f"folder for {name}.jsonl and {name}.md (default $OUT)",
    )
    parser.add_argument("--only", metavar="ROW[,ROW]", help="run these rows only (see --list)")
    parser.add_argument("--group", type=int, help="run this group's rows only (see --list)")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    args = parser.parse_args(argv)
    try:
        chosen = select(specs, args.only, args.group)
    except ValueError as exc:
        parser.error(str(exc))
    if args.list:
        print(listing(chosen))
        return 0
    import torch

    reason = no_cuda_message(torch)
    if reason is not None:
        print(reason)
        return 0
    title = (
        f"{heading} on {torch.cuda.get_device_name(torch.device(args.device))}, "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    )
    print(title, flush=True)
    print(plan(chosen), flush=True)
    recorder = Recorder(args.out, name, title)
    if args.out:
        _FOLDER[:] = [Path(args.out)]
    reader = nvml_reader(torch, args.device)
    for row_name, spec in chosen.items():
        rows, seconds, state = run_row(spec, row_name, args.device, reader)
        for row in rows:
            print(line(row), flush=True)
            recorder.add(row, seconds, state)
    return 1 if any(r["status"] == FAIL for r in recorder.records) else 0
