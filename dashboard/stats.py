"""Aggregations of call frames for the charts (pure pandas, no I/O).

Input frames come from :func:`dashboard.queries.calls_frame` (one row per call). Rates are per
second of wall time, latencies seconds, money USD, token counts tokens. Percentiles are the
linear-interpolation sample quantiles (Hyndman & Fan 1996, definition 7; numpy's default) over
the calls whose value is known: a NULL latency is skipped, never read as 0, and a bucket or
group without any known value yields NaN ("no data"), not 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from collector.store import callstats


def is_rate_limited(error_type: pd.Series) -> pd.Series:
    """Per call: :func:`collector.store.callstats.is_rate_limited` of its ``error_type``."""
    return error_type.astype("object").map(callstats.is_rate_limited)


LATENCY_METRICS = ("ttft_s", "tpot_s", "queue_s", "prefill_s", "decode_s", "e2e_s")
QUANTILES = (0.5, 0.95, 0.99)
_NICE_BUCKETS_S = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86400)


def bucket_size_s(range_s: float, max_buckets: int = 90) -> int:
    """The smallest "nice" bucket (seconds) cutting ``range_s`` into at most ``max_buckets``.

    Raises:
        ValueError: ``range_s`` or ``max_buckets`` not positive.
    """
    if not range_s > 0:
        raise ValueError("range_s must be positive")
    if max_buckets < 1:
        raise ValueError("max_buckets must be at least 1")
    for b in _NICE_BUCKETS_S:
        if range_s / b <= max_buckets:
            return b
    return _NICE_BUCKETS_S[-1]


def with_bucket(df: pd.DataFrame, bucket_s: int, column: str = "start_unix_nano") -> pd.DataFrame:
    """``df`` plus a ``bucket`` column: the UTC start of its ``bucket_s`` window (datetime)."""
    if bucket_s < 1:
        raise ValueError("bucket_s must be at least 1")
    out = df.copy()
    step = bucket_s * 1_000_000_000
    out["bucket"] = pd.to_datetime((out[column] // step) * step, unit="ns", utc=True)
    return out


def group_label(df: pd.DataFrame, by: Sequence[str]) -> pd.Series:
    """One text label per row joining the ``by`` columns (``"?"`` for an unknown value)."""
    if not by:
        return pd.Series(["all"] * len(df), index=df.index, dtype="object")
    parts = [df[c].astype("object").where(df[c].notna(), "?").astype(str) for c in by]
    label = parts[0]
    for p in parts[1:]:
        label = label + " / " + p
    return label


def percentiles_over_time(
    df: pd.DataFrame,
    bucket_s: int,
    *,
    by: Sequence[str] = ("model", "variant"),
    metrics: Sequence[str] = LATENCY_METRICS,
    quantiles: Sequence[float] = QUANTILES,
) -> pd.DataFrame:
    """Long frame ``bucket, group, metric, quantile ("p95"), value_s, n`` per time bucket.

    ``n`` counts the calls with a known value; rows with ``n == 0`` are left out.
    """
    cols = ["bucket", "group", "metric", "quantile", "value_s", "n"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    b = with_bucket(df, bucket_s)
    b["group"] = group_label(b, by)
    frames = []
    for m in metrics:
        g = b.dropna(subset=[m]).groupby(["bucket", "group"])[m]
        if g.ngroups == 0:
            continue
        n = g.count()
        for q in quantiles:
            part = g.quantile(q).rename("value_s").to_frame()
            part["n"] = n
            part["metric"] = m
            part["quantile"] = f"p{round(q * 100):d}"
            frames.append(part.reset_index())
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def _quantile(s: pd.Series, q: float) -> float:
    s = s.dropna()
    return float(s.quantile(q)) if len(s) else math.nan


def traffic_over_time(df: pd.DataFrame, bucket_s: int) -> pd.DataFrame:
    """Per bucket: ``requests_per_s``, ``error_rate``, ``rate_limited_rate`` (fractions of calls),
    ``tokens_per_s`` (input + output tokens / s), ``cost_usd``, and TTFT/TPOT p50/p95/p99 (s)."""
    cols = [
        "bucket",
        "calls",
        "requests_per_s",
        "error_rate",
        "rate_limited_rate",
        "tokens_per_s",
        "cost_usd",
        *(f"{m}_p{round(q * 100)}" for m in ("ttft_s", "tpot_s") for q in QUANTILES),
    ]
    if df.empty:
        return pd.DataFrame(columns=cols)
    b = with_bucket(df, bucket_s)
    rows = []
    for bucket, g in b.groupby("bucket"):
        tokens = g["input_tokens"].fillna(0) + g["output_tokens"].fillna(0)
        known_tokens = g["input_tokens"].notna() | g["output_tokens"].notna()
        row = {
            "bucket": bucket,
            "calls": len(g),
            "requests_per_s": len(g) / bucket_s,
            "error_rate": float((g["status"] == "error").mean()),
            "rate_limited_rate": float(is_rate_limited(g["error_type"]).mean()),
            "tokens_per_s": float(tokens[known_tokens].sum()) / bucket_s
            if known_tokens.any()
            else math.nan,
            "cost_usd": float(g["cost_usd"].sum()) if g["cost_usd"].notna().any() else math.nan,
        }
        for m in ("ttft_s", "tpot_s"):
            for q in QUANTILES:
                row[f"{m}_p{round(q * 100)}"] = _quantile(g[m], q)
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """Headline numbers of a window; None when unknown (no calls or no known values).

    Rates per second of the window; fractions in [0, 1]; latencies seconds; USD.
    """

    calls: int
    requests_per_s: float
    error_rate: float | None
    rate_limited_rate: float | None
    ttft_s: dict[str, float | None]
    tpot_s: dict[str, float | None]
    tokens_per_s: float | None
    cost_usd: float | None
    unpriced_calls: int


def _opt(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def observed_span_s(df: pd.DataFrame, since_ns: int, until_ns: int, floor_s: float = 1.0) -> float:
    """Seconds over which the selection's calls were observed: from its first call's start (not
    the range's start: a 5-minute demo in a 24 h range is 5 minutes of traffic) to the end of
    the range, at least ``floor_s``; the whole range without calls."""
    if df.empty or "start_unix_nano" not in df:
        return (until_ns - since_ns) / 1e9
    first = max(int(df["start_unix_nano"].min()), since_ns)
    return max((until_ns - first) / 1e9, floor_s)


def summarize(df: pd.DataFrame, window_s: float) -> TrafficSummary:
    """Headline numbers of the calls in ``df`` over a window of ``window_s`` seconds.

    Raises:
        ValueError: ``window_s`` not positive.
    """
    if not window_s > 0:
        raise ValueError("window_s must be positive")
    n = len(df)
    if n == 0:
        empty: dict[str, float | None] = {f"p{round(q * 100)}": None for q in QUANTILES}
        return TrafficSummary(0, 0.0, None, None, empty, dict(empty), None, None, 0)
    known_tokens = df["input_tokens"].notna() | df["output_tokens"].notna()
    tokens = (df["input_tokens"].fillna(0) + df["output_tokens"].fillna(0))[known_tokens]
    return TrafficSummary(
        calls=n,
        requests_per_s=n / window_s,
        error_rate=float((df["status"] == "error").mean()),
        rate_limited_rate=float(is_rate_limited(df["error_type"]).mean()),
        ttft_s={f"p{round(q * 100)}": _opt(_quantile(df["ttft_s"], q)) for q in QUANTILES},
        tpot_s={f"p{round(q * 100)}": _opt(_quantile(df["tpot_s"], q)) for q in QUANTILES},
        tokens_per_s=float(tokens.sum()) / window_s if known_tokens.any() else None,
        cost_usd=float(df["cost_usd"].sum()) if df["cost_usd"].notna().any() else None,
        unpriced_calls=int(df["flags"].map(lambda f: "unpriced" in (f or [])).sum()),
    )


def cost_breakdown(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group: calls, tokens, priced ``cost_usd``, ``gpu_cost_usd`` (amortised), their sum,
    ``usd_per_1k_tokens`` = total / (tokens / 1000), and ``unpriced_calls``.

    Sums skip unknown costs; a group without any known cost has NaN, not 0.
    """
    cols = [
        *by,
        "calls",
        "tokens",
        "cost_usd",
        "gpu_cost_usd",
        "total_usd",
        "usd_per_1k_tokens",
        "unpriced_calls",
    ]
    if df.empty:
        return pd.DataFrame(columns=cols)
    d = df.copy()
    for c in by:
        d[c] = d[c].astype("object").where(d[c].notna(), "?")
    d["tokens"] = d["input_tokens"].fillna(0) + d["output_tokens"].fillna(0)
    d["unpriced"] = d["flags"].map(lambda f: "unpriced" in (f or []))
    g = d.groupby(list(by), dropna=False)
    out = pd.DataFrame(
        {
            "calls": g.size(),
            "tokens": g["tokens"].sum().astype("float64"),
            "cost_usd": g["cost_usd"].sum(min_count=1),
            "gpu_cost_usd": g["gpu_cost_usd"].sum(min_count=1),
            "unpriced_calls": g["unpriced"].sum().astype("int64"),
        }
    )
    out["total_usd"] = out[["cost_usd", "gpu_cost_usd"]].sum(axis=1, min_count=1)
    per_k = out["total_usd"] / (out["tokens"] / 1000.0)
    out["usd_per_1k_tokens"] = per_k.where(out["tokens"] > 0)
    return out.reset_index()[cols].sort_values("total_usd", ascending=False, na_position="last")


def cost_per_1k_over_time(df: pd.DataFrame, bucket_s: int, by: Sequence[str]) -> pd.DataFrame:
    """Long frame ``bucket, group, usd_per_1k_tokens`` (priced + GPU-amortised USD / 1k tokens)."""
    cols = ["bucket", "group", "usd_per_1k_tokens"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    b = with_bucket(df, bucket_s)
    b["group"] = group_label(b, by)
    b["usd"] = b[["cost_usd", "gpu_cost_usd"]].sum(axis=1, min_count=1)
    b["tokens"] = b["input_tokens"].fillna(0) + b["output_tokens"].fillna(0)
    g = b.groupby(["bucket", "group"]).agg(
        usd=("usd", lambda s: s.sum(min_count=1)), tokens=("tokens", "sum")
    )
    g["usd_per_1k_tokens"] = (g["usd"] / (g["tokens"] / 1000.0)).where(g["tokens"] > 0)
    return g.dropna(subset=["usd_per_1k_tokens"]).reset_index()[cols]


def feedback_rates(
    calls: pd.DataFrame, feedback: pd.DataFrame, by: str = "variant"
) -> pd.DataFrame:
    """Per ``by`` value: calls, and for each feedback kind the events per 100 calls.

    Feedback is attributed through its linked ``trace_id`` (pending events are not counted).
    """
    if calls.empty:
        return pd.DataFrame(columns=[by, "calls"])
    c = calls[["trace_id", by]].copy()
    c[by] = c[by].astype("object").where(c[by].notna(), "?")
    n = c.groupby(by).size().rename("calls")
    if feedback.empty:
        return n.reset_index()
    f = feedback.dropna(subset=["trace_id"]).merge(c.drop_duplicates("trace_id"), on="trace_id")
    if f.empty:
        return n.reset_index()
    counts = f.pivot_table(index=by, columns="kind", values="feedback_id", aggfunc="count")
    rates = counts.div(n, axis=0).mul(100.0)
    rates.columns = [f"{k}_per_100_calls" for k in rates.columns]
    return pd.concat([n, rates], axis=1).reset_index()


def active_counts(
    starts: pd.Series, ends: pd.Series, since_ns: int, until_ns: int, points: int = 30
) -> list[float]:
    """How many intervals ``[start, end)`` are open at ``points`` evenly spaced instants of
    ``[since_ns, until_ns]`` (UTC datetimes; a missing start never counts, a missing end is
    still open). Used for "firing alerts" / "running rollouts" sparklines."""
    if points < 2:
        raise ValueError("points must be at least 2")
    grid = pd.to_datetime(
        [since_ns + (until_ns - since_ns) * i // (points - 1) for i in range(points)],
        unit="ns",
        utc=True,
    )
    s = pd.to_datetime(starts, utc=True)
    e = pd.to_datetime(ends, utc=True)
    out = []
    for t in grid:
        open_ = s.notna() & (s <= t) & (e.isna() | (e > t))
        out.append(float(open_.sum()))
    return out
