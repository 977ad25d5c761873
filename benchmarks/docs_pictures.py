"""The pictures of the docs, from real measured runs: one command makes them all.

    PYTHONPATH=. python benchmarks/docs_pictures.py [--nights 3] [--rounds N] [--skip-quick]

- ``docs/quick.png`` (the README's plot): ``benchbench run quick`` at today's defaults,
  then ``benchbench plot``;
- ``docs/screenshots/*.png`` (the README's and the History page's): a small nightly of
  a few nights of ``torch.sqrt`` and ``torch.rsqrt`` from the quick suite, each night a
  real ``benchbench run --kind nightly`` at today's defaults (rounds and budget: a
  picture of two processes at 0.05 s showed intervals of ±28,000 %, which no default run
  prints) into a fresh store under one machine name, then ``benchbench dashboard build``
  and its pages in headless Chromium.

Nothing comes from test fixtures: every figure on a picture was measured on the machine
that ran this script, which it prints with its load. A few minutes on a quiet 2-core
machine (the quick run is most of it; ``--skip-quick`` leaves ``docs/quick.png`` as is).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.chromium import ARGS as CHROMIUM_ARGS
from tests.chromium import CHROMIUM

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Every picture this script writes, relative to docs/ (tests/unit/test_docs_pictures.py
#: checks that the docs use each and hold no other but those a documented command writes).
PICTURES = (
    "quick.png",
    "screenshots/index.png",
    "screenshots/workload.png",
    "screenshots/history.png",
    "screenshots/compare.png",
)
#: The nightly's points: two ops at two sizes, so that the workload page has curves.
NIGHTLY_FILTER = r"sqrt:torch\.r?sqrt\[.*n=(4096|1048576)\)"
VIEWPORT = {"width": 1280, "height": 860}


def benchbench(*argv: str, env: dict[str, str], cwd: Path) -> str:
    """Run the CLI as a user would; its output, and a clear failure if it fails."""
    command = [
        sys.executable,
        "-c",
        "import sys; from benchbench.cli import main; sys.exit(main())",
    ]
    done = subprocess.run(
        [*command, *argv], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"benchbench {' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def nightly(work: Path, nights: int, rounds: int | None, env: dict[str, str]) -> list[str]:
    """A few nights of the nightly filter (``rounds`` None: run's default); their labels."""
    ids = []
    for night in range(1, nights + 1):
        label = f"night-{night}"
        chosen = ["--rounds", str(rounds)] if rounds is not None else []
        benchbench(
            "run", "quick", "--filter", NIGHTLY_FILTER, "--kind", "nightly", "--label", label,
            *chosen, env=env, cwd=work,
        )  # fmt: skip
        ids.append(label)
    return ids


def run_ids(labels: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    import json

    runs = json.loads(benchbench("runs", "--format", "json", env=env, cwd=cwd))["runs"]
    by_label = {r["label"]: r["id"] for r in runs}
    return [by_label[label] for label in labels]


def screenshots(site: Path, first: str, last: str) -> None:
    """The dashboard's pages as a reader opens them, drawn, into docs/screenshots/."""
    from playwright.sync_api import sync_playwright

    out = DOCS / "screenshots"
    out.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)

        def shot(url: str, name: str) -> None:
            page.goto(url)
            page.wait_for_function("window.BB_READY !== undefined", timeout=60_000)
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / f"{name}.png"), full_page=False)

        shot((site / "index.html").as_uri(), "index")
        shot((site / "workload.html").as_uri() + "#workload=sqrt", "workload")
        shot((site / "compare.html").as_uri() + f"#a={first}&b={last}", "compare")
        page.goto((site / "index.html").as_uri())
        page.wait_for_function("window.BB_READY !== undefined", timeout=60_000)
        history = page.locator("a[href^='history.html']").first.get_attribute("href")
        shot(f"{(site / 'index.html').as_uri().rsplit('/', 1)[0]}/{history}", "history")
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--rounds", type=int, help="rounds of each night's run (run's default)")
    parser.add_argument("--skip-quick", action="store_true", help="leave docs/quick.png")
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="docs-pictures-") as tmp:
        work = Path(tmp)
        env = dict(os.environ, BENCHBENCH_MACHINE="docs-box", PYTHONPATH=str(ROOT))
        env.pop("BENCHBENCH_ROUNDS", None)
        env["BENCHBENCH_STORE"] = str(work / "nightly.db")
        labels = nightly(work, args.nights, args.rounds, env)
        first, *_, last = run_ids(labels, env, work)
        benchbench("dashboard", "build", "-o", str(work / "site"), env=env, cwd=work)
        screenshots(work / "site", first, last)
        if not args.skip_quick:
            env["BENCHBENCH_STORE"] = str(work / "quick.db")
            benchbench("run", "quick", "--label", "docs-quick", env=env, cwd=work)
            benchbench("plot", "docs-quick", "-o", str(DOCS / "quick.png"), env=env, cwd=work)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("written:", ", ".join(f"docs/{p}" for p in PICTURES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
