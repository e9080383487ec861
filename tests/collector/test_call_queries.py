"""Call queries: ``queries.list_calls`` pages newest first by (start, trace_id, span_id), calls
without a start time last, every call exactly once across pages, on SQLite and PostgreSQL; the
first page of a long range is read off the (tenant, start) index, not sorted; and the SQL
rejection flag agrees with ``callstats.is_rate_limited``; ``queries.get_call`` finds a call by
``call_id`` or ``trace_id:span_id`` (the earliest when both name calls) through indexes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, text

from collector.store import bulk, queries
from collector.store import engine as store_engine

NAMES = [c.name for c in bulk.CALLS.columns]
T0 = 1_767_225_600 * 10**9


def _row(i: int, start: int | None, tenant: str = "default", **over: Any) -> tuple[Any, ...]:
    rec: dict[str, Any] = dict.fromkeys(NAMES)
    rec.update(
        tenant=tenant,
        trace_id=f"{i % 7:031x}{i % 3}",  # ties on start are broken by trace_id, then span_id
        span_id=f"{i:016x}",
        call_id=f"c-{i}",
        operation="chat",
        model="m-a" if i % 2 else "m-b",
        start_unix_nano=start,
        status="ok",
        flags=[],
        dialect="semconv",
        redactions=0,
    )
    rec.update(over)
    return tuple(rec[n] for n in NAMES)


def _rows() -> list[tuple[Any, ...]]:
    rows = []
    for i in range(60):
        # many equal start times, some calls without one, one at exactly 0
        start = None if i % 11 == 0 else (0 if i == 13 else T0 + (i // 4) * 10**6)
        rows.append(_row(i, start))
    rows.append(_row(100, T0 + 10**9, tenant="other"))  # another tenant's newest call
    return rows


def _expected(rows: list[tuple[Any, ...]], model: str | None = None) -> list[str]:
    recs = [dict(zip(NAMES, r, strict=True)) for r in rows]
    mine = [r for r in recs if r["tenant"] == "default" and model in (None, r["model"])]
    mine.sort(key=lambda r: (r["start_unix_nano"] or 0, r["trace_id"], r["span_id"]), reverse=True)
    return [r["call_id"] for r in mine]


def _paged(url: str, limit: int, flt: queries.CallFilter) -> list[str]:
    engine = store_engine.make_engine(url)
    seen: list[str] = []
    cursor = None
    try:
        with engine.connect() as conn:
            while True:
                items, cursor = queries.list_calls(conn, "default", flt, limit=limit, cursor=cursor)
                assert len(items) <= limit
                seen += [c["call_id"] for c in items]
                if cursor is None:
                    return seen
                assert len(items) == limit
    finally:
        engine.dispose()


def test_pages_cover_every_call_once_in_order(db_url: str) -> None:
    rows = _rows()
    engine = store_engine.make_engine(db_url)
    try:
        with engine.begin() as conn:
            bulk.upsert(conn, bulk.CALLS, rows)
    finally:
        engine.dispose()
    for limit in (1, 4, 7, 59, 1000):
        assert _paged(db_url, limit, queries.CallFilter()) == _expected(rows)
    assert _paged(db_url, 5, queries.CallFilter(model="m-a")) == _expected(rows, "m-a")
    since = queries.CallFilter(since_unix_nano=T0 + 5 * 10**6)
    want = [c for c in _expected(rows) if int(c[2:]) // 4 >= 5 and int(c[2:]) % 11 and c != "c-13"]
    assert _paged(db_url, 6, since) == want


def test_first_page_reads_the_start_index_without_a_full_sort(sqlite_url: str) -> None:
    store_engine.upgrade(sqlite_url)
    engine = store_engine.make_engine(sqlite_url)
    try:
        with engine.begin() as conn:
            bulk.upsert(conn, bulk.CALLS, [_row(i, T0 + i) for i in range(2_000)])
            conn.execute(text("ANALYZE"))
        with engine.connect() as conn:
            statements: list[tuple[str, Any]] = []

            def keep(_c: Any, _cur: Any, statement: str, params: Any, *_a: Any) -> None:
                statements.append((statement, params))

            event.listen(engine, "before_cursor_execute", keep)
            items, cursor = queries.list_calls(conn, "default", queries.CallFilter(), limit=10)
            event.remove(engine, "before_cursor_execute", keep)
            assert [c["call_id"] for c in items] == [f"c-{i}" for i in range(1999, 1989, -1)]
            assert cursor is not None
            dated, params = statements[0]
            plan = " | ".join(
                str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + dated, params)
            )
    finally:
        engine.dispose()
    assert "ix_llm_calls_start" in plan, plan
    assert "USE TEMP B-TREE FOR ORDER BY" not in plan, plan  # no sort of every matching row


def test_get_call_by_either_key_earliest_wins_through_indexes(db_url: str) -> None:
    rows = [_row(i, T0 + i * 10**9) for i in range(500)]
    late, early = dict(zip(NAMES, rows[400], strict=True)), dict(zip(NAMES, rows[3], strict=True))
    pair = f"{late['trace_id']}:{late['span_id']}"
    # a later call whose call_id is another call's trace:span, and an earlier one reusing it
    rows.append(_row(900, T0 + 900 * 10**9, call_id=f"{early['trace_id']}:{early['span_id']}"))
    rows.append(_row(901, T0 - 10**9, call_id=pair))
    rows.append(_row(902, T0 - 2 * 10**9, tenant="other", call_id="c-7"))
    store_engine.upgrade(db_url)
    engine = store_engine.make_engine(db_url)
    statements: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, *_a: Any) -> None:
        statements.append((statement, params))

    try:
        with engine.begin() as conn:
            bulk.upsert(conn, bulk.CALLS, rows)
        with engine.connect() as conn:
            got = queries.get_call(conn, "default", "c-7")
            assert got is not None and got["span_id"] == f"{7:016x}"  # not the other tenant's
            assert queries.get_call(conn, "other", "c-8") is None
            by_pair = queries.get_call(conn, "default", pair.upper())  # ids are matched lowered
            assert by_pair is not None and by_pair["span_id"] == f"{901:016x}"  # the earliest
            early_pair = f"{early['trace_id']}:{early['span_id']}"
            by_early = queries.get_call(conn, "default", early_pair)
            assert by_early is not None and by_early["span_id"] == early["span_id"]
            assert queries.get_call(conn, "default", "0:0") is None
            if engine.dialect.name == "sqlite":
                event.listen(engine, "before_cursor_execute", keep)
                queries.get_call(conn, "default", early_pair)
                event.remove(engine, "before_cursor_execute", keep)
                lookups = [(q, p) for q, p in statements if "FROM llm_calls" in q]
                plans = [
                    " | ".join(
                        str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + q, p)
                    )
                    for q, p in lookups
                ]
                assert len(plans) == 2, plans
                assert "ix_llm_calls_call_id" in plans[0], plans
                assert "PRIMARY KEY" in plans[1] or "autoindex" in plans[1], plans
    finally:
        engine.dispose()


def test_sql_rejection_flag_agrees_with_is_rate_limited(db_url: str) -> None:
    """``is_rejected`` (the SQL every stats path and the lake seal use) and
    ``callstats.is_rate_limited`` (Python) strip the same blanks and fold case alike."""
    from collector.store import analytics
    from collector.store.callstats import is_rate_limited

    kinds = [" 429", "429\t", "Rate_Limited\n", "\x0boverloaded\x0c", "429x", "", "4 29", None]
    rows = [_row(i, T0 + i, error_type=k, status="error") for i, k in enumerate(kinds)]
    engine = store_engine.make_engine(db_url)
    try:
        with engine.begin() as conn:
            bulk.upsert(conn, bulk.CALLS, rows)
    finally:
        engine.dispose()
    table = analytics.fetch_sliced(db_url, "default", ["span_id", "is_rejected"], None, None, {}, 1)
    got = dict(zip(table["span_id"].to_pylist(), table["is_rejected"].to_pylist(), strict=True))
    assert [got[f"{i:016x}"] for i in range(len(kinds))] == [int(is_rate_limited(k)) for k in kinds]
    assert [int(is_rate_limited(k)) for k in kinds] == [1, 1, 1, 1, 0, 0, 0, 0]
