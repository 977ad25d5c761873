"""Build or serve the static dashboard of the store's history.

`dashboard build` writes a static site (all JavaScript and CSS bundled, works from
file:// and any static host, nothing fetched from a network) into
dashboards/NAME (default dashboards/latest). `dashboard serve` serves one on
127.0.0.1 and rebuilds it from the store on request (opening the overview rebuilds
at most every 5 s; /__rebuild forces it). Regression detection runs first, so the
pages show current alerts; it judges only the series whose values changed since their
stored verdicts (right after `benchbench regressions`: none). `build --no-detect` shows
the alerts already stored and marks their first bad runs, not every change point.

A build writes into a temporary folder beside DIR and swaps it in when complete: a build
that fails or is killed leaves the old site whole. DIR must be new, empty or a dashboard
(it holds .benchbench-dashboard), and not the current folder; any other folder is refused,
since a build replaces it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from benchbench.cli import flags
from benchbench.core.errors import UsageError

if TYPE_CHECKING:
    from benchbench.store import Store

HELP = "build or serve the static dashboard"
DEFAULT_DIR = Path("dashboards") / "latest"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="write the static site", description=__doc__)
    build.add_argument(
        "-o",
        "--output",
        type=Path,
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"output folder (default {DEFAULT_DIR})",
    )
    build.add_argument("--repo-url", metavar="URL", help="link commits to URL/commit/SHA")
    build.add_argument(
        "--no-detect",
        action="store_true",
        help="show the alerts already in the store instead of detecting regressions "
        "(detection judges only the series changed since their stored verdicts); history "
        "pages then mark the alerts' first bad runs, not every change point",
    )
    flags.add_store(build)
    srv = sub.add_parser(
        "serve",
        help="serve the site on 127.0.0.1, rebuilding on request",
        description="Serve the dashboard in DIR on HOST:PORT, and rebuild it from the store "
        "when the overview is opened or /__rebuild is requested (how often: `benchbench "
        "dashboard --help`).",
    )
    srv.add_argument(
        "-d",
        "--directory",
        type=Path,
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"site folder (default {DEFAULT_DIR})",
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    srv.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    srv.add_argument("--repo-url", metavar="URL", help="link commits to URL/commit/SHA")
    flags.add_store(srv)


def build(store: Store, output: Path, repo_url: str | None, detect: bool = True) -> Path:
    """Detect regressions, read the store, write the site; returns index.html's path.

    The store's series are read once (the columns ``ix_measurement_series`` holds) for
    both the detector and the history pages, and the detector runs once: its change
    points are the ones the history pages mark; it judges only the series whose values
    changed since their stored verdicts (on a fleet's year, judging all of them is ~36 s
    of a build). ``detect=False`` keeps the store's alerts as they are and marks their
    first bad runs instead."""
    from benchbench.analysis.regressions import detect as detect_regressions
    from benchbench.dashboard import build_site
    from benchbench.dashboard.from_store import fit, load
    from benchbench.store.series import series_rows

    series = series_rows(store)
    reports = detect_regressions(store, table=series.table())[0] if detect else None
    data = load(store, repo_url, series=series, reports=reports, marks_from_alerts=not detect)
    return build_site(data, output, fit=fit)


def run(args: argparse.Namespace) -> int:
    from benchbench.dashboard.target import check_target

    # Checked before the store is opened; serve rebuilds into its folder, so the same.
    check_target(args.output if args.action == "build" else args.directory)
    url = args.repo_url
    if url is not None and not (url.startswith(("http://", "https://")) and " " not in url):
        raise UsageError(
            f"--repo-url {url!r} is not an http(s) URL; give e.g. "
            "--repo-url https://github.com/OWNER/REPO (commits link to URL/commit/SHA)"
        )
    if args.action == "serve" and not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0-65535, got {args.port}; e.g. --port 8000")
    store = flags.store_from(args)
    if args.action == "build":
        index = build(store, args.output, args.repo_url, detect=not args.no_detect)
        flags.stderr().print(
            f"dashboard written to {index.parent}; open {index.resolve().as_uri()}"
        )
        return 0
    flags.stderr().print(
        f"serving {args.directory} on http://{args.host}:{args.port}/ (Ctrl-C to stop)"
    )

    from benchbench.dashboard.serve import serve

    def rebuild() -> None:
        build(store, args.directory, args.repo_url)

    serve(args.directory, args.host, args.port, rebuild=rebuild)
    return 0
