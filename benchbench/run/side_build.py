"""A side of ``ab`` (or a step of ``bisect``) built from a commit: a git worktree of the
commit and a virtual environment that installs it, cached by key (:mod:`side_cache`).

torch and every other package come from the calling environment, never installed again:
the side's environment has no packages of its own but the repository's, and a ``.pth``
file that adds this environment's site-packages after its own (``site.addsitedir``, so
their ``.pth`` files, benchbench's editable install among them, work there too). An
install command that asks for dependencies runs with ``PIP_CONSTRAINT`` pinning every
package this environment has to its version (the repository's own project left out), so a
loose requirement is met by the packages already here and never pulls a multi-GB CUDA
build of torch.

The default install (:data:`DEFAULT_INSTALL`) is the repository without its dependencies:
``uv pip install --no-deps .`` where ``uv`` is on the PATH (it caches the build
backend: a rebuild takes a fraction of pip's time), else ``pip install --no-deps
--no-build-isolation .`` (the build backend from this environment; again with isolation
when that fails). ``--install CMD`` replaces it: a shell command run in the checkout, with
the side's environment first on the PATH (``pip`` there is the side's).

:func:`prove` shows that a side imports its own commit: each top-level module of the
repository's distribution, imported by the side's Python as its workers will be (same
folder, same environment), must come from the side's checkout or environment. A module
found elsewhere (an editable install of the same package elsewhere, the current folder on
``sys.path``, ``PYTHONPATH``) is an error naming the module, the path it came from and the
fix.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchbench.core.errors import BenchbenchError, UsageError
from benchbench.run import side_cache
from benchbench.run.refs import Commit

#: What ``--install`` does by default (the spelling help and the cache key use).
DEFAULT_INSTALL = "pip install --no-deps ."
INSTALL_TIMEOUT_S = 900.0
#: Seconds a side's Python may take to import the repository's modules in the proof.
PROOF_TIMEOUT_S = 300.0
#: Named last among the side's .pth files, so that its own installs come first.
BRIDGE = "zzz-benchbench-calling-environment.pth"


class BuildError(BenchbenchError):
    """A commit's side could not be built (checkout or install failed); names the log."""


@dataclass(frozen=True)
class BuiltSide:
    """A side ready to measure: its commit, cache key and folder, its Python, whether it
    came from the cache and what building it cost."""

    commit: Commit
    key: str
    entry: side_cache.Entry
    cached: bool
    seconds: float

    @property
    def python(self) -> str:
        return str(self.entry.python)


@dataclass(frozen=True)
class Proof:
    """Where a side's Python found the repository's modules, and its ``sys.path``."""

    modules: Mapping[str, str]
    path: tuple[str, ...] = field(default_factory=tuple)


def _run(command: list[str], log: Path, cwd: Path, env: Mapping[str, str] | None = None) -> int:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        try:
            done = subprocess.run(
                command,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            out.write(f"timed out after {INSTALL_TIMEOUT_S:g} s\n")
            return 124
    return done.returncode


def _failed(commit: Commit, what: str, log: Path) -> BuildError:
    tail = log.read_text(errors="replace").strip().splitlines()[-6:] if log.exists() else []
    return BuildError(
        f"{commit.name} could not be built: {what} failed (log: {log}):\n  " + "\n  ".join(tail)
    )


def build(repo: Path, commit: Commit, install: str | None = None) -> BuiltSide:
    """The side of ``commit``: from the cache when its key is there, else built."""
    started = time.monotonic()
    spelled = install or DEFAULT_INSTALL
    key = side_cache.side_key(commit.tree, spelled)
    root = side_cache.cache_root()
    with side_cache.locked(root, key) as entry:
        if entry.ready is not None and entry.python.exists():
            entry.touch()
            return BuiltSide(commit, key, entry, True, time.monotonic() - started)
        if entry.folder.exists():
            side_cache.remove(entry)  # a build that did not finish
        entry.folder.mkdir(parents=True)
        _checkout(repo, commit, entry)
        _environment(commit, entry)
        _install(commit, entry, install)
        entry.mark_ready(
            {"repo": str(repo), "commit": commit.sha, "tree": commit.tree, "install": spelled}
        )
    side_cache.evict(root, side_cache.size_bound_bytes(), keep=frozenset({key}))
    return BuiltSide(commit, key, entry, False, time.monotonic() - started)


def _checkout(repo: Path, commit: Commit, entry: side_cache.Entry) -> None:
    command = ["git", "-C", str(repo), "worktree", "add", "--detach", "--force"]
    if _run([*command, str(entry.source), commit.sha], entry.log, repo) != 0:
        raise _failed(commit, "git worktree add", entry.log)


def _environment(commit: Commit, entry: side_cache.Entry) -> None:
    """A virtual environment without pip whose site-packages end with this one's."""
    uv = shutil.which("uv")
    if uv is not None:
        command = [uv, "venv", "--quiet", "--python", sys.executable, str(entry.venv)]
    else:
        command = [sys.executable, "-m", "venv", "--without-pip", str(entry.venv)]
    if _run(command, entry.log, entry.folder) != 0:
        raise _failed(commit, "creating the virtual environment", entry.log)
    purelib = _purelib(entry)
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    lines = [f"import site; site.addsitedir({p!r})" for p in ours]
    (purelib / BRIDGE).write_text("\n".join(lines) + "\n")
    shim = entry.venv / "bin" / "pip"
    shim.write_text(f'#!/bin/sh\nexec "{entry.python}" -m pip "$@"\n')
    shim.chmod(0o755)


def _purelib(entry: side_cache.Entry) -> Path:
    found = subprocess.run(
        [str(entry.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(found.stdout.strip())


def _constraints(entry: side_cache.Entry) -> Path:
    """Every package of this environment pinned to its version, but the repository's own."""
    own = _project_name(entry.source)
    pins = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and _normal(name) != own:
            pins.add(f"{name}=={dist.version}")
    path = entry.folder / "constraints.txt"
    path.write_text("\n".join(sorted(pins)) + "\n")
    return path


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project_name(source: Path) -> str | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10: no project name, every package pinned
        return None
    try:
        project = tomllib.loads((source / "pyproject.toml").read_text()).get("project") or {}
    except (OSError, ValueError):
        return None
    name = project.get("name")
    return _normal(name) if isinstance(name, str) else None


def _install(commit: Commit, entry: side_cache.Entry, install: str | None) -> None:
    constraints = _constraints(entry)
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(entry.venv),
        "PATH": f"{entry.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PIP_CONSTRAINT": str(constraints),
        "UV_CONSTRAINT": str(constraints),
        "PYTHONSAFEPATH": "1",
    }
    env.pop("PYTHONPATH", None)
    python = str(entry.python)
    if install is not None:
        commands = [["/bin/sh", "-c", install]]
    elif (uv := shutil.which("uv")) is not None:
        commands = [[uv, "pip", "install", "--quiet", "--python", python, "--no-deps", "."]]
    else:
        pip = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-input"]
        commands = [[*pip, "--no-build-isolation", "."], [*pip, "."]]
    for command in commands:
        if _run(command, entry.log, entry.source, env) == 0:
            return
    raise _failed(commit, f"the install ({install or DEFAULT_INSTALL})", entry.log)


#: Run by a side's Python: its sys.path and where it finds the top-level modules of the
#: distributions its own site-packages hold (``sys.argv[1]``); found, not imported (a
#: package that imports torch would take seconds).
_PROOF = """
import importlib.metadata as md, importlib.util, json, sys
own = sys.argv[1]
names = set()
for dist in md.distributions(path=[own]):
    top = dist.read_text("top_level.txt")
    if top:
        names.update(top.split())
        continue
    for f in dist.files or []:
        first = f.parts[0]
        if first.endswith((".dist-info", ".pth", ".egg-info", ".data")):
            continue
        if first in ("..", "__pycache__") or first.startswith("__editable__"):
            continue
        names.add(first[:-3] if first.endswith(".py") else first)
modules = {}
for name in sorted(n for n in names if n.isidentifier()):
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:
        modules[name] = "!" + type(exc).__name__ + ": " + str(exc)
        continue
    if spec is None:
        modules[name] = "!not found"
        continue
    where = spec.origin if spec.has_location else None
    modules[name] = where or next(iter(spec.submodule_search_locations or []), "")
print(json.dumps({"path": sys.path, "modules": modules}))
"""


def worker_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a side's workers start with: ``environ`` (default this process's),
    but never the current folder on ``sys.path``, so that a checkout in the current folder
    cannot stand in for the side's: ``PYTHONSAFEPATH`` (Python 3.11+) and no empty or
    ``.`` entry in ``PYTHONPATH`` (an empty entry is the current folder)."""
    env = {**(os.environ if environ is None else environ), "PYTHONSAFEPATH": "1"}
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e not in ("", ".")]
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(entries)
    else:
        env.pop("PYTHONPATH", None)
    return env


def prove(side: BuiltSide, flag: str, env: Mapping[str, str] | None = None) -> Proof:
    """Where ``side``'s Python imports the repository's modules from (run as its workers
    run: this folder, ``env``); UsageError naming ``flag`` when one comes from elsewhere."""
    own = str(_purelib(side.entry))
    done = subprocess.run(
        [side.python, "-c", _PROOF, own],
        capture_output=True,
        text=True,
        timeout=PROOF_TIMEOUT_S,
        env=dict(env if env is not None else worker_environment()),
        check=False,
    )
    if done.returncode != 0:
        raise BuildError(f"{flag} {side.commit.name}: its Python failed: {done.stderr[-300:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    modules: dict[str, str] = found["modules"]
    if not modules:
        raise BuildError(
            f"{flag} {side.commit.name}: the install put no package in {own}; check --install "
            f"(log: {side.entry.log})"
        )
    homes = (os.path.realpath(side.entry.folder) + os.sep,)
    for name, where in modules.items():
        if where.startswith("!"):
            raise BuildError(f"{flag} {side.commit.name}: import {name} failed: {where[1:]}")
        if not os.path.realpath(where).startswith(homes):
            raise UsageError(
                f"{flag} {side.commit.name} imports {name} from {where}, not from its own "
                f"checkout ({side.entry.folder}): something earlier on sys.path shadows it "
                "(PYTHONPATH, or the current folder on Python < 3.11); unset PYTHONPATH or "
                "run from another folder"
            )
    return Proof(modules, tuple(found["path"]))


def importable_here(proof: Proof) -> list[str]:
    """Prepend to this process's ``sys.path`` the entries a side's Python has and this one
    lacks (its site-packages and what their .pth files add), so that planning here loads
    the suites with the side's code; the entries added."""
    added = [p for p in proof.path if p and p not in sys.path]
    sys.path[:0] = added
    return added
