"""POST/GET /api/v1/scores on SQLite and PostgreSQL: score configs enforced, idempotent on
score_id, linked to the call (by trace+span or response id) and its session."""

from __future__ import annotations

from fastapi.testclient import TestClient

from judges.rubrics import builtin_rubric
from tests.support.agent_traces import agent_run, record, send

T0 = 1_780_000_000_000_000_000


def test_scores_validated_linked_idempotent(client: TestClient) -> None:
    send(client, record(lambda p: agent_run(p, session="conv-1", t0=T0)), expect_calls=2)
    call = client.get("/api/v1/calls").json()["items"][0]
    one = {
        "score_id": "s-1",
        "trace_id": call["trace_id"],
        "span_id": call["span_id"],
        "name": "helpfulness",  # a shipped likert rubric: numeric 1..5
        "value": 4,
        "evaluator": "ragas",
    }
    r = client.post("/api/v1/scores", json=one)
    assert r.status_code == 201, r.text
    assert r.json()["items"][0]["duplicate"] is False
    assert client.post("/api/v1/scores", json=one).json()["items"][0]["duplicate"] is True
    batch = {
        "items": [
            {
                "trace_id": call["trace_id"],
                "name": "groundedness",
                "data_type": "boolean",
                "label": "pass",
            },
            {"trace_id": call["trace_id"], "name": "helpfulness", "value": 9},
            {"trace_id": call["trace_id"], "name": "tone", "value": 1},
            {"name": "helpfulness", "value": 3},
            {"session_id": "conv-1", "name": "csat", "data_type": "numeric", "value": 0.8},
        ]
    }
    r = client.post("/api/v1/scores", json=batch)
    assert r.status_code == 201
    body = r.json()
    assert [x["index"] for x in body["items"]] == [0, 4]
    errors = {x["index"]: x["error"] for x in body["rejected"]}
    assert "outside [1.0, 5.0]" in errors[1]
    assert "data_type is required" in errors[2]
    assert "trace_id, response_id or session_id" in errors[3]
    bads: list[object] = [{"name": "helpfulness", "trace_id": "xyz", "value": 2}, {"nope": 1}, []]
    for bad in bads:
        r = client.post("/api/v1/scores", json=bad)
        assert r.status_code == 400, bad
        assert r.json()["error"]["code"] == "bad_request"

    items = client.get("/api/v1/scores", params={"trace_id": call["trace_id"]}).json()["items"]
    by_name = {x["name"]: x for x in items}
    assert by_name["helpfulness"]["span_id"] == call["span_id"]
    assert by_name["helpfulness"]["session_id"] == "conv-1"  # from the call
    assert by_name["helpfulness"]["label"] == builtin_rubric("helpfulness").scale.label_for(4)
    assert (by_name["groundedness"]["value"], by_name["groundedness"]["data_type"]) == (
        1.0,
        "boolean",
    )
    assert by_name["helpfulness"]["source"] == "api"
    sessions = client.get("/api/v1/sessions").json()["items"]
    ext = sessions[0]["external_scores"]
    assert ext["helpfulness"] == {"n": 1, "mean_value": 4.0}
    assert ext["csat"] == {"n": 1, "mean_value": 0.8}
    assert client.get("/api/v1/scores", params={"nme": "x"}).status_code == 400
