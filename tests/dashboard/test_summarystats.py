"""The Overview's and the Latency page's aggregations answered from the lake's hourly summaries
(:mod:`dashboard.summarystats`) against the exact ones (:mod:`dashboard.sqlstats`) on one partly
sealed store: every count, rate, token and USD sum equal, every percentile within the stated
relative error (1 %), the same rows in the same order; and None wherever summaries cannot
answer, so the page takes the exact path."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from collector.lake import layout, summary
from dashboard import data, sqlstats, stats, summarystats
from tests.dashboard.sqlstore import HOUR, NOW, RANGES, T0, make_store

#: the page's per-model fields (as the Latency page asks for them)
PAGE_FIELDS = ("ttft_s", "server_ttft_s", "e2e_s", "itl_p50_s", "queue_s")
QUANTILE_FIELDS = ("ttft_s", "tpot_s")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, layout.Lake]]:
    yield from make_store(tmp_path_factory)


def within(got: float | None, want: float | None) -> bool:
    """The stated bound: relative 1 % for values of at least 1e-6 s, 1e-6 s absolute below."""
    if got is None or want is None:
        return got is None and want is None
    if math.isnan(want):
        return math.isnan(got)
    return abs(got - want) <= summary.RELATIVE_ERROR * abs(want) + summary.MIN_VALUE


def same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-12) or (math.isnan(got) and math.isnan(want))
    return bool(got == want)


#: ranges with sealed hours inside: whole, cut at both ends mid-hour, filtered on a summary key
SUMMARY_RANGES = [RANGES[0], RANGES[1], RANGES[2], RANGES[4]]


@pytest.mark.parametrize("k", range(len(SUMMARY_RANGES)))
@pytest.mark.parametrize("bucket", [3600, 7200])
def test_traffic_is_exact_but_for_percentiles_within_one_percent(
    store: tuple[str, layout.Lake], k: int, bucket: int
) -> None:
    url, lake = store
    since, until, flt = SUMMARY_RANGES[k]
    want_summary, want = sqlstats.traffic(url, lake, "default", since, until, dict(flt), bucket)
    got = summarystats.traffic(url, lake, "default", since, until, dict(flt), bucket)
    assert got is not None
    got_summary, series = got
    assert got_summary.quantile_relative_error == summary.RELATIVE_ERROR
    assert want_summary.quantile_relative_error == 0.0
    for f in dataclasses.fields(stats.TrafficSummary):
        g, w = getattr(got_summary, f.name), getattr(want_summary, f.name)
        if f.name in QUANTILE_FIELDS:
            assert g.keys() == w.keys() and all(within(g[p], w[p]) for p in w), (f.name, g, w)
        elif f.name != "quantile_relative_error":
            assert type(g) is type(w) and same(g, w), (f.name, g, w)
    assert list(series.columns) == list(want.columns)
    assert (series.dtypes == want.dtypes).all()
    assert series["bucket"].tolist() == want["bucket"].tolist()
    for col in want.columns:
        if col == "bucket":
            continue
        for g, w in zip(series[col].tolist(), want[col].tolist(), strict=True):
            ok = within(g, w) if col.startswith(QUANTILE_FIELDS) else same(g, w)
            assert ok, (col, g, w)
    if k == 0:  # the whole store: percentiles of thousands of calls, not of a handful
        assert got_summary.calls > 1000 and got_summary.ttft_s["p99"] is not None


@pytest.mark.parametrize("k", range(len(SUMMARY_RANGES) - 1))
@pytest.mark.parametrize("metric", ["ttft_s", "e2e_s"])
def test_latency_page_is_exact_but_for_percentiles_within_one_percent(
    store: tuple[str, layout.Lake], k: int, metric: str
) -> None:
    url, lake = store
    since, until, _flt = SUMMARY_RANGES[k]
    args = (url, lake, "default", since, until, 3600, metric, PAGE_FIELDS)
    want = sqlstats.latency_page(*args)
    got = summarystats.latency_page(*args)
    assert got is not None and got.quantile_relative_error == summary.RELATIVE_ERROR
    exact_cols = ["bucket", "group", "metric", "quantile", "n"]
    pd.testing.assert_frame_equal(got.percentiles[exact_cols], want.percentiles[exact_cols])
    assert all(
        within(g, w)
        for g, w in zip(got.percentiles["value_s"], want.percentiles["value_s"], strict=True)
    )
    assert not want.engine.empty
    pd.testing.assert_frame_equal(
        got.engine[["bucket", "group", "quantile"]], want.engine[["bucket", "group", "quantile"]]
    )
    # ms: the bound scales with the unit
    assert np.all(
        np.abs(got.engine["value_ms"] - want.engine["value_ms"])
        <= summary.RELATIVE_ERROR * np.abs(want.engine["value_ms"]) + 1e-3 * summary.MIN_VALUE
    )
    assert [r["model"] for r in got.by_model] == [r["model"] for r in want.by_model]
    for g, w in zip(got.by_model, want.by_model, strict=True):
        assert g.keys() == w.keys()
        for key, value in w.items():
            if key == "model" or key.startswith("n_"):
                assert g[key] == value, (key, g[key], value)
            else:
                assert within(g[key], value), (key, g[key], value)


def test_summaries_cannot_answer_so_the_page_reads_every_call(
    store: tuple[str, layout.Lake],
) -> None:
    url, lake = store
    args: tuple[str, int, int, dict[str, str], int] = ("default", T0, NOW, {}, 3600)
    assert summarystats.traffic(url, None, *args) is None  # no lake
    assert summarystats.traffic(url, lake, "default", T0, NOW, {}, 1800) is None  # half hours
    assert summarystats.traffic(url, lake, "default", T0, NOW, {"status": "ok"}, 3600) is None
    # nothing sealed inside: the range's only hour is in the store
    assert summarystats.traffic(url, lake, "default", T0 + 6 * HOUR, NOW, {}, 3600) is None
    assert (
        summarystats.latency_page(url, lake, "default", T0, NOW, 60, "ttft_s", ("e2e_s",)) is None
    )
    with pytest.raises(ValueError, match="metric"):
        summarystats.latency_page(url, lake, "default", T0, NOW, 3600, "nope", ("e2e_s",))


def test_the_dashboard_answers_from_summaries_unless_asked_for_exact(
    store: tuple[str, layout.Lake],
) -> None:
    """:func:`dashboard.data.traffic` over the dashboard's "Last 7 days" (6-hour buckets):
    summaries by default (and says so), the exact path when asked; the same counts."""
    url, _lake = store
    since, until = NOW - 7 * 86_400 * 10**9, NOW
    fast, _ = data.traffic(url, "default", since, until)
    exact, _ = data.traffic(url, "default", since, until, exact=True)
    assert fast.quantile_relative_error == summary.RELATIVE_ERROR
    assert exact.quantile_relative_error == 0.0
    assert fast.calls == exact.calls > 0 and fast.error_rate == exact.error_rate
    page = data.latency_page(url, "default", since, until, "ttft_s", PAGE_FIELDS)
    assert page.quantile_relative_error == summary.RELATIVE_ERROR
    exact_page = data.latency_page(url, "default", since, until, "ttft_s", PAGE_FIELDS, exact=True)
    assert exact_page.quantile_relative_error == 0.0
    assert [r["n_e2e_s"] for r in page.by_model] == [r["n_e2e_s"] for r in exact_page.by_model]


@pytest.mark.parametrize("k", range(len(SUMMARY_RANGES)))
@pytest.mark.parametrize("by", [("model", "variant"), ("tenant", "model"), ("service_name",)])
def test_cost_from_summaries_is_the_exact_cost(
    store: tuple[str, layout.Lake], k: int, by: tuple[str, ...]
) -> None:
    """Every cost figure is a count or a sum: summaries give the exact breakdown and trend
    (USD to 1e-12 relative: another order of addition)."""
    url, lake = store
    since, until, _flt = SUMMARY_RANGES[k]
    tenants = ("default", "other/team")
    want = sqlstats.cost(url, lake, tenants, since, until, by, 3600)
    got = summarystats.cost(url, lake, tenants, since, until, by, 3600)
    assert got is not None
    for g, w in zip(got, want, strict=True):
        pd.testing.assert_frame_equal(
            g.reset_index(drop=True), w.reset_index(drop=True), check_exact=False, rtol=1e-12
        )
    assert not want[0].empty
    if "tenant" in by and k < 2:  # the other tenant's calls lie in its first three hours
        assert set(want[0]["tenant"]) == set(tenants)
    assert summarystats.cost(url, lake, tenants, since, until, ("operation",), 3600) is None
    assert summarystats.cost(url, lake, tenants, since, until, by, 1800) is None
