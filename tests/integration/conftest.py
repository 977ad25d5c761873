"""The integration tests' shared fixtures: headless Chromium for the dashboard's pages.

``browser`` needs /usr/bin/chromium and the playwright package (its bundled browsers are
not used); a test that asks for it is skipped when either is missing, except under
CI=true where that fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.chromium import ARGS, CHROMIUM


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: pip install playwright")
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()
