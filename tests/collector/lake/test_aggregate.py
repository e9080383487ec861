"""Aggregating in place (:mod:`collector.lake.aggregate`, :func:`collector.lake.stats.
exact_call_stats`) gives what the same SQL gives over the rows of the query layer's
``fetch_calls``, on a partly sealed store (SQLite and PostgreSQL)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from collector.lake import aggregate, layout, query, seal, stats
from tests.collector.lake import calldata

HOUR = calldata.HOUR_NS
T0 = calldata.T0_NS
NOW = T0 + 6 * HOUR + 3 * HOUR // 4  # hours 0..5 are closed; hour 6 (calls up to 6.5 h) is not
#: (since, until, filters): inside one sealed hour, cut sealed hours plus the tail, tail only
RANGES: list[tuple[int, int, dict[str, str]]] = [
    (T0 + HOUR // 4, T0 + HOUR // 2, {}),
    (T0 + HOUR // 2, NOW, {}),
    (T0, NOW, {"model": "gpt-4o", "service": "chat-api"}),
    (T0 + 6 * HOUR, NOW, {"variant": "candidate"}),
    (T0 + 2 * HOUR, T0 + 5 * HOUR, {"model": "no-such-model"}),
]
SQL = """SELECT tenant, model, count(*) AS n, count(ttft_s) AS n_ttft,
  quantile_cont(ttft_s, [0.5, 0.95, 0.99]) AS q_ttft, sum(output_tokens) AS out_tokens,
  sum(cost_usd) AS usd, sum(is_unpriced) AS unpriced, min(start_unix_nano) AS first_ns
FROM calls GROUP BY ALL ORDER BY tenant, model NULLS LAST"""
COLUMNS = ["tenant", "model", "ttft_s", "output_tokens", "cost_usd", "is_unpriced"]
COLUMNS += ["start_unix_nano"]


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> tuple[str, layout.Lake]:
    rng = np.random.default_rng(5)
    batch = calldata.rows(rng, 1500, span_ns=int(6.5 * HOUR), null_starts=15)
    batch += calldata.rows(rng, 300, tenant="other/team", first_id=10_000, span_ns=3 * HOUR)
    calldata.load(db_url, batch)
    lake = layout.open_lake(str(tmp_path / "lake"))
    rep = seal.seal_pending(db_url, lake, now_ns=NOW, delay_s=0)
    assert len([h for t, h in rep.sealed if t == "default"]) == 6
    return db_url, lake


def close(got: Any, want: Any) -> bool:
    """Equal, floats to 1e-12 relative (a sum may add in another order)."""
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(close(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(close(got[k], want[k]) for k in want)
    return bool(got == want)


def test_aggregate_calls_equals_the_sql_over_fetched_rows(store: tuple[str, layout.Lake]) -> None:
    url, lake = store
    for since, until, flt in RANGES:
        for used in (lake, None):
            check_aggregate(url, lake, used, since, until, flt)


def check_aggregate(
    url: str,
    lake: layout.Lake,
    used: layout.Lake | None,
    since: int,
    until: int,
    flt: dict[str, str],
) -> None:
    tenants = ["default", "other/team"]
    got = aggregate.aggregate_calls(
        url, used, tenants, SQL, since_ns=since, until_ns=until, columns=COLUMNS, filters=flt
    ).to_pylist()
    con = query.cursor()
    try:
        rows = query.fetch_calls(
            url,
            lake,
            None,
            since_ns=since,
            until_ns=until,
            columns=COLUMNS,
            filters=flt,
            all_tenants=True,
        )
        con.register("calls", rows)
        want = con.sql(SQL).to_arrow_table().to_pylist()
    finally:
        con.close()
    assert close(got, want), (got, want)
    if not flt:
        assert sum(r["n"] for r in got) > 0


def test_aggregate_calls_rejects_bad_arguments(store: tuple[str, layout.Lake]) -> None:
    url, lake = store
    with pytest.raises(ValueError, match="unknown llm_calls columns"):
        aggregate.aggregate_calls(
            url, lake, ["default"], SQL, since_ns=T0, until_ns=NOW, columns=["nope"]
        )
    with pytest.raises(ValueError, match="empty range"):
        aggregate.aggregate_calls(
            url, lake, ["default"], SQL, since_ns=NOW, until_ns=T0, columns=COLUMNS
        )
    with pytest.raises(ValueError, match="unknown filter"):
        aggregate.aggregate_calls(
            url,
            lake,
            ["default"],
            SQL,
            since_ns=T0,
            until_ns=NOW,
            columns=COLUMNS,
            filters={"x": "y"},
        )


def test_exact_call_stats_equals_raw_call_stats(store: tuple[str, layout.Lake]) -> None:
    url, lake = store
    for since, until, flt in RANGES:
        check_exact_stats(url, lake, since, until, flt)


def check_exact_stats(
    url: str, lake: layout.Lake, since: int, until: int, flt: dict[str, str]
) -> None:
    groupings: list[tuple[list[str], float | None]] = [
        (["model"], None),
        (["model"], 1800.0),
        (["variant", "service"], 3600.0),
        ([], None),
    ]
    got = stats.exact_call_stats(
        url, lake, "default", groupings, since_ns=since, until_ns=until, filters=flt
    )
    for (group_by, bucket_s), rows in zip(groupings, got, strict=True):
        want = stats.call_stats(
            url,
            lake,
            "default",
            group_by=group_by,
            since_ns=since,
            until_ns=until,
            bucket_s=bucket_s,
            filters=flt,
            source="raw",
        )
        assert close(rows, want), (group_by, bucket_s)


def test_a_rewritten_hour_is_read_afresh(store: tuple[str, layout.Lake]) -> None:
    """The process's DuckDB keeps Parquet footers between statements (``enable_object_cache``):
    a file rewritten after a read must not be served from the stale footer."""
    url, lake = store
    since, until = T0, T0 + HOUR
    sql = "SELECT count(*) AS n, sum(output_tokens) AS out FROM calls"
    cols = ["start_unix_nano", "output_tokens"]

    def read() -> dict[str, Any]:
        got: dict[str, Any] = aggregate.aggregate_calls(
            url, lake, ["default"], sql, since_ns=since, until_ns=until, columns=cols
        ).to_pylist()[0]
        return got

    before = read()
    assert before["n"] > 10
    path = lake.reader_path(lake.data_path("calls", "default", T0))
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 10), path)
    after = read()
    assert after["n"] == 10
    assert after["out"] == sum(v for v in table.column("output_tokens").to_pylist()[:10] if v)
