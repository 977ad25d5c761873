"""Headless Chromium as the dashboard's tests and benchmarks launch it: the Debian
browser (``apt-get install -y chromium``), not playwright's bundled ones, with the
flags that keep it from reaching a network or a GPU."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
