"""The chart aggregations computed in DuckDB (:mod:`dashboard.sqlstats`) against the pandas ones
they replaced (:mod:`dashboard.stats` over the call frame :func:`dashboard.data.calls` reads),
on one partly sealed SQLite store: same columns, dtypes, row order and values (USD sums to
1e-12 relative: DuckDB may add in another order)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.lake import layout
from collector.lake import stats as lake_stats
from dashboard import data, sqlstats, stats
from tests.dashboard.sqlstore import HOUR, NOW, ODD_ERRORS, RANGES, T0, make_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, layout.Lake]]:
    yield from make_store(tmp_path_factory)


def assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        got.reset_index(drop=True),
        want.reset_index(drop=True),
        check_exact=False,
        rtol=1e-12,
        atol=0,
    )


def same_value(got: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-12)
    return bool(got == want)


@pytest.mark.parametrize("k", range(len(RANGES)))
def test_traffic_matches_the_frame_path(store: tuple[str, layout.Lake], k: int) -> None:
    url, lake = store
    since, until, flt = RANGES[k]
    df = data.calls(url, "default", since, until, flt)
    bucket = stats.bucket_size_s((until - since) / 1e9, max_buckets=60)
    want_summary = stats.summarize(df, stats.observed_span_s(df, since, until))
    got_summary, got = sqlstats.traffic(url, lake, "default", since, until, dict(flt), bucket)
    for f in dataclasses.fields(stats.TrafficSummary):
        g, w = getattr(got_summary, f.name), getattr(want_summary, f.name)
        assert type(g) is type(w) and same_value(g, w), (f.name, g, w)
    if not df.empty:
        assert got_summary.rate_limited_rate  # the odd spellings count
    want = stats.traffic_over_time(df, bucket)
    if df.empty:
        assert got.empty and list(got.columns) == list(want.columns)
    else:
        assert_same(got, want)


@pytest.mark.parametrize("k", range(len(RANGES)))
@pytest.mark.parametrize("by", [("model", "variant"), ("model",), ()])
def test_percentiles_match_the_frame_path(
    store: tuple[str, layout.Lake], k: int, by: tuple[str, ...]
) -> None:
    url, lake = store
    since, until, flt = RANGES[k]
    df = data.calls(url, "default", since, until, flt)
    want = stats.percentiles_over_time(df, 1800, by=by)
    got = sqlstats.percentiles_over_time(url, lake, "default", since, until, dict(flt), 1800, by)
    if want.empty:
        assert got.empty and list(got.columns) == list(want.columns)
    else:
        assert_same(got, want)


def test_percentiles_of_some_metrics_are_those_rows_of_all(
    store: tuple[str, layout.Lake],
) -> None:
    """Asking for a subset of the latencies gives exactly their rows of the full frame."""
    url, lake = store
    since, until, flt = RANGES[1]
    full = sqlstats.percentiles_over_time(url, lake, "default", since, until, dict(flt), 1800)
    for metrics in (["ttft_s"], ["e2e_s", "queue_s"]):
        got = sqlstats.percentiles_over_time(
            url, lake, "default", since, until, dict(flt), 1800, metrics=metrics
        )
        want = full[full["metric"].isin(metrics)].reset_index(drop=True)
        assert not want.empty
        assert_same(got.reset_index(drop=True), want)
    for bad in ([], ["ttft_s", "nope"]):
        with pytest.raises(ValueError, match="metrics"):
            sqlstats.percentiles_over_time(
                url, lake, "default", since, until, {}, 1800, metrics=bad
            )


@pytest.mark.parametrize("k", range(len(RANGES) - 1))
@pytest.mark.parametrize(
    "by", [("model", "variant"), ("tenant", "model"), ("service_name",), ("variant",)]
)
def test_cost_matches_the_frame_path(
    store: tuple[str, layout.Lake], k: int, by: tuple[str, ...]
) -> None:
    url, lake = store
    since, until, _flt = RANGES[k]
    tenants = ("default", "other/team") if "tenant" in by else ("default",)
    frames = [data.calls(url, t, since, until).assign(tenant=t) for t in tenants]
    df = pd.concat(frames, ignore_index=True)
    got_table, got_trend = sqlstats.cost(url, lake, tenants, since, until, by, 1800)
    assert_same(got_table, stats.cost_breakdown(df, by))
    assert_same(got_trend, stats.cost_per_1k_over_time(df, 1800, by))
    assert got_table["gpu_cost_usd"].notna().any() and got_table["unpriced_calls"].sum() > 0


def test_cost_of_an_empty_window_is_empty(store: tuple[str, layout.Lake]) -> None:
    url, lake = store
    table, trend = sqlstats.cost(
        url, lake, ("default",), NOW + HOUR, NOW + 2 * HOUR, ("model",), 60
    )
    assert table.empty and trend.empty
    assert list(table.columns) == list(stats.cost_breakdown(pd.DataFrame(), ("model",)).columns)


@pytest.mark.parametrize("k", range(len(RANGES) - 1))
def test_variant_counts_match_feedback_rates_without_events(
    store: tuple[str, layout.Lake], k: int
) -> None:
    url, lake = store
    since, until, _flt = RANGES[k]
    df = data.calls(url, "default", since, until, columns=("variant",))
    want = stats.feedback_rates(df, pd.DataFrame(), "variant")
    got = sqlstats.variant_counts(url, lake, "default", since, until)
    pd.testing.assert_frame_equal(got, want)


def test_rate_limited_sql_decides_like_callstats(store: tuple[str, layout.Lake]) -> None:
    """The SQL rule and the Python rule agree value by value (including unicode spaces)."""
    url, lake = store
    from collector.lake import aggregate
    from collector.store import callstats

    sql = (
        f"SELECT DISTINCT error_type, {sqlstats.RATE_LIMITED_SQL} AS limited FROM calls "
        "ORDER BY error_type NULLS LAST"
    )
    got = aggregate.aggregate_calls(
        url, lake, ["default"], sql, since_ns=T0, until_ns=NOW, columns=["error_type"]
    ).to_pylist()
    assert {r["error_type"] for r in got} >= set(ODD_ERRORS) | {None}
    for r in got:
        assert r["limited"] == callstats.is_rate_limited(r["error_type"]), r


@pytest.mark.parametrize("k", range(len(RANGES) - 1))
def test_engine_latency_matches_call_stats_by_model_and_bucket(
    store: tuple[str, layout.Lake], k: int
) -> None:
    """The Latency page's ITL / engine TTFT chart: what it built from ``call_stats`` rows."""
    url, lake = store
    since, until, _flt = RANGES[k]
    rows = lake_stats.call_stats(
        url,
        lake,
        "default",
        source="raw",
        group_by=["model"],
        since_ns=since,
        until_ns=until,
        bucket_s=1800,
    )
    want = pd.DataFrame(
        [
            {
                "bucket": pd.to_datetime(r["bucket_start_unix_s"], unit="s", utc=True),
                "group": f"{r['model'] or '?'} {label}",
                "quantile": p,
                "value_ms": r[f"{f}_{p}"] * 1000.0,
            }
            for r in rows
            for label, f in sqlstats.ENGINE_SERIES
            for p in ("p50", "p95", "p99")
            if r[f"{f}_{p}"] is not None
        ]
    )
    got = sqlstats.engine_latency_over_time(url, lake, "default", since, until, 1800)
    assert len(got) > 0
    assert_same(got, want)


def test_lake_is_where_the_dashboard_looks(store: tuple[str, layout.Lake]) -> None:
    url, lake = store
    found = data.lake(url)
    assert found is not None and Path(found.root) == Path(lake.root)


#: the per-model latencies of the Latency page's caller-vs-engine table
PAGE_FIELDS = (
    "ttft_s",
    "server_ttft_s",
    "e2e_s",
    "server_e2e_s",
    "gateway_queue_s",
    "queue_s",
    "itl_p50_s",
    "itl_p95_s",
)


@pytest.mark.parametrize("k", range(len(RANGES) - 1))
@pytest.mark.parametrize("metric", ["ttft_s", "e2e_s", "queue_s"])
def test_latency_page_is_its_three_aggregations(
    store: tuple[str, layout.Lake], k: int, metric: str
) -> None:
    """One read gives what the three separate reads gave: the percentiles over time, the
    engine series and ``exact_call_stats`` by model (the keys the page shows), exactly."""
    url, lake = store
    since, until, _flt = RANGES[k]
    got = sqlstats.latency_page(url, lake, "default", since, until, 1800, metric, PAGE_FIELDS)
    want_pct = sqlstats.percentiles_over_time(
        url, lake, "default", since, until, {}, 1800, metrics=(metric,)
    )
    pd.testing.assert_frame_equal(got.percentiles, want_pct)
    pd.testing.assert_frame_equal(
        got.engine, sqlstats.engine_latency_over_time(url, lake, "default", since, until, 1800)
    )
    rows = lake_stats.exact_call_stats(
        url, lake, "default", [(["model"], None)], since_ns=since, until_ns=until
    )[0]
    keys = ["model", *(f"n_{f}" for f in PAGE_FIELDS)]
    keys += [f"{f}_{p}" for f in PAGE_FIELDS for p in ("p50", "p95", "p99")]
    assert got.by_model == [{key: r[key] for key in got.by_model[0]} for r in rows]
    assert set(got.by_model[0]) == set(keys)
    assert len(got.by_model) >= 2 and not got.percentiles.empty and not got.engine.empty


def test_latency_page_of_an_empty_window_is_empty(store: tuple[str, layout.Lake]) -> None:
    url, lake = store
    got = sqlstats.latency_page(
        url, lake, "default", NOW + HOUR, NOW + 2 * HOUR, 60, "ttft_s", PAGE_FIELDS
    )
    assert got.percentiles.empty and got.engine.empty and got.by_model == []
    assert list(got.percentiles.columns) == [
        "bucket",
        "group",
        "metric",
        "quantile",
        "value_s",
        "n",
    ]
    for metric, fields in (("nope", PAGE_FIELDS), ("ttft_s", ()), ("ttft_s", ("prefill_s",))):
        with pytest.raises(ValueError, match=r"metric|fields"):
            sqlstats.latency_page(url, lake, "default", T0, NOW, 60, metric, fields)
