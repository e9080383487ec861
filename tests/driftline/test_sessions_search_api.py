"""Sessions API and calls ``session=`` / ``q=`` on SQLite and PostgreSQL, through the real
OTLP/HTTP route; the full-text index stays consistent through upserts and deletes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, insert, select, text

from collector.store import queries, search
from collector.store.models import LLMCall
from collector.store.models.judges import JudgeResultRow, JudgeSample
from driftline.app import create_app
from tests.conftest import make_settings, wait_for
from tests.support.agent_traces import agent_run, record, send

T0 = 1_780_000_000_000_000_000


def _load(client: TestClient) -> None:
    spans = record(lambda p: agent_run(p, session="conv-1", user="alice", t0=T0), seed=1)
    spans += record(
        lambda p: agent_run(
            p,
            session="conv-2",
            user="bob",
            t0=T0 + 10**10,
            question="Where is the Eiffel tower?",
            answer="In Paris, on the Champ de Mars.",
        )
    )
    send(client, spans, expect_calls=4)


def _calls(client: TestClient, **params: str) -> list[dict[str, object]]:
    r = client.get("/api/v1/calls", params=params)
    assert r.status_code == 200, r.text
    items: list[dict[str, object]] = r.json()["items"]
    return items


def test_session_filter_and_search(client: TestClient) -> None:
    _load(client)
    assert {c["session_id"] for c in _calls(client, session="conv-1")} == {"conv-1"}
    assert len(_calls(client, session="conv-1")) == 2
    assert _calls(client, session="nope") == []
    france = _calls(client, q="France")
    assert len(france) == 2 and {c["session_id"] for c in france} == {"conv-1"}
    assert len(_calls(client, q="paris CAPITAL")) == 1  # every word, any case
    assert {c["session_id"] for c in _calls(client, q="paris")} == {"conv-1", "conv-2"}
    assert len(_calls(client, q="Paris", session="conv-2")) == 1
    assert _calls(client, q="Lyon") == []
    assert len(_calls(client, q='"Eiffel" tower* -(')) == 2  # FTS5 syntax is plain words here
    for bad in ({"q": "!!!"}, {"q": "x" * 501}, {"sesion": "conv-1"}, {"qq": "France"}):
        r = client.get("/api/v1/calls", params=bad)
        assert r.status_code == 400, bad
        assert r.json()["error"]["code"] == "bad_request"
    assert "sesion" in client.get("/api/v1/calls?sesion=x").json()["error"]["message"]


def test_search_index_follows_upserts_and_deletes(client: TestClient) -> None:
    _load(client)
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    # an OTLP retry with changed content updates the row (upsert), and the index with it
    again = record(lambda p: agent_run(p, t0=T0, answer="Lutetia was its old name."), seed=1)
    send(client, again)
    wait_for(lambda: _calls(client, q="Lutetia"))
    assert {c["session_id"] for c in _calls(client, q="Paris")} == {"conv-2"}
    with engine.begin() as conn:
        conn.execute(delete(LLMCall).where(LLMCall.session_id == "conv-2"))
        if conn.dialect.name == "sqlite":  # raises if the FTS5 index and llm_calls disagree
            conn.execute(
                text("INSERT INTO llm_calls_fts(llm_calls_fts, rank) VALUES('integrity-check', 1)")
            )
    assert _calls(client, q="Paris") == []
    assert len(_calls(client, q="Lutetia")) == 1


@pytest.mark.postgres
def test_postgres_search_uses_the_gin_index(pg_url: str) -> None:
    with TestClient(create_app(make_settings(pg_url, grpc_enabled=False))) as c:
        _load(c)
        engine = c.app.state.driftline.engine  # type: ignore[attr-defined]
        with engine.connect() as conn:
            conn.execute(text("SET enable_seqscan = off"))
            t = LLMCall.__table__
            q = select(t.c.call_id).where(search.match_condition("postgresql", "paris"))
            compiled = q.compile(conn, compile_kwargs={"literal_binds": True})
            plan = "\n".join(r[0] for r in conn.execute(text(f"EXPLAIN {compiled}")))
            assert "ix_llm_calls_search" in plan, plan
            assert len(queries.list_calls(conn, "default", queries.CallFilter(q="paris"))[0]) == 2


def test_sessions_list_and_conversation(client: TestClient) -> None:
    _load(client)
    calls = _calls(client, session="conv-1")
    trace = calls[0]["trace_id"]
    r = client.post(
        "/api/v1/feedback", json={"trace_id": trace, "kind": "thumbs_down", "user_id": "alice"}
    )
    assert r.status_code in (200, 202), r.text
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        for call, score in zip(calls, (4.0, 2.0), strict=True):
            sample_id = conn.execute(
                insert(JudgeSample).values(
                    tenant="default",
                    trace_id=call["trace_id"],
                    span_id=call["span_id"],
                    call_id=call["call_id"],
                    rubric="helpfulness",
                    inclusion_probability=1.0,
                    design_rate=1.0,
                    stratum="all",
                    reason="random",
                    status="done",
                    attempts=1,
                )
            ).inserted_primary_key[0]
            conn.execute(
                insert(JudgeResultRow).values(
                    sample_id=sample_id,
                    tenant="default",
                    trace_id=call["trace_id"],
                    span_id=call["span_id"],
                    call_id=call["call_id"],
                    status="ok",
                    rubric_name="helpfulness",
                    rubric_version="1",
                    rubric_fingerprint="f",
                    judge_model="judge",
                    score=score,
                )
            )
    items = client.get("/api/v1/sessions").json()["items"]
    assert [s["session_id"] for s in items] == ["conv-2", "conv-1"]
    s1 = items[1]
    assert (s1["calls"], s1["traces"], s1["users"], s1["errors"]) == (2, 1, 1, 0)
    assert (s1["input_tokens"], s1["output_tokens"]) == (60, 17)
    assert s1["cost_usd"] > 0 and s1["first_at"].endswith("Z")
    assert s1["feedback"] == {"thumbs_down": 1} and items[0]["feedback"] == {}
    assert s1["judge_scores"] == {"helpfulness": {"n": 2, "mean_score": 3.0}}
    assert [
        s["session_id"]
        for s in client.get("/api/v1/sessions", params={"user": "bob"}).json()["items"]
    ] == ["conv-2"]
    p1 = client.get("/api/v1/sessions", params={"limit": 1}).json()
    p2 = client.get("/api/v1/sessions", params={"limit": 1, "cursor": p1["next_cursor"]}).json()
    assert [p1["items"][0]["session_id"], p2["items"][0]["session_id"]] == ["conv-2", "conv-1"]
    assert p2["next_cursor"] is None

    conv = client.get("/api/v1/sessions/conv-1").json()
    assert [t["output_text"] for t in conv["turns"]] == [
        "calling get_weather",
        "Paris is the capital of France.",
    ]
    assert [t["judge"][0]["score"] for t in conv["turns"]] == [2.0, 4.0]  # newest-first scores
    assert conv["calls"] == 2 and conv["truncated"] is False
    assert client.get("/api/v1/sessions/nope").status_code == 404
    assert client.get("/api/v1/sessions", params={"cursor": "zz"}).status_code == 400
    assert client.get("/api/v1/sessions", params={"usr": "bob"}).status_code == 400
