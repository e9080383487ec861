"""Child processes of the demo: started in their own process group, all stopped on exit."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import click
import httpx


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(host: str, port: int) -> bool:
    """True when nothing listens on ``host:port``."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class Processes:
    """Starts children with output to a log file; :meth:`stop` ends their whole groups."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        fh = (self.log_dir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append((name, proc))
        return proc

    def check(self) -> None:
        """Raise ClickException when a long-running child has died."""
        for name, proc in self.procs:
            if proc.poll() is not None and not name.startswith("load"):
                raise click.ClickException(
                    f"{name} exited with code {proc.returncode}; see {self.log_dir}/{name}.log"
                )

    def stop(self, name: str | None = None) -> None:
        """Stop one child (by name) or all, one after the other, newest first: the producers
        (load generators, gateway) end and flush their spans before the collector, started
        first, stops. Each: SIGTERM to its group, SIGKILL after 20 s."""
        for _, proc in [(n, p) for n, p in reversed(self.procs) if name is None or n == name]:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def wait_http(url: str, procs: Processes, timeout_s: float, what: str) -> None:
    """Poll ``url`` until it answers 200 (or raise, naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        procs.check()
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise click.ClickException(f"{what} did not answer {url} within {timeout_s:.0f} s")
