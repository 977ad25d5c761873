"""Points above 110 % of their ceiling, before and after in-place points got the update curve.

Run from the repository root, after a full probe and runs into a throwaway store::

    benchbench probe --store S
    for i in 1 2 3; do benchbench run quick --store S --label q$i; done
    PYTHONPATH=. python benchmarks/ceiling_count.py S q1 q2 q3

For each run, every measured point is held to the store's newest profile of its
environment twice: *before*, every row as copy traffic (``extra.traffic`` forced to
``"copy"``: the read / write / copy curves at a working set of its bytes, as every point
was held before the update curve existed), and *after*, as the views hold it now (an
in-place row on the update curve at half its bytes). It prints the counts above 110 %,
which are memory-bound, and the in-place points' percentages.
"""

from __future__ import annotations

import sys
from typing import Any

from benchbench.store import open_store
from benchbench.store.profiles import latest_profiles
from benchbench.views.results import with_roofline


def _summary(rows: list[dict[str, Any]]) -> str:
    held = [r for r in rows if r.get("ceiling")]
    above = [r for r in held if r["ceiling"]["above_measured"]]
    memory = [r for r in above if r["ceiling"]["kind"] == "memory"]
    named = ", ".join(
        f"{r['workload']} {r['variant']} {int(r['size'])} {r['percent_of_peak']:.0f} %"
        f" {r['ceiling']['kind']}"
        for r in sorted(above, key=lambda r: -r["percent_of_peak"])[:4]
    )
    top = max(held, key=lambda r: r["percent_of_peak"], default=None)
    highest = (
        f"; highest {top['workload']} {top['variant']} {int(top['size'])} "
        f"{top['percent_of_peak']:.0f} % {top['ceiling']['kind']}"
        if top
        else ""
    )
    return f"{len(above)} of {len(held)} above 110 % ({len(memory)} memory-bound){highest}" + (
        f": {named}" if named else ""
    )


def main(store_url: str, labels: list[str]) -> None:
    store = open_store(store_url, create=False)
    for label in labels:
        run = store.resolve_run(label)
        rows = store.measurements(run["id"])
        profiles = latest_profiles(store, run["environment_id"], {str(r["device"]) for r in rows})
        as_copy = [{**r, "extra": {**(r.get("extra") or {}), "traffic": "copy"}} for r in rows]
        before, after = with_roofline(as_copy, profiles), with_roofline(rows, profiles)
        print(f"{label}: before {_summary(before)}")
        print(f"{label}: after  {_summary(after)}")
        for b, a in zip(before, after, strict=True):
            if (a.get("ceiling") or {}).get("traffic") == "update":
                print(
                    f"  {a['variant']} {int(a['size']):>8}: {a['bytes_per_s'] / 1e9:6.1f} GB/s; "
                    f"as copy {_held(b)}, as update {_held(a)}"
                )


def _held(row: dict[str, Any]) -> str:
    ceiling = row["ceiling"]
    unit = "GB/s" if ceiling["kind"] == "memory" else "GFLOP/s"
    return f"{row['percent_of_peak']:5.0f} % of {ceiling['value'] / 1e9:6.1f} {unit}"


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python benchmarks/ceiling_count.py STORE RUN [RUN...]")
    main(sys.argv[1], sys.argv[2:])
