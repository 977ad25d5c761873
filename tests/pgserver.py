"""A throwaway PostgreSQL server for tests, started from the local binaries.

Plain Python with no pytest dependency, so that scripts and benchmarks can use it as well as
``tests/conftest.py``::

    with PgServer(find_binaries()) as server:
        engine = sqlalchemy.create_engine(server.url())

The cluster lives in a fresh temporary directory (data, log and unix socket), listens on
127.0.0.1 on a free port with ``trust`` authentication, and runs with durability switched off
(``fsync=off``, ``synchronous_commit=off``, ``full_page_writes=off``): the data is thrown away,
and those settings make ``initdb`` + start take about 1-2 s instead of 5-10 s on our 2-core
machines (``crash_safe=True`` keeps ``synchronous_commit`` on, for the tests that crash the
server with :meth:`PgServer.halt` and count what it acknowledged). PostgreSQL refuses to
run as root, so when we are root the binaries run as an unprivileged account (``postgres``
if it exists, else ``nobody``) that owns the directory.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import sqlalchemy

REQUIRED_BINARIES = ("initdb", "pg_ctl")
DRIVER = "postgresql+psycopg"
SUPERUSER = "postgres"
# Accounts tried, in order, to run the server when we are root.
UNPRIVILEGED_ACCOUNTS = ("postgres", "nobody")
# Three tries: the free port we pick can be taken by someone else before postgres binds it.
_PORT_TRIES = 3
_START_TIMEOUT_S = 60


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be started here; ``must_fail`` says whether that is a test failure.

    In CI (``CI=true``) a missing PostgreSQL is a broken environment, not a reason to skip.
    """

    def __init__(self, reason: str, *, must_fail: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.must_fail = must_fail


@dataclass(frozen=True)
class PgBinaries:
    """Absolute paths of the PostgreSQL programs the server needs."""

    initdb: str
    pg_ctl: str


def missing_is_failure(env: Mapping[str, str]) -> bool:
    """True when a missing PostgreSQL must fail the tests instead of skipping them (CI)."""
    return env.get("CI", "").strip().lower() == "true"


def find_binaries(env: Mapping[str, str] | None = None) -> PgBinaries:
    """Locate ``initdb`` and ``pg_ctl`` on ``env['PATH']`` (default: this process's environment).

    Raises :class:`PostgresUnavailable` naming the missing programs and the PATH searched.
    """
    environ = os.environ if env is None else env
    search_path = environ.get("PATH", os.defpath)
    found = {name: shutil.which(name, path=search_path) for name in REQUIRED_BINARIES}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        reason = (
            f"PostgreSQL binaries not found on PATH: {', '.join(missing)} "
            f"(PATH={search_path!r}); install PostgreSQL (e.g. `apt-get install postgresql`) "
            "and put its bin directory on PATH (e.g. /usr/lib/postgresql/15/bin)"
        )
        raise PostgresUnavailable(reason, must_fail=missing_is_failure(environ))
    return PgBinaries(initdb=str(found["initdb"]), pg_ctl=str(found["pg_ctl"]))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unprivileged_account() -> pwd.struct_passwd:
    for name in UNPRIVILEGED_ACCOUNTS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable(
        "running as root and none of the accounts "
        f"{', '.join(UNPRIVILEGED_ACCOUNTS)} exists to run PostgreSQL; "
        "create one with `useradd --system postgres`",
        must_fail=missing_is_failure(os.environ),
    )


def _valid_database_name(name: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"database name must match [a-z_][a-z0-9_]{{0,62}}, got {name!r}")
    return name


class PgServer:
    """One temporary PostgreSQL cluster: :meth:`start`, use :meth:`url`, :meth:`stop`.

    Also a context manager. :meth:`stop` is idempotent and also registered with ``atexit``,
    so the server and its directory go away even when the test session fails.
    """

    def __init__(
        self, binaries: PgBinaries, keep: Path | None = None, *, crash_safe: bool = False
    ) -> None:
        self.binaries = binaries
        # A commit acknowledged only once its WAL is written (synchronous_commit=on), so
        # that a server stopped with ``-m immediate`` (:meth:`halt`) keeps what it
        # acknowledged, as a production server does.
        self.crash_safe = crash_safe
        self.port: int | None = None
        self.root: Path | None = None
        # A cluster kept in ``keep`` across uses (a benchmark's large store): created there
        # once, started again on later uses, stopped cleanly and never deleted.
        self.keep = keep
        self._account: pwd.struct_passwd | None = (
            _unprivileged_account() if os.geteuid() == 0 else None
        )

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory (inside the temporary root)."""
        if self.root is None:
            raise RuntimeError("PgServer.data_dir: the server is not started; call start()")
        return self.root / "data"

    def url(self, database: str = "postgres", driver: str = DRIVER) -> str:
        """SQLAlchemy URL of ``database`` on this server, over TCP on 127.0.0.1."""
        if self.port is None:
            raise RuntimeError("PgServer.url: the server is not started; call start()")
        return f"{driver}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Create the cluster in a new temporary directory (or in ``keep``, unless it holds
        one already) and start it; wait until it accepts connections. Raises
        :class:`RuntimeError` with the server log when it cannot start."""
        if self.root is not None:
            return
        if self.keep is not None:
            self.keep.mkdir(parents=True, exist_ok=True)
            self.root = self.keep.resolve()
        else:
            self.root = Path(tempfile.mkdtemp(prefix="bbpg-"))
        atexit.register(self.stop)
        try:
            if self._account is not None:
                os.chown(self.root, self._account.pw_uid, self._account.pw_gid)
            if not (self.data_dir / "PG_VERSION").exists():
                self._run(
                    self.binaries.initdb,
                    "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust",
                    "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
                )  # fmt: skip
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise

    def _start_on_free_port(self) -> None:
        log = self.root / "server.log" if self.root else Path("server.log")
        for _ in range(_PORT_TRIES):
            self.port = free_port()
            self._write_settings(self.port)
            result = self._run(
                self.binaries.pg_ctl,
                "-D", str(self.data_dir), "-l", str(log), "-w", "-t", str(_START_TIMEOUT_S),
                "start",
                check=False,
            )  # fmt: skip
            if result.returncode == 0:
                return
            server_log = log.read_text(errors="replace") if log.exists() else ""
            if "already in use" not in server_log:
                break
        raise RuntimeError(
            f"PostgreSQL did not start (pg_ctl exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}\nserver log {log}:\n{server_log}"
        )

    def _write_settings(self, port: int) -> None:
        # postgresql.auto.conf is read last, so these win over postgresql.conf; rewriting it
        # (not appending) keeps one port setting across retries.
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(port),
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "off",
            "synchronous_commit": "on" if self.crash_safe else "off",
            "full_page_writes": "off",
            "max_connections": "50",
            "shared_buffers": "32MB",
            "max_wal_size": "256MB",
            "dynamic_shared_memory_type": "posix",
        }
        text = "".join(f"{key} = {value}\n" for key, value in settings.items())
        (self.data_dir / "postgresql.auto.conf").write_text(text)

    def stop(self) -> None:
        """Stop the server (immediate shutdown: the data is disposable) and delete its
        directory. Safe to call twice or on a server that never started."""
        root, self.root = self.root, None
        if root is None:
            return
        data_dir = root / "data"
        if (data_dir / "postmaster.pid").exists():
            mode = "fast" if self.keep is not None else "immediate"
            result = self._run(
                self.binaries.pg_ctl, "-D", str(data_dir), "-m", mode, "-w", "stop",
                cwd=root, check=False,
            )  # fmt: skip
            if result.returncode != 0:
                self._kill_postmaster(data_dir)
        if self.keep is None:
            shutil.rmtree(root, ignore_errors=True)
        self.port = None
        atexit.unregister(self.stop)

    def halt(self) -> None:
        """Stop the running server as a crash would (``pg_ctl stop -m immediate``), keeping
        its cluster for :meth:`restart`: a store's server going away under a client."""
        self._run(self.binaries.pg_ctl, "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")

    def restart(self) -> None:
        """Start a server :meth:`halt` stopped again, on the same port and cluster."""
        log = self.data_dir.parent / "server.log"
        self._run(
            self.binaries.pg_ctl,
            "-D", str(self.data_dir), "-l", str(log), "-w", "-t", str(_START_TIMEOUT_S),
            "start",
        )  # fmt: skip

    @staticmethod
    def _kill_postmaster(data_dir: Path) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
            os.kill(pid, signal.SIGKILL)

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a fresh unique name by default); return its URL."""
        name = _valid_database_name(name or f"test_{uuid.uuid4().hex[:16]}")
        self._execute_autocommit(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, closing any connection a test left open (PostgreSQL >= 13)."""
        name = _valid_database_name(name)
        self._execute_autocommit(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _execute_autocommit(self, statement: str) -> None:
        # CREATE/DROP DATABASE cannot run inside a transaction block.
        engine = sqlalchemy.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(sqlalchemy.text(statement))
        finally:
            engine.dispose()

    def _run(
        self, *argv: str, cwd: Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cwd = cwd or self.root
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        account = self._account
        if account is not None:
            env.update(HOME=str(cwd), USER=account.pw_name, LOGNAME=account.pw_name)
        result = subprocess.run(
            argv,
            cwd=cwd,  # the server's cwd must be readable by its account
            env=env,
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT_S + 30,
            user=None if account is None else account.pw_uid,
            group=None if account is None else account.pw_gid,
            extra_groups=None if account is None else [],
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed with exit {result.returncode}:\n"
                f"{result.stdout}{result.stderr}"
            )
        return result

    def __enter__(self) -> PgServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
