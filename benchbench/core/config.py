"""Settings from a file, so that nightly scripts stop repeating flags.

``benchbench.toml`` in the working directory (its top-level keys), else
``pyproject.toml``'s ``[tool.benchbench]`` table, may set:

========== ======================= ============================================
key        same as                 value
========== ======================= ============================================
``store``  ``--store`` / ``$BENCHBENCH_STORE``     a store path or URL
``machine`` ``$BENCHBENCH_MACHINE``  the machine label of the environment
``device`` ``--device`` of ``run`` and ``time``    e.g. ``"cpu"`` or ``"cuda,cpu"``
``rounds`` ``--rounds`` / ``$BENCHBENCH_ROUNDS``   a whole number >= 1
========== ======================= ============================================

The command line wins over the environment variable, the variable over the file, the
file over the built-in default: :func:`apply` sets a variable only where it is unset,
and the flags already win over the variables. An unknown key or a bad value is a
:class:`UsageError` naming the file, the key and the fix. :func:`sources` says where each
setting came from, for ``benchbench doctor``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.core.errors import UsageError

#: Setting -> the environment variable it provides a default for.
VARIABLES = {
    "store": "BENCHBENCH_STORE",
    "machine": "BENCHBENCH_MACHINE",
    "device": "BENCHBENCH_DEVICE",
    "rounds": "BENCHBENCH_ROUNDS",
}
#: What each setting holds, as the error for a bad value says it.
EXPECTED = {
    "store": "a string: an SQLite path or a postgresql:// URL",
    "machine": "a string: this machine's name",
    "device": "a string: a comma-separated list of cpu, cuda, cuda:N, mps",
    "rounds": "a whole number of rounds, at least 1",
}
FILES = ("benchbench.toml", "pyproject.toml")


@dataclass(frozen=True)
class Settings:
    """The settings a file holds (as strings, ready for the environment) and its path."""

    path: Path | None
    values: Mapping[str, str]


def _valid(key: str, value: Any) -> bool:
    if key == "rounds":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return isinstance(value, str) and bool(value.strip())


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef, unused-ignore]
        except ImportError:
            raise UsageError(
                f"{path} has benchbench settings, and reading them needs Python >= 3.11 "
                "or the tomli package: pip install tomli"
            ) from None
    try:
        with path.open("rb") as f:
            data: dict[str, Any] = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it as TOML: {exc}") from None
    return data


def find(directory: Path | None = None) -> Settings:
    """The settings of ``benchbench.toml``, else of ``pyproject.toml``'s
    ``[tool.benchbench]``, in ``directory`` (default: the working directory)."""
    folder = directory or Path.cwd()
    for name in FILES:
        path = folder / name
        if not path.is_file():
            continue
        data = _load_toml(path)
        where = f"{path}"
        if name == "pyproject.toml":
            data = data.get("tool", {}).get("benchbench")
            if data is None:
                continue
            where = f"{path} [tool.benchbench]"
        return Settings(path, _checked(data, where))
    return Settings(None, {})


def _checked(data: Any, where: str) -> dict[str, str]:
    if not isinstance(data, dict):
        raise UsageError(f"{where}: benchbench settings must be a table of keys")
    values = {}
    for key, value in data.items():
        if key not in VARIABLES:
            known = ", ".join(VARIABLES)
            raise UsageError(
                f"{where}: unknown key {key!r}; the keys are {known} (remove it or fix "
                "its spelling)"
            )
        if not _valid(key, value):
            raise UsageError(f"{where}: {key} = {value!r} is not {EXPECTED[key]}; fix the value")
        values[key] = str(value)
    return values


def apply(settings: Settings, environ: Any = None) -> None:
    """Give each variable the file's value where it is unset."""
    target = os.environ if environ is None else environ
    for key, value in settings.values.items():
        if not target.get(VARIABLES[key]):
            target[VARIABLES[key]] = value


#: Where a setting came from, for ``doctor``: (setting, value, source).
Source = tuple[str, str, str]


def sources(
    settings: Settings, before: Mapping[str, str], default: Callable[[str], str]
) -> list[Source]:
    """Each setting's value and where it came from: the environment as it was before
    :func:`apply` (``before``), the file, or ``default(key)``. Flags, given per command,
    win over all of these."""
    found = []
    for key, variable in VARIABLES.items():
        if before.get(variable):
            found.append((key, before[variable], f"${variable}"))
        elif key in settings.values:
            name = settings.path.name if settings.path else "?"
            table = " [tool.benchbench]" if name == "pyproject.toml" else ""
            found.append((key, settings.values[key], f"{settings.path}{table}"))
        else:
            found.append((key, default(key), "default"))
    return found
