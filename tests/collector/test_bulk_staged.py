"""The SQLite staged upsert of ``llm_calls`` (one ``INSERT .. SELECT`` per batch): the same rows
as a row-at-a-time ``executemany``, and the FTS index kept in step on insert and update."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from collector.store import bulk
from collector.store import engine as store_engine

NAMES = [c.name for c in bulk.CALLS.columns]


def _row(i: int, **over: Any) -> tuple[Any, ...]:
    rec: dict[str, Any] = dict.fromkeys(NAMES)
    rec.update(
        tenant="default",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        call_id=f"c-{i}",
        operation="chat",
        model="gpt-4o",
        start_unix_nano=1_767_225_600 * 10**9 + i,
        input_tokens=12,
        output_tokens=3,
        ttft_s=0.25,
        e2e_s=1.5,
        cost_usd=1.25e-5,
        finish_reasons=["stop"],
        finish_reason="stop",
        status="ok",
        flags=["cost_reported", "ttft_from_event"],
        input_text=f"question number{i} about zebras",
        output_text=f"answer number{i}",
        dialect="semconv",
        redactions=0,
    )
    rec.update(over)
    return tuple(rec[n] for n in NAMES)


def _typed(conn: Connection) -> list[tuple[Any, ...]]:
    """Every stored value with its SQLite storage class, by rowid."""
    cols = ", ".join(f"{n}, typeof({n})" for n in NAMES)
    return [
        tuple(r)
        for r in conn.exec_driver_sql(f"SELECT rowid, {cols} FROM llm_calls ORDER BY rowid")
    ]


def _matches(conn: Connection, word: str) -> list[str]:
    sql = (
        "SELECT c.call_id FROM llm_calls_fts f JOIN llm_calls c ON c.rowid = f.rowid "
        "WHERE llm_calls_fts MATCH :q ORDER BY c.call_id"
    )
    return [r[0] for r in conn.execute(text(sql), {"q": word})]


@pytest.fixture
def two_stores(_sqlite_template: Path, tmp_path: Path) -> list[str]:
    urls = []
    for name in ("staged", "plain"):
        shutil.copyfile(_sqlite_template, tmp_path / f"{name}.db")
        urls.append(f"sqlite:///{tmp_path}/{name}.db")
    return urls


def test_staged_upsert_stores_what_executemany_stores(
    two_stores: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = [_row(i) for i in range(5)] + [_row(5, input_text=None, output_text=None)]
    again = [_row(1, output_text="a new answer about giraffes", cost_usd=None), _row(9)]
    stored = []
    for url, staged in zip(two_stores, (bulk.SQLITE_STAGED, frozenset()), strict=True):
        monkeypatch.setattr(bulk, "SQLITE_STAGED", staged)
        engine = store_engine.make_engine(url)
        try:
            with engine.begin() as conn:
                bulk.upsert(conn, bulk.CALLS, first)
            with engine.begin() as conn:
                bulk.upsert(conn, bulk.CALLS, again)
            with engine.connect() as conn:
                stored.append(_typed(conn))
                assert _matches(conn, "zebras") == [f"c-{i}" for i in range(5)] + ["c-9"]
                assert _matches(conn, "giraffes") == ["c-1"]
                assert _matches(conn, "number1") == ["c-1"]  # only in the input now
                assert _matches(conn, "number5") == []  # no text: not indexed
        finally:
            engine.dispose()
    assert stored[0] == stored[1]
    assert len(stored[0]) == 7


def test_staged_upsert_rolls_back_with_its_transaction(two_stores: list[str]) -> None:
    engine = store_engine.make_engine(two_stores[0])
    try:
        with pytest.raises(RuntimeError), engine.begin() as conn:
            bulk.upsert(conn, bulk.CALLS, [_row(1)])
            raise RuntimeError("the batch fails after the upsert")
        with engine.begin() as conn:  # the same pooled connection: its staging table is empty
            bulk.upsert(conn, bulk.CALLS, [_row(2)])
        with engine.connect() as conn:
            assert [r[0] for r in conn.exec_driver_sql("SELECT call_id FROM llm_calls")] == ["c-2"]
            assert _matches(conn, "zebras") == ["c-2"]
    finally:
        engine.dispose()
