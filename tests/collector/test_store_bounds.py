"""Attack report on issue 35, item 1: an indexed text column filled by span data is bounded
before it reaches the store, the same on SQLite and PostgreSQL.

A ``service.name`` of 6,000 characters exceeded PostgreSQL's btree row limit (2,704 bytes) in
``ix_llm_calls_service``: the whole COPY failed, so the request's other spans were lost (spool
off: HTTP 500; spool on: the record quarantined, a replay failing again)."""

from __future__ import annotations

import random
import string
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Table, text

from collector.spool.quarantine import Quarantine
from collector.store import bulk
from collector.store import engine as store_engine
from collector.store.models import Base
from collector.store.models.core import CUT_MARKER, SERVICE_NAME_MAX_CHARS
from driftline.app import create_app
from tests.conftest import make_settings, wait_for

#: random, so that PostgreSQL cannot compress the index row under its limit
LONG_NAME = "".join(random.Random(35).choices(string.ascii_letters + string.digits, k=6000))
ODD_TRACE, GOOD_TRACE = "0d" * 16, "0e" * 16


def _span(trace_id: str, name: str) -> dict[str, Any]:
    now = time.time_ns()
    return {
        "traceId": trace_id,
        "spanId": "01" * 8,
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(now - 10**9),
        "endTimeUnixNano": str(now),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "10"}},
        ],
    }


def _resource(service: str, span: dict[str, Any]) -> dict[str, Any]:
    attrs = [{"key": "service.name", "value": {"stringValue": service}}]
    return {"resource": {"attributes": attrs}, "scopeSpans": [{"spans": [span]}]}


BODY = {
    "resourceSpans": [
        _resource(LONG_NAME, _span(ODD_TRACE, "chat odd")),
        _resource("svc", _span(GOOD_TRACE, "chat good")),
    ]
}


def _stored(db_url: str) -> dict[str, str | None]:
    engine = store_engine.make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT trace_id, service_name FROM llm_calls")).all()
    finally:
        engine.dispose()
    return {r[0]: r[1] for r in rows}


def _assert_both_stored_the_long_name_cut(db_url: str) -> None:
    stored = _stored(db_url)
    assert stored[GOOD_TRACE] == "svc"
    cut = stored[ODD_TRACE]
    assert cut is not None and len(cut) == SERVICE_NAME_MAX_CHARS
    assert cut == LONG_NAME[: SERVICE_NAME_MAX_CHARS - 1] + CUT_MARKER


def test_a_long_service_name_is_cut_and_loses_nothing_spool_off(client: TestClient) -> None:
    r = client.post("/v1/traces", json=BODY)
    assert r.status_code == 200, r.text
    assert "partialSuccess" not in r.json() or not r.json()["partialSuccess"].get("rejectedSpans")
    db_url = str(client.app.state.driftline.settings.database_url)  # type: ignore[attr-defined]
    _assert_both_stored_the_long_name_cut(db_url)


@pytest.fixture
def spooled_client(db_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, Path, str]]:
    settings = make_settings(
        db_url,
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "spool",
        spool_processor="thread",
    )
    with TestClient(create_app(settings)) as c:
        yield c, tmp_path / "spool", db_url


def test_a_long_service_name_is_cut_and_nothing_quarantined_spool_on(
    spooled_client: tuple[TestClient, Path, str],
) -> None:
    c, spool_dir, db_url = spooled_client
    assert c.post("/v1/traces", json=BODY).status_code == 200
    wait_for(lambda: GOOD_TRACE in _stored(db_url) or bool(Quarantine(spool_dir).entries()))
    assert Quarantine(spool_dir).entries() == []
    _assert_both_stored_the_long_name_cut(db_url)
    assert c.get("/healthz").json()["status"] == "ok"


def test_every_indexed_text_column_written_from_telemetry_is_bounded() -> None:
    """The tables the span and log writers fill: each text column in an index has a bound
    (varchar(n) or ``info["max_chars"]``) that the writer applies on every store; a btree
    row of the widest bounded values stays under PostgreSQL's 2,704 bytes."""
    for name in ("spans", "llm_calls", "gen_ai_log_events", "external_scores"):
        table = Base.metadata.tables[name]
        assert isinstance(table, Table)
        bounds = {table.columns[i].name: n for i, n, _ in bulk.text_bounds(table, True)}
        groups: list[Any] = [*table.indexes, table.primary_key]
        for ix in groups:
            texts = [c for c in ix.columns if bulk._pg_type(c) == "text"]
            for col in texts:
                assert col.name in bounds, f"{name}.{col.name} is indexed and unbounded"
            # 4 bytes per character at worst (UTF-8), plus a few bytes of header per column
            assert sum(4 * bounds[c.name] + 8 for c in texts) + 8 * len(ix.columns) < 2704


def test_cut_keeps_values_within_bound() -> None:
    assert bulk.cut("abc", 3, CUT_MARKER) == "abc"
    assert bulk.cut("abcd", 3, CUT_MARKER) == "ab" + CUT_MARKER
    assert bulk.cut("abcd", 3) == "abc"
    assert bulk.cut(None, 3) is None


def _words(seed: int, chars: int) -> str:
    r = random.Random(seed)
    return " ".join("".join(r.choices(string.ascii_lowercase, k=7)) for _ in range(chars // 8))


@pytest.fixture
def full_capture_client(db_url: str) -> Iterator[TestClient]:
    settings = make_settings(db_url, grpc_enabled=False, capture_content="full")
    with TestClient(create_app(settings)) as c:
        yield c


def test_texts_past_the_tsvector_limit_lose_nothing_and_stay_searchable(
    full_capture_client: TestClient,
) -> None:
    """PostgreSQL's full-text index (``ix_llm_calls_search``) refused a tsvector over
    1,048,575 bytes: 2 x 600,000 characters of distinct words (under the 1,000,000-character
    stored limit) failed the whole COPY (HTTP 500, the normal span beside it lost). The index
    now covers the first 80,000 characters of each text (``search_0003``)."""
    prompt, answer = _words(1, 600_000), _words(2, 600_000)
    odd = _span(ODD_TRACE, "chat long")
    odd["attributes"] += [
        {"key": k, "value": {"stringValue": v}}
        for k, v in (
            ("gen_ai.prompt.0.role", "user"),
            ("gen_ai.prompt.0.content", prompt),
            ("gen_ai.completion.0.role", "assistant"),
            ("gen_ai.completion.0.content", answer),
        )
    ]
    body = {"resourceSpans": [_resource("svc", odd), _resource("svc", _span(GOOD_TRACE, "g"))]}
    c = full_capture_client
    r = c.post("/v1/traces", json=body)
    assert r.status_code == 200, r.text[:500]
    db_url = str(c.app.state.driftline.settings.database_url)  # type: ignore[attr-defined]
    assert set(_stored(db_url)) == {ODD_TRACE, GOOD_TRACE}
    for word in (prompt.split()[0], answer.split()[0]):
        found = c.get("/api/v1/calls", params={"q": word, "since": "1h"}).json()["items"]
        assert [f["trace_id"] for f in found] == [ODD_TRACE], word
