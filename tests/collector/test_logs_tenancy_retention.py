"""Log records and scores under keys and retention: a gateway key may not send them (they carry
no tenant of their own), and retention deletes log content and external scores with the calls."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from collector.auth import create_key
from collector.store import engine as store_engine
from collector.store.models.logs import GenAILogEvent
from collector.store.models.scores import ExternalScore
from collector.store.retention import apply_retention
from driftline.app import create_app
from tests.collector.test_otlp_http import PB
from tests.collector.test_otlp_logs import logs_request, record
from tests.conftest import make_settings


@pytest.fixture
def keyed(sqlite_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    store_engine.upgrade(sqlite_url)
    eng = store_engine.make_engine(sqlite_url)
    keys = {
        "gateway": create_key(eng, "platform", "gateway", "gw", tenants=["acme"]),
        "ingest": create_key(eng, "acme", "ingest"),
    }
    eng.dispose()
    with TestClient(create_app(make_settings(sqlite_url, dev=False, grpc_enabled=False))) as c:
        yield c, keys


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_gateway_key_may_not_send_logs_scores_or_feedback(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    c, keys = keyed
    body = logs_request(record("gen_ai.user.message", body={"content": "hi"}))
    gw = c.post("/v1/logs", content=body, headers={**PB, **_auth(keys["gateway"])})
    assert gw.status_code == 403 and "gateway key sends spans only" in gw.text
    score = {"name": "helpfulness", "value": 0.5, "trace_id": "ab" * 16}
    assert c.post("/api/v1/scores", json=score, headers=_auth(keys["gateway"])).status_code == 403
    vote = {"trace_id": "ab" * 16, "kind": "thumbs_down"}
    assert c.post("/api/v1/feedback", json=vote, headers=_auth(keys["gateway"])).status_code == 403
    ok = c.post("/v1/logs", content=body, headers={**PB, **_auth(keys["ingest"])})
    assert ok.status_code == 200


def test_retention_deletes_log_content_and_external_scores(
    keyed: tuple[TestClient, dict[str, str]], sqlite_url: str
) -> None:
    c, keys = keyed
    body = logs_request(
        record("gen_ai.user.message", body={"content": "my e-mail is a@b.example"}),
        record(
            "gen_ai.evaluation.result",
            attrs={"gen_ai.evaluation.name": "Relevance", "gen_ai.evaluation.score.value": 0.5},
        ),
    )
    assert c.post("/v1/logs", content=body, headers={**PB, **_auth(keys["ingest"])}).is_success
    eng = store_engine.make_engine(sqlite_url)
    with eng.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(GenAILogEvent)) == 1
        assert conn.scalar(select(func.count()).select_from(ExternalScore)) == 1
    later = time.time_ns() + 400 * 86_400 * 10**9  # past the default retention
    counts = apply_retention(eng, now_ns=later)["acme"]
    assert counts["gen_ai_log_events"] == 1 and counts["external_scores"] == 1
    with eng.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(GenAILogEvent)) == 0
        assert conn.scalar(select(func.count()).select_from(ExternalScore)) == 0
    eng.dispose()
