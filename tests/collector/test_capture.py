"""Content capture policy: none | redacted | full, applied before anything is stored."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from collector.auth import ensure_tenant
from collector.ingest.capture import apply_policy
from collector.store import engine as store_engine
from collector.store.models import Tenant
from collector.store.schema import SpanData
from driftline.app import create_app
from tests.conftest import make_settings

PROMPT = "Email me at jane.roe@example.com, card 4111 1111 1111 1111."
BODY = {
    "resourceSpans": [
        {
            "scopeSpans": [
                {
                    "spans": [
                        {
                            "traceId": "ab" * 16,
                            "spanId": "cd" * 8,
                            "name": "chat gpt-4o",
                            "attributes": [
                                {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                                {
                                    "key": "gen_ai.input.messages",
                                    "value": {
                                        "stringValue": json.dumps(
                                            [
                                                {
                                                    "role": "user",
                                                    "parts": [{"type": "text", "content": PROMPT}],
                                                }
                                            ]
                                        )
                                    },
                                },
                                {
                                    "key": "gen_ai.output.messages",
                                    "value": {
                                        "stringValue": json.dumps(
                                            [
                                                {
                                                    "role": "assistant",
                                                    "parts": [{"type": "text", "content": "Done."}],
                                                }
                                            ]
                                        )
                                    },
                                },
                            ],
                        }
                    ]
                }
            ]
        }
    ]
}


def stored(c: TestClient) -> tuple[dict, dict]:  # type: ignore[type-arg]
    assert c.post("/v1/traces", json=BODY).status_code == 200
    (call,) = c.get("/api/v1/calls").json()["items"]
    detail = c.get(f"/api/v1/calls/{call['call_id']}").json()
    return call, detail["spans"][0]["attributes"]


@pytest.mark.parametrize("mode", ["redacted", "none", "full"])
def test_tenant_capture_policy(db_url: str, mode: str) -> None:
    store_engine.upgrade(db_url)
    eng = store_engine.make_engine(db_url)
    ensure_tenant(eng, "default")
    with eng.begin() as conn:
        conn.execute(update(Tenant).where(Tenant.name == "default").values(capture_content=mode))
    eng.dispose()
    with TestClient(create_app(make_settings(db_url, grpc_enabled=False))) as c:
        call, attrs = stored(c)
    if mode == "redacted":
        assert call["input_text"] == "Email me at [EMAIL], card [CARD]."
        assert "jane.roe" not in attrs["gen_ai.input.messages"]
        assert call["redactions"] == 2 and call["output_text"] == "Done."
    elif mode == "none":
        assert call["input_text"] is None and call["output_text"] is None
        assert "gen_ai.input.messages" not in attrs and call["redactions"] is None
        assert call["model"] == "gpt-4o"  # everything else is kept
    else:
        assert call["input_text"] == PROMPT and call["redactions"] is None


def test_content_events_are_redacted_and_other_attributes_kept() -> None:
    span = SpanData(
        "ab" * 16,
        "cd" * 8,
        None,
        "chat m",
        3,
        1,
        2,
        0,
        None,
        {"gen_ai.prompt.0.content": "call +1 415 555 2671", "user.id": "u@example.com"},
        [
            {
                "name": "gen_ai.content.completion",
                "time_unix_nano": 1,
                "attributes": {"gen_ai.completion": "mail a@b.co"},
            }
        ],
        [],
        {},
        None,
        None,
    )
    out, n = apply_policy(span, "redacted")
    assert out.attributes["gen_ai.prompt.0.content"] == "call [PHONE]"
    assert out.events[0]["attributes"]["gen_ai.completion"] == "mail [EMAIL]"
    assert out.attributes["user.id"] == "u@example.com"  # identifiers are not content
    assert n == 2
    assert apply_policy(span, "full") == (span, None)
