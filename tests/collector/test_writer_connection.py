"""The span writer's own connection: its settings, commits through it, recovery after an error."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from sqlalchemy import text

from collector.cost.prices import PriceTable
from collector.ingest.prepare import Item, prepare
from collector.ingest.writer import (
    WRITER_SQLITE_AUTOCHECKPOINT_PAGES,
    WRITER_SQLITE_CACHE_KIB,
    BatchWriter,
    write_batch,
    writer_connection,
)
from collector.store import engine as store_engine
from collector.store.schema import SpanData
from tests.conftest import PRICE_FIXTURE


def _span(i: int, *, start: int = 1_700_000_000_000_000_000) -> SpanData:
    return SpanData(
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        name="chat gpt-4o",
        kind=3,
        start_unix_nano=start,
        end_unix_nano=start + 10**9,
        status_code=0,
        status_message=None,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
        events=[],
        links=[],
        resource_attributes={"service.name": "svc"},
        scope_name=None,
        scope_version=None,
    )


def _items(*ids: int) -> list[Item]:
    items, errors = prepare([_span(i) for i in ids], 10_000, "redacted")
    assert not errors
    return items


def _count(url: str, table: str) -> int:
    eng = store_engine.make_engine(url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one())
    finally:
        eng.dispose()


def test_sqlite_writer_connection_settings_and_commits(sqlite_url: str) -> None:
    store_engine.upgrade(sqlite_url)
    engine = store_engine.make_engine(sqlite_url)
    prices = PriceTable.load(PRICE_FIXTURE)
    conn = writer_connection(engine)
    try:
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -WRITER_SQLITE_CACHE_KIB
        auto = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
        assert auto == WRITER_SQLITE_AUTOCHECKPOINT_PAGES
        conn.commit()
        for batch in ([1, 2], [3]):  # one transaction each, through the same connection
            written = write_batch(conn, [("default", _items(*batch))], prices)
            assert len(written["default"]) == len(batch)
            assert not conn.in_transaction()
            assert _count(sqlite_url, "spans") == (2 if batch == [1, 2] else 3)
    finally:
        conn.close()
        engine.dispose()


def test_writer_recovers_after_a_refused_batch(db_url: str) -> None:
    """A batch the driver refuses fails alone (its future); the next batch is written."""
    store_engine.upgrade(db_url)
    engine = store_engine.make_engine(db_url)
    writer = BatchWriter(engine, PriceTable.load(PRICE_FIXTURE))
    writer.start()
    try:
        bad = _items(7)
        # a start time past 2^63 - 1 fits no BIGINT column: the driver refuses the batch
        bad[0] = Item(_span(7, start=2**63 + 5), bad[0].extract)
        refused: Future[int] = writer.submit("default", bad)
        with pytest.raises(OverflowError):
            refused.result(30)
        assert writer.submit("default", _items(8, 9)).result(30) == 2
        assert _count(db_url, "spans") == 2
        assert _count(db_url, "llm_calls") == 2
    finally:
        writer.close()
        engine.dispose()
