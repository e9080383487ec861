"""The vectorised chart aggregations of :mod:`dashboard.stats` against plain per-bucket, per-row
references (the implementations they replaced), on frames with unknown values, categoricals
and text with odd spacing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collector.store import callstats
from dashboard import stats

N = 5_000
T0_NS = 1_767_225_600 * 10**9


def tokens(rng: np.random.Generator, missing: float) -> pd.api.extensions.ExtensionArray:
    """Token counts 1..98 as nullable floats, a fraction ``missing`` of them unknown."""
    values = rng.integers(1, 99, N).astype("float64")
    return pd.array(np.where(rng.random(N) < missing, np.nan, values), dtype="Float64")


def frame(categorical: bool) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    df = pd.DataFrame(
        {
            "start_unix_nano": T0_NS + rng.integers(0, 3 * 86_400 * 10**9, N),
            "model": rng.choice(np.array(["a", "b", None, "c"], dtype=object), N),
            "variant": rng.choice(np.array(["x", None, "y"], dtype=object), N),
            "status": rng.choice(np.array(["ok", "error", None], dtype=object), N),
            "error_type": rng.choice(
                np.array(["429", " Timeout", None, "rate_limited", "x"], dtype=object), N
            ),
            "input_tokens": tokens(rng, 0.1),
            "output_tokens": tokens(rng, 0.2),
            **{
                m: np.where(rng.random(N) < 0.3, np.nan, rng.random(N))
                for m in stats.LATENCY_METRICS
            },
            "cost_usd": np.where(rng.random(N) < 0.3, np.nan, rng.random(N)),
            "gpu_cost_usd": np.where(rng.random(N) < 0.5, np.nan, rng.random(N)),
            "is_unpriced": (rng.random(N) < 0.2).astype("int64"),
        }
    )
    if categorical:
        for c in ("model", "variant", "status", "error_type"):
            df[c] = df[c].astype("category")
    return df


def label(df: pd.DataFrame, by: tuple[str, ...]) -> pd.Series:
    if not by:
        return pd.Series("all", index=df.index)
    parts = [df[c].astype("object").where(df[c].notna(), "?").astype(str) for c in by]
    out = parts[0]
    for p in parts[1:]:
        out = out + " / " + p
    return out


def reference_percentiles(df: pd.DataFrame, bucket_s: int, by: tuple[str, ...]) -> pd.DataFrame:
    step = bucket_s * 10**9
    b = df.assign(
        bucket=pd.to_datetime(df["start_unix_nano"] // step * step, unit="ns", utc=True),
        group=label(df, by),
    )
    frames = []
    for m in stats.LATENCY_METRICS:
        g = b.dropna(subset=[m]).groupby(["bucket", "group"])[m]
        for q in stats.QUANTILES:
            part = g.quantile(q).rename("value_s").to_frame()
            part["n"] = g.count()
            part["metric"] = m
            part["quantile"] = f"p{round(q * 100):d}"
            frames.append(part.reset_index())
    return pd.concat(frames, ignore_index=True)[
        ["bucket", "group", "metric", "quantile", "value_s", "n"]
    ]


@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("by", [(), ("model",), ("model", "variant")])
def test_percentiles_over_time_match_the_per_group_quantiles(
    categorical: bool, by: tuple[str, ...]
) -> None:
    df = frame(categorical)
    got = stats.percentiles_over_time(df, 3600, by=by)
    pd.testing.assert_frame_equal(
        got, reference_percentiles(df, 3600, by), check_dtype=False, rtol=1e-12
    )


@pytest.mark.parametrize("categorical", [False, True])
def test_traffic_over_time_matches_the_per_bucket_loop(categorical: bool) -> None:
    df = frame(categorical)
    got = stats.traffic_over_time(df, 3600)
    step = 3600 * 10**9
    for _, row in got.iterrows():
        lo = int(row["bucket"].value)
        g = df[(df["start_unix_nano"] >= lo) & (df["start_unix_nano"] < lo + step)]
        assert row["calls"] == len(g)
        assert row["error_rate"] == pytest.approx(float((g["status"] == "error").mean()))
        limited = g["error_type"].astype("object").map(callstats.is_rate_limited)
        assert row["rate_limited_rate"] == pytest.approx(float(limited.mean()))
        known = g["input_tokens"].notna() | g["output_tokens"].notna()
        tokens = (g["input_tokens"].fillna(0) + g["output_tokens"].fillna(0))[known].sum()
        assert row["tokens_per_s"] == pytest.approx(float(tokens) / 3600)
        assert row["cost_usd"] == pytest.approx(float(g["cost_usd"].sum()))
        for m in ("ttft_s", "tpot_s"):
            for q in stats.QUANTILES:
                want = g[m].dropna().quantile(q)
                assert row[f"{m}_p{round(q * 100)}"] == pytest.approx(want, rel=1e-12)
    assert got["calls"].sum() == N


def test_summary_quantiles_and_unpriced() -> None:
    df = frame(True)
    s = stats.summarize(df, 3600.0)
    for q in stats.QUANTILES:
        assert s.ttft_s[f"p{round(q * 100)}"] == df["ttft_s"].dropna().quantile(q)
    assert s.unpriced_calls == int(df["is_unpriced"].sum())
    flags = df.drop(columns="is_unpriced").assign(
        flags=[["unpriced"] if u else [] for u in df["is_unpriced"]]
    )
    assert stats.summarize(flags, 3600.0).unpriced_calls == s.unpriced_calls
    none = stats.summarize(df.assign(ttft_s=math.nan), 3600.0)
    assert none.ttft_s == {"p50": None, "p95": None, "p99": None}


def test_is_rate_limited_decides_each_value_like_callstats() -> None:
    values = pd.Series(["429", " RATE_LIMITED ", None, "timeout", "429"], dtype="category")
    want = [callstats.is_rate_limited(v) for v in values.astype("object")]
    assert stats.is_rate_limited(values).tolist() == want


@pytest.mark.parametrize("by", [("model",), ("model", "variant")])
def test_cost_per_1k_matches_the_grouped_reference(by: tuple[str, ...]) -> None:
    df = frame(True)
    got = stats.cost_per_1k_over_time(df, 3600, by)
    step = 3600 * 10**9
    b = df.assign(
        bucket=pd.to_datetime(df["start_unix_nano"] // step * step, unit="ns", utc=True),
        group=label(df, by),
        usd=df[["cost_usd", "gpu_cost_usd"]].sum(axis=1, min_count=1),
        tokens=df["input_tokens"].fillna(0) + df["output_tokens"].fillna(0),
    )
    g = b.groupby(["bucket", "group"]).agg(
        usd=("usd", lambda s: s.sum(min_count=1)), tokens=("tokens", "sum")
    )
    g["usd_per_1k_tokens"] = (g["usd"] / (g["tokens"] / 1000.0)).where(g["tokens"] > 0)
    want = g.dropna(subset=["usd_per_1k_tokens"]).reset_index()[list(got.columns)]
    pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12)
