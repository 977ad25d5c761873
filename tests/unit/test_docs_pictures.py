"""Every picture in the docs is used by a page and made from real runs by a command the
repository holds: benchmarks/docs_pictures.py, or a command a page shows beside it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tests.docblocks import doc_pages

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
SUFFIXES = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}
#: Pictures of real runs that a page makes with the command it shows beside them:
#: builtin-suites.md's `benchbench accuracy sqrt -o docs/accuracy_sqrt.png`, models.md's
#: `benchbench breakdown latest --plot` of its transformer layer.
BY_A_PAGE_S_COMMAND = {"accuracy_sqrt.png", "breakdown_transformer.png"}


def _pictures_script() -> tuple[str, ...]:
    spec = importlib.util.spec_from_file_location(
        "docs_pictures", ROOT / "benchmarks" / "docs_pictures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.PICTURES)


def _referenced() -> set[str]:
    used = set()
    for page in doc_pages():
        for target in IMAGE.findall(page.read_text()):
            path = (page.parent / target).resolve()
            used.add(path.relative_to(DOCS).as_posix())
    return used


def _images() -> set[str]:
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*") if p.suffix in SUFFIXES}


def test_every_picture_is_used_and_every_use_exists() -> None:
    images, used = _images(), _referenced()
    assert not images - used, f"pictures no page uses (delete them): {sorted(images - used)}"
    assert not used - images, f"pages show pictures that are missing: {sorted(used - images)}"


def test_every_picture_is_made_from_real_runs_by_one_command() -> None:
    made = set(_pictures_script()) | BY_A_PAGE_S_COMMAND
    stray = sorted(_images() - made)
    assert not stray, f"pictures not made by benchmarks/docs_pictures.py: {stray}"
