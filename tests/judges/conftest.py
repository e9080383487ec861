"""Fixtures: the fake judge API (fake_judge_api.py) served by uvicorn on 127.0.0.1 in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from fake_judge_api import FakeJudgeServer, Reply, error_body


@pytest.fixture(scope="session")
def _judge_server_process() -> Iterator[FakeJudgeServer]:
    fake = FakeJudgeServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(fake.app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("fake judge server did not start")
        time.sleep(0.02)
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    yield fake
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def judge_server(_judge_server_process: FakeJudgeServer) -> FakeJudgeServer:
    """The running fake judge API with a fresh request log; set ``.handler`` in the test."""
    _judge_server_process.requests.clear()
    _judge_server_process.handler = lambda body: Reply(
        500, error_body("the test installed no handler")
    )
    return _judge_server_process
