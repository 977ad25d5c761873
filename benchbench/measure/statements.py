"""Statements: variants given as Python expressions (``benchbench time``).

Parsing and the static name check need no torch, so the CLI runs them in its own
process before a worker is started; :func:`statement_function` is what the worker
times.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.core.errors import UsageError

POINT_NAMES = ("n", "shape", "device", "dtype", "torch", "np", "ctx")
#: The setup used when none is given (what the worker runs, in words).
DEFAULT_SETUP = "x, y = ctx.uniform(0.5, 1.5), ctx.uniform(0.5, 1.5)"
DEFAULT_SETUP_NAMES = ("x", "y")
#: Exceptions that mean the statement itself is wrong, whatever the point.
STATEMENT_BUGS = ("NameError", "UnboundLocalError", "AttributeError", "ImportError")
#: benchmark.variant is a VARCHAR(255) in the store.
MAX_STATEMENT_CHARS = 255


@dataclass(frozen=True)
class Statement:
    """One variant given as a Python expression; ``index`` counts from 1."""

    index: int
    text: str

    @property
    def filename(self) -> str:
        return f"<statement {self.index}>"

    def describe(self) -> str:
        return f"statement {self.index} {self.text!r}"


def _syntax_message(exc: SyntaxError) -> str:
    where = f" at column {exc.offset}" if exc.offset else ""
    return f"syntax error{where}: {exc.msg}"


def parse_statements(texts: Sequence[str]) -> list[Statement]:
    """The statements, each compiled once in ``eval`` mode; UsageError names a bad one."""
    if not texts:
        raise UsageError("give at least one statement, e.g. 'torch.rsqrt(x)'")
    out: list[Statement] = []
    seen: dict[str, int] = {}
    for index, text in enumerate(texts, start=1):
        statement = Statement(index, text)
        if not text.strip():
            raise UsageError(f"statement {index} is empty; give a Python expression")
        try:
            compile(text, statement.filename, "eval")
        except SyntaxError as exc:
            hint = " (a statement is one expression, such as 'torch.sqrt(x)')"
            raise UsageError(f"{statement.describe()}: {_syntax_message(exc)}{hint}") from None
        if text in seen:
            raise UsageError(f"{statement.describe()} repeats statement {seen[text]}")
        if len(text) > MAX_STATEMENT_CHARS:
            raise UsageError(
                f"statement {index} has {len(text)} characters; at most "
                f"{MAX_STATEMENT_CHARS} are stored: move the long part into --setup"
            )
        seen[text] = index
        out.append(statement)
    return out


def setup_names(setup: str | None) -> set[str] | None:
    """Names the setup binds (``None``: unknown, after ``from m import *``)."""
    if setup is None:
        return set(DEFAULT_SETUP_NAMES)
    try:
        tree = ast.parse(setup, "<setup>", "exec")
    except SyntaxError as exc:
        raise UsageError(f"--setup {setup!r}: {_syntax_message(exc)}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.partition(".")[0])
    return names


def statement_names(text: str) -> set[str]:
    """Names a statement reads from its namespace (``torch``, ``x``, ...)."""
    return _free_names(ast.parse(text, "<statement>", "eval"))


def _free_names(tree: ast.AST) -> set[str]:
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return loaded - bound


def check_names(statements: Sequence[Statement], setup: str | None) -> None:
    """UsageError for a statement using a name neither the point nor the setup binds.

    Static (no torch needed): names bound inside the statement (lambda arguments,
    comprehension targets) count as bound; an attribute (``torch.rsqr``) is checked
    later, by evaluating every statement once before anything is measured.
    """
    bound = setup_names(setup)
    if bound is None:
        return
    known = bound | set(POINT_NAMES) | set(dir(builtins))
    for statement in statements:
        missing = sorted(_free_names(ast.parse(statement.text, statement.filename, "eval")) - known)
        if missing:
            defined = ", ".join(sorted(bound | set(POINT_NAMES)))
            raise UsageError(
                f"{statement.describe()}: name {missing[0]!r} is not defined "
                f"(defined: {defined}; bind more names with --setup)"
            )


def statement_function(statement: Statement, namespace: dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument function evaluating ``statement`` over ``namespace``.

    Compiled as ``lambda: (...)`` so that names are global look-ups (~0.2 µs a call
    here) rather than ``eval``'s name look-ups through locals (~0.4 µs).
    """
    code = compile(f"lambda: (\n{statement.text}\n)", statement.filename, "eval")
    fn: Callable[[], Any] = eval(code, namespace)
    return fn
