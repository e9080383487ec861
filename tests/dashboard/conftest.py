"""A demo store seeded once per module: calls + feedback POSTed to the real collector app
(FastAPI TestClient, prices from case 00), then engine samples, alerts, a rollout, GPU cost,
one round of the real judges worker against an in-process OpenAI-compatible judge server
(tests/judges/fake_judge_api.py over real HTTP: only the remote judge is faked), audit labels,
and a drift run."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from driftline.app import create_app
from driftline.demo.seed_demo import DemoSeed, demo_judge_settings, seed_demo
from driftline.demo.seed_text import answer_grades
from tests.conftest import make_settings, pg_admin_url
from tests.judges.fake_judge_api import FakeJudgeServer, Reply, completion
from tests.support import ServerThread

N_CALLS = 400
JUDGE_MODEL = "judge-model"
#: how the fake judge scores an answer of each reviewer grade: lenient on polite deflections
JUDGE_OF_GRADE = {5: 5, 4: 4, 3: 3, 2: 3, 1: 1}
_TAG = r"<{0}>\n(.*?)\n</{0}>"


def _between(text: str, tag: str) -> str:
    found = re.findall(_TAG.format(tag), text, flags=re.S)
    return found[-1] if found else ""


def judge_reply(body: dict[str, Any]) -> Reply:
    """The remote judge: scores by the answer's reviewer grade (``JUDGE_OF_GRADE``); pairwise
    requests prefer the answer of the higher grade (tie when equal)."""
    grades = answer_grades()
    user = body["messages"][-1]["content"]
    verdict: dict[str, Any]
    if "<answer_a>" in user:
        a = grades.get(_between(user, "answer_a"), 3)
        b = grades.get(_between(user, "answer_b"), 3)
        winner = "A" if a > b else ("B" if b > a else "tie")
        verdict = {"reasoning": f"grades {a} vs {b}", "winner": winner}
    else:
        grade = grades.get(_between(user, "answer"), 3)
        verdict = {"reasoning": f"reviewer grade {grade}", "score": JUDGE_OF_GRADE[grade]}
    return Reply(body=completion(json.dumps(verdict), prompt_tokens=420, completion_tokens=40))


@pytest.fixture(scope="session")
def judge_server() -> Iterator[FakeJudgeServer]:
    """The fake judge API served by uvicorn on 127.0.0.1 in a thread."""
    fake = FakeJudgeServer()
    fake.handler = judge_reply
    with ServerThread(fake.app) as url:
        fake.base_url = f"{url}/v1"
        yield fake


def seed_store(url: str, judge: FakeJudgeServer) -> DemoSeed:
    """Seed ``url`` through the collector app (scheduler off so only the seed writes)."""
    settings = make_settings(url, grpc_enabled=False, scheduler_enabled=False)
    with TestClient(create_app(settings)) as client:
        # a TestClient is an httpx.Client subclass at runtime
        return seed_demo(
            client,  # type: ignore[arg-type]
            url,
            np.random.default_rng(7),
            n_calls=N_CALLS,
            hours=6.0,
            judge=demo_judge_settings(judge.base_url, JUDGE_MODEL, "test-key"),
        )


@pytest.fixture(scope="module")
def seeded_sqlite(
    tmp_path_factory: pytest.TempPathFactory, judge_server: FakeJudgeServer
) -> tuple[str, DemoSeed]:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash')}/driftline.db"
    return url, seed_store(url, judge_server)


@pytest.fixture(scope="module")
def seeded_pg(judge_server: FakeJudgeServer) -> Iterator[tuple[str, DemoSeed]]:
    name = f"driftline_dash_{uuid.uuid4().hex[:10]}"
    admin = pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{base}/{name}"
    try:
        yield url, seed_store(url, judge_server)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
