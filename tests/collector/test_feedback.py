"""Feedback: cases 21 (before its trace) and 22 (idempotency, latest vote wins), on SQLite and
PostgreSQL, replayed step by step through the real HTTP routes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import CASES


def replay(client: TestClient, case: str) -> list[Any]:
    steps = json.loads((CASES / case).read_text())["steps"]
    out = []
    for step in steps:
        path = step["path"]
        if path == "<feedback endpoint>":
            path = "/api/v1/feedback"
        out.append(client.post(path, json=step["json"]))
    return out


def test_21_feedback_before_trace(client: TestClient) -> None:
    r0, r2, r5, r10, r11 = replay(client, "21_feedback_before_trace.json")
    assert r0.status_code == 202 and r0.json()["status"] == "pending"
    assert r2.status_code == 202 and r2.json()["status"] == "pending"
    assert r5.status_code == 200
    assert r10.status_code == 202 and r10.json()["status"] == "pending"
    assert r11.status_code == 400
    assert "trace_id" in r11.json()["error"]["message"]

    trace = "b2c3d4e5f60718293a4b5c6d7e8f90a2"
    items = {i["feedback_id"]: i for i in client.get("/api/v1/feedback").json()["items"]}
    assert set(items) == {"fb-0001", "fb-0002", "fb-0003"}  # fb-0004 stored nothing
    assert items["fb-0001"]["status"] == "linked" and items["fb-0001"]["trace_id"] == trace
    assert items["fb-0002"]["status"] == "linked"
    assert (items["fb-0002"]["trace_id"], items["fb-0002"]["span_id"]) == (
        trace,
        "0000000000002202",
    )
    assert items["fb-0003"]["status"] == "pending"  # kept, queryable as unlinked
    pending = client.get("/api/v1/feedback", params={"status": "pending"}).json()["items"]
    assert [p["feedback_id"] for p in pending] == ["fb-0003"]

    s = client.get("/api/v1/feedback/summary", params={"trace_id": trace}).json()
    assert (s["thumbs_up"], s["thumbs_down"]) == (1, 1)
    models = client.get("/api/v1/feedback/summary").json()["models"]
    assert models == {"gpt-4o-mini": {"thumbs_up": 1, "thumbs_down": 1, "effective_votes": 2}}


def test_22_duplicate_feedback(client: TestClient) -> None:
    responses = replay(client, "22_duplicate_feedback.json")
    assert all(r.status_code in (200, 202) for r in responses)
    assert responses[2].json()["duplicate"] is True
    assert responses[5].json()["feedback_id"].startswith("fb-")  # server-assigned id
    s = client.get(
        "/api/v1/feedback/summary", params={"trace_id": "c3d4e5f60718293a4b5c6d7e8f90a1b3"}
    ).json()
    assert (s["thumbs_up"], s["thumbs_down"], s["effective_votes"]) == (2, 1, 3)
    history = client.get("/api/v1/feedback").json()["items"]
    assert len(history) == 4  # fb-1001 once, fb-1002, fb-1003, the server-assigned one


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"kind": "thumbs_up"}, "trace_id or response_id"),
        ({"trace_id": "ab" * 16, "kind": "love"}, "kind"),
        ({"trace_id": "ab" * 16, "kind": "rating"}, "rating"),
        ({"trace_id": "ab" * 16, "kind": "rating", "value": "five"}, "value"),
        ({"trace_id": "ab" * 16, "span_id": "xyz", "kind": "thumbs_up"}, "span_id"),
        ({"trace_id": "ab" * 16, "kind": "thumbs_up", "timestamp": "noon"}, "timestamp"),
        ({"trace_id": "00" * 16, "kind": "thumbs_up"}, "trace_id"),
    ],
)
def test_malformed_feedback_is_400(client: TestClient, body: dict[str, Any], needle: str) -> None:
    r = client.post("/api/v1/feedback", json=body)
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]


def test_batch_rejects_items_individually(client: TestClient) -> None:
    r = client.post(
        "/api/v1/feedback/batch",
        json={
            "items": [
                {"trace_id": "ab" * 16, "kind": "rating", "value": 4, "user_id": "u"},
                {"trace_id": "bad", "kind": "thumbs_up"},
                {
                    "response_id": "resp-1",
                    "kind": "escalation",
                    "metadata": {"source": "simulated"},
                },
            ]
        },
    )
    assert r.status_code == 202
    body = r.json()
    assert len(body["items"]) == 2
    assert body["rejected"][0]["index"] == 1
    rows = client.get("/api/v1/feedback").json()["items"]
    assert {x["source"] for x in rows} == {None, "simulated"}
    assert client.post("/api/v1/feedback/batch", json={"nope": 1}).status_code == 400


def test_calls_filter_by_user_and_feedback_and_detail_lists_feedback(client: TestClient) -> None:
    replay(client, "21_feedback_before_trace.json")
    with_fb = client.get("/api/v1/calls", params={"has_feedback": True}).json()["items"]
    without = client.get("/api/v1/calls", params={"has_feedback": False}).json()["items"]
    assert {c["span_id"][-4:] for c in with_fb} == {"2202", "2203"}  # fb-0001 is trace-level
    assert without == []
    detail = client.get("/api/v1/calls/resp-AbC123").json()
    assert {f["feedback_id"] for f in detail["feedback"]} == {"fb-0001", "fb-0002"}
    assert client.get("/api/v1/calls", params={"user": "nobody"}).json()["items"] == []
