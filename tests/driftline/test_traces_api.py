"""Traces API on SQLite and PostgreSQL: agent runs from the real OTel SDK through OTLP/HTTP,
listed with filters and cursor pages, and one trace as a span tree with roll-ups."""

from __future__ import annotations

from fastapi.testclient import TestClient

from collector.store import traces
from tests.conftest import wait_for
from tests.support.agent_traces import agent_run, orphan, record, send

T0 = 1_780_000_000_000_000_000  # 2026-05-28, fixed so filters are exact


def _load(client: TestClient) -> tuple[str, str]:
    spans = record(lambda p: agent_run(p, session="conv-1", user="alice", t0=T0))
    spans += record(
        lambda p: agent_run(p, session="conv-2", user="bob", t0=T0 + 10**10, tool_error=True)
    )
    orphan_ids: list[tuple[str, str]] = []
    spans += record(lambda p: orphan_ids.append(orphan(p, T0 + 2 * 10**10)), service="rag")
    send(client, spans)
    wait_for(lambda: len(client.get("/api/v1/traces").json()["items"]) == 3)
    wait_for(lambda: len(client.get("/api/v1/calls").json()["items"]) == 4)
    return orphan_ids[0]


def test_trace_list_filters_and_pages(client: TestClient) -> None:
    orphan_trace, _ = _load(client)
    items = client.get("/api/v1/traces").json()["items"]
    assert items[0]["trace_id"] == orphan_trace  # newest first
    agent = items[1]
    assert agent["root"]["kind"] == "agent" and agent["root"]["label"] == "agent: trip-planner"
    assert (agent["llm_calls"], agent["spans"], agent["errors"]) == (2, 4, 1)
    assert (agent["input_tokens"], agent["output_tokens"]) == (60, 17)
    assert agent["duration_s"] == 1.5 and agent["session_id"] == "conv-2"

    def ids(**params: str | float | bool) -> list[str | None]:
        r = client.get("/api/v1/traces", params=params)
        assert r.status_code == 200, r.text
        return [i["session_id"] for i in r.json()["items"]]

    assert ids(session="conv-1") == ["conv-1"]
    assert ids(user="bob") == ["conv-2"]
    assert ids(status="error") == ["conv-2"]
    assert ids(status="ok") == [None, "conv-1"]
    assert ids(has_llm=False) == [None]
    assert ids(has_llm=True) == ["conv-2", "conv-1"]
    assert ids(min_duration_s=1.0) == ["conv-2", "conv-1"]
    assert ids(service="rag") == [None]
    assert ids(since=T0 / 1e9 + 5, until=T0 / 1e9 + 15) == ["conv-2"]
    page1 = client.get("/api/v1/traces", params={"limit": 2}).json()
    page2 = client.get("/api/v1/traces", params={"limit": 2, "cursor": page1["next_cursor"]}).json()
    assert [i["session_id"] for i in page1["items"] + page2["items"]] == [None, "conv-2", "conv-1"]
    assert page2["next_cursor"] is None
    for bad in ({"status": "nope"}, {"sesion": "conv-1"}, {"cursor": "zz"}, {"since": "x"}):
        r = client.get("/api/v1/traces", params=bad)
        assert r.status_code == 400, bad
        assert r.json()["error"]["code"] == "bad_request"


def test_trace_tree_rollups_and_missing_parent(client: TestClient) -> None:
    orphan_trace, missing_parent = _load(client)
    conv1 = client.get("/api/v1/traces", params={"session": "conv-1"}).json()["items"][0]
    tree = client.get(f"/api/v1/traces/{conv1['trace_id']}").json()
    (root,) = tree["roots"]
    assert root["kind"] == "agent" and not root["missing"]
    kinds = [(c["kind"], c["label"]) for c in root["children"]]
    assert kinds == [
        ("llm", "chat gpt-4o-mini"),
        ("tool", "tool: get_weather"),
        ("llm", "chat gpt-4o-mini"),
    ]
    first_chat = root["children"][0]
    assert first_chat["call"]["input_tokens"] == 20 and first_chat["totals"]["input_tokens"] == 20
    assert root["children"][1]["call"] is None
    assert root["children"][1]["totals"]["input_tokens"] is None  # unknown, not 0
    assert root["totals"]["input_tokens"] == 60 and root["totals"]["llm_calls"] == 2
    assert root["totals"]["latency_s"] == 1.5 and tree["totals"]["errors"] == 0
    assert tree["totals"]["cost_usd"] is not None and tree["totals"]["cost_usd"] > 0
    assert len(tree["calls"]) == 2
    call = client.get(f"/api/v1/calls/{tree['calls'][0]}").json()
    assert call["trace_id"] == conv1["trace_id"]

    o = client.get(f"/api/v1/traces/{orphan_trace}").json()
    (placeholder,) = o["roots"]
    assert placeholder["missing"] and placeholder["span_id"] == missing_parent
    assert o["missing_parents"] == [missing_parent]
    (retr,) = placeholder["children"]
    assert retr["kind"] == "retrieval" and retr["label"] == "retrieval: retrieve docs"
    assert o["totals"]["spans"] == 1 and o["totals"]["llm_calls"] == 0

    assert client.get("/api/v1/traces/" + "0" * 32).status_code == 404
    assert client.get("/api/v1/traces/not-hex").status_code == 400


def test_tenant_isolation_of_traces(client: TestClient) -> None:
    _load(client)
    tid = client.get("/api/v1/traces").json()["items"][0]["trace_id"]
    with client.app.state.driftline.engine.connect() as conn:  # type: ignore[attr-defined]
        assert traces.list_traces(conn, "other", traces.TraceFilter())[0] == []
        assert traces.get_trace(conn, "other", tid) is None
