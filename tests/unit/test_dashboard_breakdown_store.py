"""The dashboard reads captured calls' % of ceiling and compile times from the store, as
`benchbench breakdown` computes them."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from benchbench.core.values import Point, Result
from benchbench.dashboard.from_store import load
from benchbench.machine.environment import Environment
from benchbench.store import open_store
from benchbench.store.profiles import latest_profiles, save_profile
from benchbench.views.results import with_roofline
from tests.unit.test_plot_views import profile
from tests.unit.test_store_queries import _create_run

RUN = "aaaa0000-0000-4000-8000-000000000002"


def _captured(workload: str, variant: str, params: tuple, **fields) -> Result:
    point = Point("zoo", workload, variant, 1, (1,), "float32", "cpu", params)
    return Result(point=point, status="ok", samples_s=(1e-3,) * 3, calls_per_sample=1, **fields)


def test_captured_rows_get_the_clis_percent_of_ceiling_and_their_compile_time(
    tmp_path: Path,
) -> None:
    store = open_store(str(tmp_path / "s.db"))
    env = Environment(fields={"machine": "m1", "threads": 2})
    store.save_environment(env)
    save_profile(store, env.id, "cpu", profile().to_dict())
    _create_run(store, RUN, env, dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc), label="z")
    m = (("capture", "m"), ("count", 2))
    whole = (("capture", "m"),)
    store.write_results(
        RUN,
        [
            _captured("m aten.mm#1", "aten.mm.default", m, bytes_per_call=4e6, flop_per_call=1e7),
            _captured("m whole", "m", whole),
            _captured("m whole-compiled", "torch.compile", whole, extra={"compile_s": 12.5}),
        ],
    )
    frame = load(store).measurements.set_index("workload")
    cli = {
        r["workload"]: r["percent_of_peak"]
        for r in with_roofline(store.measurements(RUN), latest_profiles(store, env.id, ["cpu"]))
    }
    # one definition: the page's % of ceiling is the CLI's
    assert cli["m aten.mm#1"] is not None
    assert frame.loc["m aten.mm#1", "percent_of_peak"] == pytest.approx(cli["m aten.mm#1"])
    assert frame.loc["m whole-compiled", "compile_s"] == pytest.approx(12.5)
    assert math.isnan(frame.loc["m whole", "compile_s"])
    assert math.isnan(frame.loc["m whole", "percent_of_peak"])  # no work model
