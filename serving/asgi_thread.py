"""Run an ASGI app with uvicorn on a background thread (tests, benchmarks, in-process demos)."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from serving.errors import ServingError


class ServerThread:
    """``with ServerThread(app) as url:`` serves ``app`` on 127.0.0.1 at a free port.

    The lifespan runs (startup/shutdown), so apps with clients opened at start-up work.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        """``port`` 0 picks a free port."""
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        cfg = uvicorn.Config(
            app, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(cfg)
        self._thread = threading.Thread(target=self._run, name=f"asgi-{self.port}", daemon=True)

    def _run(self) -> None:
        self._server.run(sockets=[self._sock])

    def start(self, timeout_s: float = 10.0) -> str:
        """Start serving; return the base URL.

        Raises:
            ServingError: the server did not start within ``timeout_s`` seconds.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise ServingError(f"server on {self.url} did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
