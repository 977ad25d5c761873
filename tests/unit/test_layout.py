"""The shape of the code: few loose modules, files readable in one sitting.

The import contract itself (layers, no cycles) is checked by ``lint-imports`` in the
test command, from ``[tool.importlinter]`` in pyproject.toml.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "benchbench"
MAX_LOOSE_MODULES = 8
MAX_LINES = 450
#: A longer file must say at the top why it reads best whole.
KEPT_WHOLE = "reads best whole"


def test_few_modules_sit_loose_at_the_top_of_the_package():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_every_package_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring, f"{init.relative_to(ROOT)} has no docstring saying what it owns"


def test_no_source_file_is_longer_than_one_sitting():
    too_long = []
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text().splitlines()
        if len(lines) <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse("\n".join(lines))) or ""
        if KEPT_WHOLE not in docstring:
            too_long.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert not too_long, (
        f"over {MAX_LINES} lines (split it, or say in its docstring why it {KEPT_WHOLE}): "
        + ", ".join(too_long)
    )
