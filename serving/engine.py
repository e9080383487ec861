"""Start, wait for and stop a vLLM engine process described by a :class:`LaunchSpec`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import httpx

from serving.errors import EngineUnavailableError
from serving.launch import LaunchSpec


class EngineProcess:
    """A running engine in its own process group (so its worker processes stop with it)."""

    def __init__(self, spec: LaunchSpec, *, log_path: Path | None = None) -> None:
        """Prepare; nothing runs until :meth:`start`. ``log_path`` None inherits stdout."""
        self.spec = spec
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        """Spawn the process with ``spec.env`` on top of the current environment."""
        env = dict(os.environ)
        env.update(self.spec.env)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            list(self.spec.argv),
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout_s: float, *, poll_s: float = 1.0) -> None:
        """Block until ``GET {url}/health`` answers 200.

        Raises:
            EngineUnavailableError: the process exited, or ``timeout_s`` seconds passed; the
                message includes the tail of the log when there is one.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise EngineUnavailableError(f"engine exited (status {code}){self._tail()}")
            try:
                if httpx.get(f"{self.spec.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(poll_s)
        raise EngineUnavailableError(f"engine not ready after {timeout_s:.0f} s{self._tail()}")

    def _tail(self, n: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        lines = self.log_path.read_text(errors="replace").splitlines()[-n:]
        return "\n--- engine log tail ---\n" + "\n".join(lines)

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL after ``grace_s`` seconds. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None
