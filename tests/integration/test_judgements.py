"""The detector's stored verdicts (schema 5): reused while a series is unchanged, renewed
when what it was judged on changed, on both engines; and the migration that adds them
to a checked-in version-4 store."""

from __future__ import annotations

import datetime as dt
import random
import shutil

import pytest
import sqlalchemy as sa

from benchbench.analysis import regressions
from benchbench.analysis.regressions import detect
from benchbench.store import open_store
from benchbench.store import schema as t
from benchbench.store.history import annotate, list_alerts
from benchbench.store.series import series_rows
from tests.storedata import STORE_V4
from tests.synthetic import environment, point, write_history


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many series each :func:`detect` call analysed (not read back)."""
    counts: list[int] = []
    analyze_all = regressions.analyze_all

    def counting(series, **kwargs):
        counts.append(len(series))
        return analyze_all(series, **kwargs)

    monkeypatch.setattr(regressions, "analyze_all", counting)
    return counts


def _noisy(levels: list[float], seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, 0.01)) for level in levels]


def test_a_series_is_judged_again_only_when_its_judged_values_change(store_url, judged):
    store = open_store(store_url)
    a, b = environment("box-a"), environment("box-b")
    step = _noisy([1e-3] * 12 + [1.3e-3] * 8, seed=1)
    write_history(store, {point("step"): step, point("flat"): _noisy([2e-3] * 20, 2)}, env=a)
    write_history(store, {point("flat"): _noisy([2e-3] * 20, 3)}, env=b, seed=1)
    first, new = detect(store)
    assert judged == [3] and new == 1
    again, new = detect(store)
    assert judged[-1] == 0 and new == 0
    assert again == first  # a verdict read back makes the same report, alerts included
    # The dashboard's series (read with the columns its pages show) are the same values.
    assert detect(store, table=series_rows(store).table())[0] == first and judged[-1] == 0
    # A new night on box-b: only box-b's series is judged again.
    later = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
    write_history(store, {point("flat"): [2e-3]}, env=b, seed=2, start=later)
    assert len(detect(store)[0]) == 3 and judged[-1] == 1
    # Another minimum effect is another judgement, of every series; kept in its turn.
    detect(store, min_effect=0.1)
    detect(store, min_effect=0.1)
    assert judged[-2:] == [3, 0]
    # An expected change moves the stepped series' baseline: that series is judged again.
    (alert,) = list_alerts(store)
    assert list(alert["detail"]) == sorted(alert["detail"])  # the same on either engine
    annotate(store, alert["id"], "expected")
    reports, new = detect(store, min_effect=0.1)
    assert judged[-1] == 1 and new == 0 and not [x for r in reports for x in r.alerts]
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(t.series_judgement))
        assert rows.scalar_one() == 3  # one per series and metric, replaced, never added


def test_checked_in_v4_store_migrates_and_keeps_its_first_verdicts(tmp_path, judged):
    path = tmp_path / "v4.db"
    shutil.copy(STORE_V4, path)
    store = open_store(str(path))
    with store.engine.connect() as conn:
        assert list(conn.execute(sa.select(t.schema_version.c.version)).scalars()) == [5]
        assert "series_judgement" in sa.inspect(conn).get_table_names()
    reports, new = detect(store)
    assert judged == [4] and new == 0
    assert sorted(r.points for r in reports) == [6, 6, 6, 6]  # six nights of four points
    assert detect(store)[0] == reports and judged == [4, 0]
