"""Fixtures: the fake judge API (fake_judge_api.py) served by uvicorn on 127.0.0.1 in a thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_judge_api import FakeJudgeServer, Reply, error_body

from tests.support import ServerThread


@pytest.fixture(scope="session")
def _judge_server_process() -> Iterator[FakeJudgeServer]:
    fake = FakeJudgeServer()
    with ServerThread(fake.app) as url:
        fake.base_url = f"{url}/v1"
        yield fake


@pytest.fixture
def judge_server(_judge_server_process: FakeJudgeServer) -> FakeJudgeServer:
    """The running fake judge API with a fresh request log; set ``.handler`` in the test."""
    _judge_server_process.requests.clear()
    _judge_server_process.handler = lambda body: Reply(
        500, error_body("the test installed no handler")
    )
    return _judge_server_process
