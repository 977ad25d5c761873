"""The claims the ``collectives`` suite's points answer (``suites/collectives.py``).

SEEDS D: bus bandwidth rises with message size.
"""

from benchbench.analysis.claims import HOLDS, Claim, Finding, Rows


def _bandwidth_grows(rows: Rows) -> Finding:
    found = [r for r in rows.find("all-reduce") if r["status"] == "ok" and r["device"] == "cpu"]
    if len(found) < 2:
        return rows.one("all-reduce")  # type: ignore[return-value]
    found.sort(key=lambda r: r["size"])
    small, large = found[0], found[-1]
    figure = (
        f"all-reduce busbw {small['bytes_per_s'] / 1e9:.3g} GB/s at {small['size'] * 4} B, "
        f"{large['bytes_per_s'] / 1e9:.3g} GB/s at {large['size'] * 4 / 2**20:g} MiB "
        "(gloo, 2 ranks)"
    )
    verdict = HOLDS if large["bytes_per_s"] > small["bytes_per_s"] else "does not hold"
    return Finding(verdict, figure, large["bytes_per_s"], reason="bus bandwidth rises with size")


claims = [
    Claim(
        "D-collectives",
        "D",
        "collectives are latency-bound for small messages: bus bandwidth rises with message size",
        "collectives/all-reduce: bus bandwidth at 1 KiB and 64 MiB, 2 ranks",
        "collectives",
        ("all-reduce",),
        _bandwidth_grows,
    )
]
