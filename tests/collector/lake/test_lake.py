"""The lake on a real store (SQLite and PostgreSQL): sealing, late re-seal (read through the
process's Parquet footer cache), crash safety, retention, and that every read through the query
layer equals the store's own answer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from collector.lake import layout, manifest, query, seal, stats
from collector.store import analytics
from tests.collector.lake import calldata

HOUR = calldata.HOUR_NS
T0 = calldata.T0_NS
NOW = T0 + 6 * HOUR + 3 * HOUR // 4  # hours 0..5 are closed; hour 6 (calls up to 6.5 h) is not


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> tuple[str, layout.Lake]:
    rng = np.random.default_rng(3)
    batch = calldata.rows(rng, 1500, span_ns=int(6.5 * HOUR), null_starts=15)
    batch += calldata.rows(rng, 300, tenant="other/team", first_id=10_000, span_ns=3 * HOUR)
    calldata.load(db_url, batch)
    return db_url, layout.open_lake(str(tmp_path / "lake"))


def by_key(t: Any) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: (r["trace_id"], r["span_id"]))


def test_seal_writes_closed_hours_and_reads_equal_the_store(store: tuple[str, Any]) -> None:
    url, lake = store
    rep = seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    assert sorted(h for t, h in rep.sealed if t == "default") == [T0 + k * HOUR for k in range(6)]
    assert not rep.failed
    m = manifest.load(lake, "default")
    assert T0 + 6 * HOUR not in m.hours  # the open hour stays in the store
    cols = ["trace_id", "span_id", "model", "ttft_s", "flags", "is_unpriced", "output_text"]
    for since, until, flt in [
        (None, None, {}),
        (T0 + HOUR // 2, T0 + 4 * HOUR + 17, {}),
        (T0 + 5 * HOUR, None, {"model": "gpt-4o"}),
        (None, T0 + 2 * HOUR, {"variant": "candidate", "service": "chat-api"}),
    ]:
        want = analytics.fetch_windows(
            url,
            "default",
            cols,
            query.complement(since, until, []),
            analytics.validate_filters(flt),
        )
        got = query.fetch_calls(
            url, lake, "default", since_ns=since, until_ns=until, columns=cols, filters=flt
        )
        assert got.schema == want.schema
        assert by_key(got) == by_key(want)


def test_files_are_hive_partitioned_zstd_sorted_and_readable_without_driftline(
    store: tuple[str, Any],
) -> None:
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    root = f"{lake.root}/calls/v1"
    assert os.path.isfile(f"{root}/tenant=other%2Fteam/date=2026-01-01/hour=02/data.parquet")
    con = duckdb.connect()
    n = con.sql(
        f"SELECT tenant, count(*) FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true,"
        " hive_types={'tenant': VARCHAR, 'date': DATE, 'hour': INTEGER}) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    sealed = {t: sum(e.rows for e in manifest.load(lake, t).hours.values()) for t in ("default",)}
    assert dict(n)["default"] == sealed["default"]
    assert dict(n)["other/team"] == 300  # the Hive escape %2F is decoded by the reader
    meta = con.sql(
        f"SELECT DISTINCT compression FROM parquet_metadata('{root}/tenant=default/**/*.parquet')"
    ).fetchall()
    assert meta == [("ZSTD",)]
    rows = con.sql(
        f"SELECT model, variant, start_unix_nano FROM "
        f"'{root}/tenant=default/date=2026-01-01/hour=03/data.parquet'"
    ).fetchall()
    key = [(m is None, m or "", v is None, v or "", s) for m, v, s in rows]
    assert key == sorted(key)  # nulls last, as Arrow sorts
    reasons = con.sql(  # v1 keeps string lists as JSON text; docs/lake.md's way to a list
        "SELECT DISTINCT from_json(finish_reasons, '[\"VARCHAR\"]') AS r "
        f"FROM read_parquet('{root}/tenant=default/**/*.parquet') ORDER BY r"
    ).fetchall()
    assert reasons == [(["error"],), (["stop"],)]


def test_late_span_reseals_only_its_hour(store: tuple[str, Any]) -> None:
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    before = manifest.load(lake, "default").hours
    late = calldata.rows(
        np.random.default_rng(9), 5, first_id=50_000, start_ns=T0 + 2 * HOUR, span_ns=HOUR
    )
    calldata.load(url, late)
    rep = seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    assert rep.sealed == [("default", T0 + 2 * HOUR)]
    after = manifest.load(lake, "default").hours
    assert after[T0 + 2 * HOUR].rows == before[T0 + 2 * HOUR].rows + 5
    assert seal.seal_pending(url, lake, now_ns=NOW, delay_s=0).sealed == []  # idempotent
    got = query.fetch_calls(url, lake, "default", columns=["trace_id", "span_id"])
    want = analytics.fetch_calls(url, "default", columns=["trace_id", "span_id"])
    assert by_key(got) == by_key(want)


def test_reads_through_the_footer_cache_see_each_reseal(store: tuple[str, Any]) -> None:
    url, lake = store
    con = query.cursor()
    try:  # the process's DuckDB keeps Parquet footers between statements
        assert con.sql("SELECT current_setting('parquet_metadata_cache')").fetchall() == [(True,)]
    finally:
        con.close()
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    cols = ["trace_id", "span_id", "output_tokens"]
    for i in range(4):  # read (footers cached), re-seal the hour within the same second, read
        got = query.fetch_calls(url, lake, "default", columns=cols)
        assert by_key(got) == by_key(analytics.fetch_calls(url, "default", columns=cols))
        late = calldata.rows(
            np.random.default_rng(20 + i), 3 + 40 * i, first_id=60_000 + 1000 * i,
            start_ns=T0 + HOUR, span_ns=HOUR,
        )  # fmt: skip
        calldata.load(url, late)
        assert seal.seal_pending(url, lake, now_ns=NOW, delay_s=0).sealed == [
            ("default", T0 + HOUR)
        ]
    got = query.fetch_calls(url, lake, "default", columns=cols)
    assert by_key(got) == by_key(analytics.fetch_calls(url, "default", columns=cols))


def test_crash_mid_seal_leaves_no_visible_half_file(store: tuple[str, Any]) -> None:
    url, lake = store
    seal.seal_pending(url, lake, now_ns=T0 + 2 * HOUR + 60 * 10**9, delay_s=0)  # hours 0, 1
    # A crash while hour 2 was being written: a partial temporary file, no manifest entry.
    part = lake.partition_dir("calls", "default", T0 + 2 * HOUR)
    os.makedirs(part)
    with open(f"{part}/.data.parquet.deadbeef.tmp", "wb") as fh:
        fh.write(b"PAR1\x00\x01half")
    root = f"{lake.root}/calls/v1"
    n = duckdb.sql(f"SELECT count(*) FROM '{root}/tenant=default/**/*.parquet'").fetchall()
    assert n[0][0] == sum(e.rows for e in manifest.load(lake, "default").hours.values())
    got = query.fetch_calls(url, lake, "default", columns=["trace_id", "span_id"])
    want = analytics.fetch_calls(url, "default", columns=["trace_id", "span_id"])
    assert by_key(got) == by_key(want)
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)  # the next run seals hour 2 over it
    assert T0 + 2 * HOUR in manifest.load(lake, "default").hours


def test_retention_deletes_partitions(store: tuple[str, Any]) -> None:
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    now = T0 + 86_400 * 10**9 + 3 * HOUR  # 1 day + 3 h after hour 0 started
    assert (
        seal.apply_retention(lake, {"default": 1}, now_ns=now) == 3
    )  # hours 0, 1, 2 end <= cutoff
    left = sorted(manifest.load(lake, "default").hours)
    assert left == [T0 + k * HOUR for k in range(3, 6)]
    assert not os.path.exists(lake.partition_dir("calls", "default", T0))
    left_summaries = duckdb.sql(
        f"SELECT DISTINCT hour_ns FROM '{lake.summary_path('default', T0)}' ORDER BY 1"
    ).fetchall()
    assert [h for (h,) in left_summaries] == left
    left_rollups = duckdb.sql(
        f"SELECT DISTINCT hour_ns FROM '{lake.rollup_path('default', T0)}' ORDER BY 1"
    ).fetchall()
    assert [h for (h,) in left_rollups] == left
    assert os.path.exists(lake.partition_dir("calls", "default", T0 + 3 * HOUR))


STAT_KEYS = ("source", "quantile_relative_error")


def _close(got: dict[str, Any], want: dict[str, Any], rel: float) -> None:
    for k, v in want.items():
        g = got[k]
        if v is None or isinstance(v, int | str):
            assert g == v, k
        elif k.endswith(("_p50", "_p95", "_p99")):
            assert g == pytest.approx(v, rel=rel, abs=1e-6), k
        else:
            assert g == pytest.approx(v, rel=1e-9, abs=1e-12), k


@pytest.mark.parametrize(
    "kw",
    [
        {"group_by": ["model"]},
        {"group_by": ["model", "variant"], "bucket_s": 3600},
        {
            "group_by": ["service"],
            "bucket_s": 7200,
            "since_ns": T0 + 1800 * 10**9,
            "until_ns": T0 + 5 * HOUR + 7,
        },
        {"group_by": ["variant"], "filters": {"model": "gpt-4o"}, "since_ns": T0},
    ],
)
def test_stats_raw_equal_store_and_summary_within_bound(
    store: tuple[str, Any], kw: dict[str, Any]
) -> None:
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    want = analytics.call_stats(url, "default", **kw)
    raw = stats.call_stats(url, lake, "default", source="raw", **kw)
    summ = stats.call_stats(url, lake, "default", source="summary", **kw)
    auto = stats.call_stats(url, lake, "default", **kw)
    assert {r["source"] for r in raw} == {"raw"} and {r["source"] for r in summ} == {"summary"}
    coarse = kw.get("bucket_s") is None  # auto: summaries for no bucket / a day or more
    hourly = kw.get("bucket_s") == 3600  # auto: exact rollups of the sealed hours
    expect = {"summary"} if coarse else {"rollup", "raw"} if hourly else {"raw"}
    assert {r["source"] for r in auto} == expect
    assert summ[0]["quantile_relative_error"] == 0.01
    assert len(raw) == len(want) == len(summ) == len(auto)
    for r, s, a, w in zip(raw, summ, auto, want, strict=True):
        _close(r, w, rel=1e-9)
        _close(s, w, rel=0.01)
        _close(a, w, rel=0.01 if coarse else 1e-9)


@pytest.mark.parametrize(
    "kw",
    [
        {"group_by": ["model"]},
        {"group_by": ["model", "variant", "service"]},
        {"group_by": [], "since_ns": T0 + 1800 * 10**9, "until_ns": T0 + 4 * HOUR + 7},
        {"group_by": ["variant"], "filters": {"model": "gpt-4o"}, "since_ns": T0 + HOUR},
        {"group_by": ["rollout"], "filters": {"variant": "candidate", "service": "chat-api"}},
    ],
)
def test_stats_hourly_from_rollups_are_exact(store: tuple[str, Any], kw: dict[str, Any]) -> None:
    """Hourly buckets: sealed whole hours come from their rollup rows, the edge hours cut by
    the range and the unsealed hour 6 from raw calls; every figure equals the store's."""
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    kw = kw | {"bucket_s": 3600}
    want = analytics.call_stats(url, "default", **kw)
    got = stats.call_stats(url, lake, "default", **kw)
    assert len(got) == len(want) > 0
    sealed = set(manifest.load(lake, "default").sealed_in(kw.get("since_ns"), kw.get("until_ns")))
    for g, w in zip(got, want, strict=True):
        start = w["bucket_start_unix_s"]
        whole = start is not None and int(start * 10**9) in sealed
        assert g["source"] == ("rollup" if whole else "raw"), start
        assert g["quantile_relative_error"] == 0.0
        for k, v in w.items():  # percentiles bit-identical; sums up to summation order
            if isinstance(v, float) and not k.endswith(("_p50", "_p95", "_p99")):
                assert g[k] == pytest.approx(v, rel=1e-12), k
            else:
                assert g[k] == v, k
    assert {g["source"] for g in got} == {"rollup", "raw"}


def test_reseal_replaces_the_rollups_read(store: tuple[str, Any]) -> None:
    """Rollup month files are kept in memory between requests; a late span's re-seal replaces
    the file and the next answer counts it."""
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    kw: dict[str, Any] = {"group_by": ["model"], "bucket_s": 3600}
    first = stats.call_stats(url, lake, "default", **kw)
    late = calldata.rows(
        np.random.default_rng(9), 5, first_id=50_000, start_ns=T0 + 2 * HOUR, span_ns=HOUR
    )
    calldata.load(url, late)
    assert seal.seal_pending(url, lake, now_ns=NOW, delay_s=0).sealed == [
        ("default", T0 + 2 * HOUR)
    ]
    got = stats.call_stats(url, lake, "default", **kw)
    assert sum(g["count"] for g in got) == sum(f["count"] for f in first) + 5
    want = analytics.call_stats(url, "default", **kw)
    assert [g["source"] for g in got] == [f["source"] for f in first]
    for g, w in zip(got, want, strict=True):
        _close(g, w, rel=1e-9)


def test_api_names_each_rows_source_and_error_bound(store: tuple[str, Any]) -> None:
    """``GET /api/v1/stats`` says per row what answered it: ``rollup`` / ``raw`` (exact, error
    0.0) by default for hourly buckets, ``summary`` (0.01) when asked for."""
    from fastapi.testclient import TestClient

    from driftline.app import create_app
    from tests.conftest import make_settings

    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    settings = make_settings(
        url, lake_url=lake.url, grpc_enabled=False, scheduler_enabled=False, auto_migrate=False
    )
    params = {"group_by": "model,bucket", "bucket": "1h", "since": str(T0 // 10**9)}
    with TestClient(create_app(settings)) as client:
        auto = client.get("/api/v1/stats", params=params).json()["items"]
        summ = client.get("/api/v1/stats", params=params | {"source": "summary"}).json()["items"]
    assert {(r["source"], r["quantile_relative_error"]) for r in auto} == {
        ("rollup", 0.0),
        ("raw", 0.0),
    }
    assert {(r["source"], r["quantile_relative_error"]) for r in summ} == {("summary", 0.01)}
    assert [r["count"] for r in auto] == [r["count"] for r in summ]


def test_hours_sealed_without_rollups_are_read_raw(store: tuple[str, Any]) -> None:
    """A lake sealed before rollups existed (no rollup file) still answers exactly, raw."""
    url, lake = store
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    lake.fs.rm(lake.rollup_path("default", T0))
    kw: dict[str, Any] = {"group_by": ["model"], "bucket_s": 3600}
    got = stats.call_stats(url, lake, "default", **kw)
    assert {g["source"] for g in got} == {"raw"}
    want = analytics.call_stats(url, "default", **kw)
    for g, w in zip(got, want, strict=True):
        _close(g, w, rel=1e-9)


def test_stats_summary_refused_when_not_answerable(store: tuple[str, Any]) -> None:
    url, lake = store
    with pytest.raises(ValueError, match="source"):
        stats.call_stats(url, lake, "default", group_by=["model"], bucket_s=60, source="summary")
    rows = stats.call_stats(url, lake, "default", group_by=["model"], bucket_s=60)
    assert {r["source"] for r in rows} == {"raw"}


def test_default_lake_is_one_per_store(tmp_path: Path) -> None:
    """Two stores never share a default lake: a collector on database B read the hours that a
    collector on database A had sealed into ./driftline-data/lake (wrong stats on B)."""
    pg = "postgresql+psycopg://postgres@127.0.0.1:5432/"
    assert layout.default_lake_url(pg + "a") != layout.default_lake_url(pg + "b")
    assert layout.default_lake_url(f"sqlite:///{tmp_path}/x.db") == f"{tmp_path}/x.db-lake"
    assert layout.default_lake_url(f"sqlite:///{tmp_path}/x.db") != layout.default_lake_url(
        f"sqlite:///{tmp_path}/x.previous.db"
    )
    schema = pg + "a?options=-csearch_path%3Dother"
    assert layout.default_lake_url(schema) != layout.default_lake_url(pg + "a")
