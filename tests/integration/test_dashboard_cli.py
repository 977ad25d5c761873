"""`benchbench dashboard build / serve` from a real store."""

import random
import socket

from benchbench.store import open_store
from tests.integration.cli import benchbench
from tests.synthetic import point, write_history


def test_build_from_a_store_with_history_shows_the_regression_and_failures(tmp_path):
    db = tmp_path / "h.db"
    rng = random.Random(3)
    slow = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(30)] + [1.2e-3] * 12
    write_history(
        open_store(str(db)),
        {point("torch.sqrt"): slow, point("x.sqrt_()"): [2e-3] * 41 + [None]},
    )
    done = benchbench("dashboard", "build", "--store", str(db), "-o", "site", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    site = tmp_path / "site"
    for page in ("index", "workload", "history", "compare", "environment"):
        assert (site / f"{page}.html").is_file()
    index = (site / "data" / "index.js").read_text()
    assert "torch.sqrt" in index
    assert '"major"' in index  # the regression found by `regressions`' detector
    run_pages = "".join(p.read_text() for p in (site / "data" / "runs").glob("*.js"))
    assert "crashed: SIGABRT" in run_pages  # failures are shown with their reason
    assert "cdn" not in (site / "index.html").read_text().lower()


def test_empty_store_builds_a_site_that_says_how_to_add_a_run(tmp_path):
    open_store(str(tmp_path / "e.db"))  # empty, but there: the dashboard never creates one
    done = benchbench(
        "dashboard", "build", "--store", str(tmp_path / "e.db"), "-o", "site", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    data = (tmp_path / "site" / "data" / "index.js").read_text()
    assert data  # the page itself renders the "no runs yet" advice from this data
    assert "benchbench run quick" in (
        tmp_path / "site" / "index.html"
    ).read_text() + data + "".join(
        p.read_text() for p in (tmp_path / "site" / "assets").glob("*.js")
    )


def test_serve_refuses_a_port_in_use(tmp_path):
    open_store(str(tmp_path / "e.db"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = benchbench(
            "dashboard",
            "serve",
            "--port",
            str(port),
            "--store",
            str(tmp_path / "e.db"),
            "-d",
            str(tmp_path / "site"),
            cwd=tmp_path,
            timeout=60,
        )
    assert done.returncode == 2
    assert f"{port}" in done.stderr and "--port" in done.stderr
