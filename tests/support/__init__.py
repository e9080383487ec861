"""Helpers shared by the tests: free ports, ASGI apps in a thread, polling (here), agent-style
traces (:mod:`tests.support.agent_traces`).

One implementation each: :func:`free_port` is the demo's (``driftline.demo.processes``),
:class:`ServerThread` the serving tier's (``serving.asgi_thread``).
"""

from __future__ import annotations

import time
from typing import Any

from driftline.demo.processes import free_port
from serving.asgi_thread import ServerThread

__all__ = ["ServerThread", "free_port", "wait_for"]


def wait_for(predicate: Any, timeout_s: float = 20.0, interval_s: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns a truthy value; raise AssertionError on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)
