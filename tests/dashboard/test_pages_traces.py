"""Traces, Sessions, the explorer's search box and export, and the review page's corrected
answer, under Streamlit's AppTest against a store filled through the real OTLP/HTTP route."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select
from streamlit.testing.v1 import AppTest

from collector.store.engine import make_engine
from collector.store.models.judges import HumanLabel, JudgeSample, ReviewItem
from dashboard import ui
from driftline.app import create_app
from tests.conftest import make_settings
from tests.dashboard.conftest import APP
from tests.support.agent_traces import agent_run, orphan, record, send


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('pages')}/driftline.db"
    t0 = time.time_ns() - 120 * 10**9
    with TestClient(create_app(make_settings(url, grpc_enabled=False))) as client:
        spans = record(lambda p: agent_run(p, session="conv-1", user="alice", t0=t0))
        spans += record(
            lambda p: agent_run(
                p,
                session="conv-2",
                user="bob",
                t0=t0 + 10**10,
                answer="Lyon is not it.",
                tool_error=True,
            )
        )
        spans += record(lambda p: orphan(p, t0 + 2 * 10**10), service="rag")
        send(client, spans, expect_calls=4)
        call = client.get("/api/v1/calls", params={"session": "conv-1"}).json()["items"][0]
    engine = make_engine(url)
    with engine.begin() as conn:
        sid = conn.execute(
            insert(JudgeSample).values(
                tenant="default",
                trace_id=call["trace_id"],
                span_id=call["span_id"],
                call_id=call["call_id"],
                rubric="helpfulness",
                inclusion_probability=1.0,
                design_rate=1.0,
                stratum="all",
                reason="flagged",
                status="done",
                attempts=1,
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        conn.execute(
            insert(ReviewItem).values(
                tenant="default",
                sample_id=sid,
                trace_id=call["trace_id"],
                span_id=call["span_id"],
                call_id=call["call_id"],
                rubric="helpfulness",
                audit=False,
                stratum="all",
                reason="flagged",
                status="pending",
            )
        )
    engine.dispose()
    yield url


def open_page(monkeypatch: pytest.MonkeyPatch, url: str, page: str) -> AppTest:
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "true")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_traces_page_tree_and_link_to_call(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "traces")
    listing = at.dataframe[0].value
    assert list(listing["session"])[1:] == ["conv-2", "conv-1"]
    assert list(listing["errors"]) == [0, 1, 0]
    # the newest is the orphan: its missing parent is shown as a placeholder
    tree = at.dataframe[1].value
    assert list(tree["kind"]) == ["missing", "retrieval"]
    assert any("never arrived" in w.value for w in at.warning)
    at.text_input(key="traces_open").set_value(listing["trace_id"].iloc[2]).run()
    tree = at.dataframe[1].value
    assert [s.strip() for s in tree["span"]] == [
        "agent: trip-planner",
        "└ chat gpt-4o-mini",
        "└ tool: get_weather",
        "└ chat gpt-4o-mini",
    ]
    # columns with an unknown value are shown as text, the unknown as "–" (ui.table)
    assert tree["tokens"].iloc[0] == "77" and (tree["call_id"] != "–").sum() == 2
    assert [m.value for m in at.metric if m.label == "LLM calls"] == ["2"]
    call_id = tree["call_id"][tree["call_id"] != "–"].iloc[0]
    at.button(key="traces_call_0").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["calls_open"] == call_id
    assert any(s.value == f"Call {ui.md(call_id)}" for s in at.subheader)  # Markdown-escaped


def test_sessions_page_shows_a_conversation(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "sessions")
    assert list(at.dataframe[0].value["session"]) == ["conv-2", "conv-1"]
    at.text_input(key="sessions_open").set_value("conv-1").run()
    said = [t.value for t in at.text]
    assert said == [
        "What is the capital of France?",
        "calling get_weather",
        "What is the capital of France?",
        "Paris is the capital of France.",
    ]
    assert [m.value for m in at.metric if m.label == "Calls"] == ["2"]


def test_explorer_search_and_export(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "calls")
    at.text_input(key="calls_q").set_value("Lyon").run()
    view = at.dataframe[0].value
    assert len(view) == 1
    at.button(key="calls_export").click().run()
    fmt, blob = at.session_state["calls_export_blob"]
    assert fmt == "jsonl" and blob.count(b"\n") == 1 and b"Lyon is not it." in blob
    at.text_input(key="calls_q").set_value("?!").run()
    assert any("at least one word" in w.value for w in at.warning)


def test_review_page_stores_a_corrected_answer(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "review")
    engine = make_engine(store)
    with engine.connect() as conn:
        item_id = conn.execute(select(ReviewItem.id)).scalar_one()
    at.text_area(key=f"review_corrected_{item_id}").set_value("Paris.").run()
    at.button(key=f"review_score_{item_id}_2").click().run()
    assert not at.exception, [e.value for e in at.exception]
    with engine.connect() as conn:
        label = conn.execute(select(HumanLabel.score, HumanLabel.corrected_output)).one()
    engine.dispose()
    assert (label.score, label.corrected_output) == (2.0, "Paris.")
    assert any("with a corrected answer" in s.value for s in at.success)
