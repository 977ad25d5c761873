"""Static, offline, interactive dashboard built from plain results data.

Usage::

    from benchbench.dashboard import DashboardData, build_site
    index_html = build_site(data, Path("dashboards/nightly"))

The site opens from ``file://`` as well as from any static host: every page is an
HTML file that loads bundled JavaScript (``assets/``) and its own slice of the data
as ``data/*.js`` files assigning to a global, because Chromium refuses ``fetch()``
of local JSON. No page loads the whole history: the overview reads one summary,
a workload page reads that workload's latest runs, a history page that workload's
medians, the compare page the two runs it compares, the breakdown page the
captured calls of the latest run that holds any.

Built from a store (:func:`benchbench.dashboard.from_store.load`), the history comes
from the store's series (what its covering index holds) and the points of a run are in
the site only for the runs its pages show (:mod:`benchbench.dashboard.shown_runs`); the
index marks those runs, and the compare page offers only them.
"""

from __future__ import annotations

from benchbench.dashboard.contract import (
    ALERT_COLUMNS,
    ANNOTATION_COLUMNS,
    ENVIRONMENT_COLUMNS,
    MEASUREMENT_COLUMNS,
    RUN_COLUMNS,
    DashboardData,
)
from benchbench.dashboard.site import build_site

__all__ = [
    "ALERT_COLUMNS",
    "ANNOTATION_COLUMNS",
    "ENVIRONMENT_COLUMNS",
    "MEASUREMENT_COLUMNS",
    "RUN_COLUMNS",
    "DashboardData",
    "build_site",
]
