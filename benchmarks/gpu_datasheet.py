"""NVIDIA's dense datasheet figures for the GPUs a lent machine may have, and what they
come to at the SM clock NVML reports.

A datasheet quotes each peak at a clock of its own choosing: the H100 SXM's FP32 66.9
TFLOP/s is 132 SMs x 256 FLOP a clock x 1980 MHz, its dense BF16 989.4 TFLOP/s is 132 x
4096 x 1830 MHz and its dense TF32 494.7 is 132 x 2048 x 1830 MHz. What a probe can
reach is the SMs x the FLOP an SM does a clock x the clock it ran at, so each figure
is held with the per-SM rate of its architecture (Hopper, dense: 256 FP32, 2048 TF32
and 4096 BF16 FLOP a clock) and scaled to the clock NVML read; memory bandwidth does
not follow the SM clock and is compared as quoted.

Figures: the H100 and H200 datasheets (dense, i.e. half the "with sparsity" figure).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Dense FLOP a Hopper SM does per clock, by the kind of arithmetic.
HOPPER_FLOP_PER_CLOCK = {"float32": 256, "tf32": 2048, "bfloat16": 4096}


@dataclass(frozen=True)
class Datasheet:
    """One board: its SMs, its dense peaks as quoted (FLOP/s) and its memory bandwidth."""

    board: str
    sms: int
    peak_flop_per_s: dict[str, float]
    memory_bytes_per_s: float

    def quoted_clock_mhz(self, kind: str) -> float:
        """The SM clock the datasheet's figure for ``kind`` assumes."""
        return self.peak_flop_per_s[kind] / (self.sms * HOPPER_FLOP_PER_CLOCK[kind]) / 1e6

    def at_clock(self, kind: str, sm_mhz: float) -> float:
        """The dense peak of ``kind`` at ``sm_mhz``: SMs x FLOP a clock x the clock."""
        return self.sms * HOPPER_FLOP_PER_CLOCK[kind] * sm_mhz * 1e6


TERA = 1e12
BOARDS = (
    Datasheet("H100 SXM", 132, {"float32": 66.9 * TERA, "tf32": 494.7 * TERA,
                                "bfloat16": 989.4 * TERA}, 3.35e12),
    Datasheet("H100 PCIe", 114, {"float32": 51.2 * TERA, "tf32": 378.0 * TERA,
                                 "bfloat16": 756.0 * TERA}, 2.0e12),
    Datasheet("H100 NVL", 132, {"float32": 60.0 * TERA, "tf32": 417.5 * TERA,
                                "bfloat16": 835.5 * TERA}, 3.9e12),
    Datasheet("H200 SXM", 132, {"float32": 66.9 * TERA, "tf32": 494.7 * TERA,
                                "bfloat16": 989.4 * TERA}, 4.8e12),
    Datasheet("H200 NVL", 132, {"float32": 60.0 * TERA, "tf32": 417.5 * TERA,
                                "bfloat16": 835.5 * TERA}, 4.8e12),
)  # fmt: skip

#: (words in the device's name, board), the first match wins: more specific first.
#: torch and NVML name an H100 SXM "NVIDIA H100 80GB HBM3", a PCIe one "NVIDIA H100
#: PCIe", an H200 SXM "NVIDIA H200".
NAMES = (
    (("h200", "nvl"), "H200 NVL"),
    (("h200",), "H200 SXM"),
    (("h100", "nvl"), "H100 NVL"),
    (("h100", "pcie"), "H100 PCIe"),
    (("h100",), "H100 SXM"),
)


def lookup(name: str, sms: int | None = None) -> tuple[Datasheet | None, str]:
    """The datasheet of the GPU named ``name`` (``torch.cuda.get_device_name``) with
    ``sms`` SMs, or (None, why not): an unknown board, or one whose SM count differs
    from its datasheet's (a MIG slice, another variant)."""
    lowered = name.lower()
    board = next((b for words, b in NAMES if all(w in lowered for w in words)), None)
    if board is None:
        known = ", ".join(b.board for b in BOARDS)
        return None, f"no datasheet for {name!r} (known: {known})"
    sheet = next(b for b in BOARDS if b.board == board)
    if sms is not None and sms != sheet.sms:
        return None, f"{name!r} has {sms} SMs, the {board} datasheet {sheet.sms}"
    return sheet, ""
