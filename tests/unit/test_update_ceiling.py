"""In-place points and the update ceiling: which curve holds a row, the old-profile
fallback, the views and doctor, and a variant's declared traffic (the probe's update
sweep: test_probe_bandwidth.py).

Fake profiles and fake rows; one tiny point is measured for its stored ``extra``, and no
magnitude read off a clock is asserted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from benchbench.analysis.roofline import (
    NO_UPDATE_CURVE_NOTE,
    bandwidth_at,
    ceiling_for,
    traffic_of,
    working_set_for,
)
from benchbench.core.errors import MeasurementError, SuiteError
from benchbench.machine.doctor_ceilings import check_profile, check_run
from benchbench.machine.hardware import Profile
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy
from benchbench.suite.declare import Suite, Variant
from benchbench.views.plot import roofline_figure
from benchbench.views.results import ABOVE_CEILING, above_ceiling_note, with_roofline
from tests.unit.test_curves import row
from tests.unit.test_plot_views import profile as copy_only_profile

KIB, MIB = 1 << 10, 1 << 20
SIZES = tuple(4096 * 4**k for k in range(6))  # 4 KiB .. 4 MiB, as the fake copy curve
# The copy curves' 40 -> 10 GB/s (L2 of 1 MiB, then memory); an update 1.5x faster, as
# a copy's write-allocate makes it (12 bytes moved for the 8 credited).
UPDATE = tuple(zip(SIZES, [60e9, 60e9, 60e9, 30e9, 15e9, 15e9], strict=True))
IN_PLACE = {"inplace": "restored outside the timed region; 1 call per copy, K = 1 copies"}


def with_update() -> Profile:
    old = copy_only_profile()
    return Profile(
        **{
            **vars(old),
            "bandwidth": {**old.bandwidth, "update": UPDATE},
            "memory_bytes_per_s": {**old.memory_bytes_per_s, "update": 15e9},
            "cache_bytes_per_s": {**old.cache_bytes_per_s, "update": 60e9},
            "repeats": 3,
            "min_call_bytes": 16 * MIB,
        }
    )


def sqrt_row(n: int, bytes_per_s: float, *, extra: dict[str, Any] | None = None) -> dict:
    """A measured float32 sqrt of ``n`` elements credited 8 bytes each at ``bytes_per_s``."""
    out: dict[str, Any] = row(n, 8.0 * n / bytes_per_s, variant="x" if extra else "torch.sqrt")
    out["bytes_per_s"] = bytes_per_s
    out["flop_per_s"] = n / out["median_s"]
    out["extra"] = extra or {"outputs": "keep"}
    return out


def test_traffic_of_reads_the_hint_then_the_inplace_note() -> None:
    assert traffic_of(None) == traffic_of({}) == "copy"
    assert traffic_of({"outputs": "keep"}) == "copy"
    assert traffic_of(IN_PLACE) == "update"
    assert traffic_of({"traffic": "update"}) == "update"  # declared, not in place
    assert traffic_of({**IN_PLACE, "traffic": "copy"}) == "copy"  # the declaration wins
    assert traffic_of({**IN_PLACE, "traffic": "triad"}) == "update"  # data: unknown ignored
    assert working_set_for(32 * MIB, "update") == 16 * MIB
    assert working_set_for(32 * MIB, "copy") == 32 * MIB


def test_an_update_is_read_off_its_own_curve_and_copy_off_the_best_of_the_others() -> None:
    profile = with_update()
    assert bandwidth_at(profile, MIB, "update") == pytest.approx(15e9)
    assert bandwidth_at(profile, MIB, "copy") == pytest.approx(10e9)
    assert bandwidth_at(profile, MIB) == pytest.approx(10e9)  # copy is the default
    # 512 KiB is halfway in log-size between the update's 256 KiB (30) and 1 MiB (15).
    assert bandwidth_at(profile, 512 * KIB, "update") == pytest.approx((30e9 * 15e9) ** 0.5)
    ceiling = ceiling_for(profile, 2 * MIB, 0.0, MIB, traffic="update")
    assert (ceiling.kind, ceiling.traffic, ceiling.note) == ("memory", "update", "")
    assert ceiling.value == pytest.approx(15e9)
    with pytest.raises(MeasurementError, match="traffic must be one of"):
        bandwidth_at(profile, MIB, "triad")  # type: ignore[arg-type]


def test_an_in_place_row_is_held_to_the_update_ceiling_and_a_copy_row_to_copy() -> None:
    # 2^18 float32: a 1 MiB buffer, 2 MiB credited a call, both at 14 GB/s.
    n = 1 << 18
    copy_row, update_row = sqrt_row(n, 14e9), sqrt_row(n, 14e9, extra=IN_PLACE)
    out = with_roofline([copy_row, update_row], {"cpu": with_update()})
    # The copy row: working set 2 MiB, the copy curves' 10 GB/s, so 140 %: above.
    assert out[0]["ceiling"]["traffic"] == "copy"
    assert out[0]["ceiling"]["value"] == pytest.approx(10e9)
    assert out[0]["percent_of_peak"] == pytest.approx(140.0)
    assert out[0]["ceiling"]["above_measured"] is True
    # The in-place row: its 1 MiB buffer on the update curve, 15 GB/s, so 93 %: within.
    assert out[1]["ceiling"]["traffic"] == "update"
    assert out[1]["ceiling"]["value"] == pytest.approx(15e9)
    assert out[1]["percent_of_peak"] == pytest.approx(100 * 14 / 15)
    assert out[1]["ceiling"]["above_measured"] is False
    assert "note" not in out[1]["ceiling"] and "warnings" not in out[1]
    note = above_ceiling_note(out)
    assert note is not None and note.startswith(f"1 point(s) {ABOVE_CEILING}")
    assert "torch.sqrt" in note and " x " not in note
    figure = roofline_figure([copy_row, update_row], profile=with_update())
    label = figure.get_supxlabel()
    assert "sqrt torch.sqrt at 2^18 (140 %)" in label.replace("\n", " ") and "sqrt x " not in label
    legend = figure.axes[0].get_legend()
    texts = [t.get_text() for t in legend.get_texts()] if legend else []
    assert "roof: main-memory bandwidth 10 GB/s" in texts  # the copy curves' roof
    assert "roof: main memory, in-place update 15 GB/s" in texts
    # The update's faster figures are no roof for a copy: the peaks leave them out.
    assert with_update().peak_memory_bytes_per_s == 10e9
    assert with_update().peak_cache_bytes_per_s == 40e9
    (check,) = check_run("r", out, with_update())
    assert check.status == "warn" and check.value.startswith("run r: 1 of 2 point(s) above")
    # An update 1.5x faster than the copy ceiling, as write-allocate allows, is within
    # its own: 15 GB/s held to copy's 10 reads 150 %, to update's 15 reads 100 %.
    (fast,) = with_roofline([sqrt_row(n, 15e9, extra=IN_PLACE)], {"cpu": with_update()})
    assert fast["percent_of_peak"] == pytest.approx(100.0)


def test_a_profile_without_the_update_curve_holds_in_place_rows_to_copy_with_a_note() -> None:
    old = copy_only_profile()
    assert not old.has_update_curve and with_update().has_update_curve
    n = 1 << 18
    (held,) = with_roofline([sqrt_row(n, 9e9, extra=IN_PLACE)], {"cpu": old})
    # The copy curves at the update's working set (1 MiB): 10 GB/s, so 90 %.
    assert held["ceiling"]["traffic"] == "update"
    assert held["ceiling"]["value"] == pytest.approx(10e9)
    assert held["percent_of_peak"] == pytest.approx(90.0)
    assert held["ceiling"]["note"] == NO_UPDATE_CURVE_NOTE
    assert held["warnings"] == [NO_UPDATE_CURVE_NOTE]  # travels to the table and --json
    assert ceiling_for(old, 8.0, 0.0, 8.0, traffic="update").note == NO_UPDATE_CURVE_NOTE
    (plain,) = with_roofline([sqrt_row(n, 9e9)], {"cpu": old})
    assert "warnings" not in plain and "note" not in plain["ceiling"]
    # A stored document from before the update curve reads, and round-trips without it.
    doc = json.loads(json.dumps(old.to_dict()))
    assert "update" not in doc["bandwidth"]
    assert not Profile.from_dict(doc).has_update_curve
    assert Profile.from_dict(with_update().to_dict()).bandwidth["update"] == UPDATE
    # doctor: probe again, since in-place points can read up to 150 % of copy curves.
    amortised = Profile(**{**vars(old), "repeats": 3, "min_call_bytes": 16 * MIB})
    (check,) = check_profile(amortised)
    assert check.status == "warn" and check.value.startswith("no update (in-place")
    assert check.advice == "benchbench probe --threads 2"
    (check,) = check_profile(with_update())
    assert check.status == "ok"


def test_a_variant_declares_its_traffic_and_the_result_stores_it() -> None:
    suite = Suite("s")
    w = suite.workload(
        "add1",
        setup=lambda c: c.uniform(0.5, 1.5),
        variants=[
            Variant("torch.add", lambda x: torch.add(x, 1.0)),
            Variant("out=x", lambda x: torch.add(x, 1.0, out=x), inplace=True, traffic="update"),
            Variant("x.add_(1) as copy", lambda x: x.add_(1.0), inplace=True, traffic="copy"),
        ],
        sizes=[64],
        bytes=lambda p: 2 * p.numel * p.itemsize,
    )
    extras = {}
    for point in w.points():
        result = measure_point(w, point, Options(policy=Policy(max_time_s=0.01)))
        assert result.status == "ok", result.reason
        extras[point.variant] = result.extra
    assert "traffic" not in extras["torch.add"] and traffic_of(extras["torch.add"]) == "copy"
    assert extras["out=x"]["traffic"] == "update" and traffic_of(extras["out=x"]) == "update"
    assert extras["x.add_(1) as copy"]["traffic"] == "copy"
    assert "inplace" in extras["x.add_(1) as copy"]  # in place, yet declared a copy
    assert traffic_of(extras["x.add_(1) as copy"]) == "copy"
    with pytest.raises(SuiteError, match=r"variant 'v': traffic must be one of copy, update"):
        suite.workload(
            "bad",
            setup=lambda c: c.uniform(0.5, 1.5),
            variants=[Variant("v", torch.sqrt, traffic="triad")],
            sizes=[64],
        )
