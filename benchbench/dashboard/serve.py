"""Serve a built dashboard on a local port, rebuilding it when asked.

``GET /__rebuild`` rebuilds and redirects to the overview; opening the overview
(``/`` or ``/index.html``) rebuilds too, at most once per ``min_interval_s``
(default 5 s: a build of 200 points x 365 runs x 3 environments takes tens of
seconds, so a reload storm must not queue builds). Only 127.0.0.1 by default: the
site shows machine details that a fleet may not want on the network.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError, UsageError


class Rebuilder:
    """Runs ``rebuild`` at most once per ``min_interval_s``; one build at a time."""

    def __init__(
        self,
        rebuild: Callable[[], None] | None,
        min_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rebuild = rebuild
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def maybe_rebuild(self, force: bool = False) -> bool:
        """Rebuild unless one ran less than ``min_interval_s`` ago; True if it ran."""
        if self._rebuild is None:
            return False
        with self._lock:
            now = self._clock()
            if not force and self._last is not None and now - self._last < self._min_interval_s:
                return False
            self._last = now
            try:
                self._rebuild()
                self.error = None
            except BenchbenchError as exc:
                # Keep serving the last good site; the error is shown at /__rebuild.
                self.error = exc
            return True


class _Handler(SimpleHTTPRequestHandler):
    rebuilder: Rebuilder

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path == "/__rebuild":
            self.rebuilder.maybe_rebuild(force=True)
            if self.rebuilder.error is not None:
                body = f"rebuild failed: {self.rebuilder.error}\n".encode()
                self.send_response(500)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(303)
            self.send_header("Location", "/index.html")
            self.end_headers()
            return
        if path in ("/", "/index.html"):
            self.rebuilder.maybe_rebuild()
        super().do_GET()

    def end_headers(self) -> None:
        # Data files change on every rebuild; a cached data/index.js would show stale runs.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: library code never prints; the CLI may log requests itself."""


def make_server(
    directory: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    rebuild: Callable[[], None] | None = None,
    min_interval_s: float = 5.0,
) -> ThreadingHTTPServer:
    """Bind the server (port 0 picks a free one: ``server.server_address[1]``)."""
    directory = Path(directory)
    if rebuild is None and not (directory / "index.html").is_file():
        raise UsageError(
            f"no dashboard in '{directory}': build one first with "
            f"'benchbench dashboard build -o {directory}'"
        )
    handler = type("Handler", (_Handler,), {"rebuilder": Rebuilder(rebuild, min_interval_s)})
    try:
        return ThreadingHTTPServer((host, port), partial(handler, directory=str(directory)))
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise UsageError(
                f"cannot serve the dashboard on {host}:{port}: the port is "
                f"{'in use' if exc.errno == errno.EADDRINUSE else 'not allowed'}; "
                f"choose another with --port (e.g. --port {port + 1 if port else 8001})"
            ) from exc
        raise


def serve(
    directory: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    rebuild: Callable[[], None] | None = None,
) -> None:
    """Serve ``directory`` until interrupted; ``rebuild`` (if given) runs on request.

    Raises :class:`~benchbench.core.errors.UsageError` naming the port when it is taken.
    """
    server = make_server(directory, host, port, rebuild)
    if rebuild is not None and not (Path(directory) / "index.html").is_file():
        server.RequestHandlerClass.rebuilder.maybe_rebuild(force=True)  # type: ignore[attr-defined]
    with server:
        server.serve_forever()
