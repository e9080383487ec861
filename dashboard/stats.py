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

import numpy as np
import pandas as pd
import pyarrow as pa

from collector.lake import query
from collector.store import callstats


def is_rate_limited(error_type: pd.Series) -> pd.Series:
    """Per call: :func:`collector.store.callstats.is_rate_limited` of its ``error_type``
    (decided once per distinct value, not once per call)."""
    codes, uniques = pd.factorize(error_type.astype("object"), use_na_sentinel=True)
    decided = np.array(
        [callstats.is_rate_limited(u) for u in uniques] + [callstats.is_rate_limited(None)],
        dtype=bool,
    )
    return pd.Series(decided[codes], index=error_type.index)  # code -1 (missing): the last


def is_unpriced(df: pd.DataFrame) -> pd.Series:
    """Per call: whether its flags hold ``unpriced`` (from the derived 0/1 ``is_unpriced``
    column when the frame has it, else from the ``flags`` lists)."""
    if "is_unpriced" in df:
        return df["is_unpriced"].fillna(0).astype(bool)
    return df["flags"].map(lambda f: "unpriced" in (f or [])).astype(bool)


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
    if bucket_s < 1:
        raise ValueError("bucket_s must be at least 1")
    step = bucket_s * 1_000_000_000
    # group on integer codes (one label per group, built after grouping, not per call) and
    # take the percentiles in DuckDB: quantile_cont is the same linear interpolation
    # (definition 7), over the known values only
    gid, labels = _group_codes(df, by)
    frame = pa.table(
        {
            "bucket_ns": (df["start_unix_nano"].to_numpy(dtype="int64") // step) * step,
            "gid": gid,
            **{  # NaN (unknown) as null: skipped by count and quantile_cont
                m: pa.array(df[m].to_numpy(dtype="float64", na_value=np.nan), from_pandas=True)
                for m in metrics
            },
        }
    )
    qs = "[" + ", ".join(repr(float(q)) for q in quantiles) + "]"
    aggs = ", ".join(
        f'count("{m}") AS "n_{m}", quantile_cont("{m}", {qs}) AS "q_{m}"' for m in metrics
    )
    con = query.cursor()
    try:
        con.register("calls_frame", frame)
        res = con.sql(
            f"SELECT bucket_ns, gid, {aggs} FROM calls_frame GROUP BY bucket_ns, gid "
            "ORDER BY bucket_ns, gid"
        ).to_df()
    finally:
        con.close()
    frames = []
    for m in metrics:
        have = res[res[f"n_{m}"] > 0]
        if have.empty:
            continue
        values = np.array(have[f"q_{m}"].tolist(), dtype="float64")
        for i, q in enumerate(quantiles):
            frames.append(
                pd.DataFrame(
                    {
                        "bucket_ns": have["bucket_ns"].to_numpy(),
                        "gid": have["gid"].to_numpy(),
                        "value_s": values[:, i],
                        "n": have[f"n_{m}"].to_numpy(dtype="int64"),
                        "metric": m,
                        "quantile": f"p{round(q * 100):d}",
                    }
                )
            )
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    out["bucket"] = pd.to_datetime(out["bucket_ns"].to_numpy(dtype="int64"), unit="ns", utc=True)
    out["group"] = labels[out["gid"].to_numpy(dtype="int64")]
    return out[cols]


def _group_codes(df: pd.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(per row: the index of its group, per group: its :func:`group_label`), groups numbered
    in label order. Built from each column's distinct values, not row by row."""
    n = len(df)
    if not by:
        return np.zeros(n, dtype="int64"), np.array(["all"], dtype="object")
    combined = np.zeros(n, dtype="int64")
    names: list[list[str]] = []
    for c in by:
        codes, uniques = pd.factorize(df[c], use_na_sentinel=True)
        texts = [str(u) for u in uniques] + ["?"]  # code -1 (missing) -> the last
        combined = combined * len(texts) + np.where(codes < 0, len(texts) - 1, codes)
        names.append(texts)
    keys, row_key = np.unique(combined, return_inverse=True)
    labels = []
    for k in keys:
        part = []
        for texts in reversed(names):
            k, r = divmod(int(k), len(texts))
            part.append(texts[r])
        labels.append(" / ".join(reversed(part)))
    order = np.argsort(np.array(labels, dtype="object"), kind="stable")
    rank = np.empty(len(order), dtype="int64")
    rank[order] = np.arange(len(order))
    return rank[row_key.reshape(-1)], np.array(labels, dtype="object")[order]


def _quantiles(s: pd.Series) -> dict[str, float | None]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of :data:`QUANTILES` over the known values of
    ``s`` (one pass: the same values as :func:`_quantile` per quantile); None without any."""
    known = s.dropna()
    if not len(known):
        return {f"p{round(q * 100)}": None for q in QUANTILES}
    values = known.quantile(list(QUANTILES))
    return {f"p{round(q * 100)}": _opt(float(v)) for q, v in zip(QUANTILES, values, strict=True)}


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
    if bucket_s < 1:
        raise ValueError("bucket_s must be at least 1")
    step = bucket_s * 1_000_000_000
    key = (df["start_unix_nano"].to_numpy() // step) * step
    known_tokens = (df["input_tokens"].notna() | df["output_tokens"].notna()).to_numpy()
    tokens = (df["input_tokens"].fillna(0) + df["output_tokens"].fillna(0)).to_numpy(
        dtype="float64", na_value=0.0
    )
    cost = df["cost_usd"].to_numpy(dtype="float64", na_value=np.nan)
    frame = pd.DataFrame(
        {
            "calls": np.ones(len(df), dtype="int64"),
            "error": (df["status"] == "error").to_numpy(dtype=bool, na_value=False),
            "limited": is_rate_limited(df["error_type"]).to_numpy(),
            "tokens": np.where(known_tokens, tokens, np.nan),
            "cost_usd": cost,
            "ttft_s": df["ttft_s"].to_numpy(dtype="float64", na_value=np.nan),
            "tpot_s": df["tpot_s"].to_numpy(dtype="float64", na_value=np.nan),
        }
    )
    g = frame.groupby(key, sort=True)
    calls = g["calls"].sum()
    out = pd.DataFrame(
        {
            "bucket": pd.to_datetime(calls.index.to_numpy(dtype="int64"), unit="ns", utc=True),
            "calls": calls.to_numpy(),
            "requests_per_s": calls.to_numpy() / bucket_s,
            "error_rate": g["error"].mean().to_numpy(dtype="float64"),
            "rate_limited_rate": g["limited"].mean().to_numpy(dtype="float64"),
            "tokens_per_s": g["tokens"].sum(min_count=1).to_numpy() / bucket_s,
            "cost_usd": g["cost_usd"].sum(min_count=1).to_numpy(),
        }
    )
    for m in ("ttft_s", "tpot_s"):
        for q in QUANTILES:
            out[f"{m}_p{round(q * 100)}"] = g[m].quantile(q).to_numpy()
    return out[cols]


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """Headline numbers of a window; None when unknown (no calls or no known values).

    Rates per second of the window; fractions in [0, 1]; latencies seconds; USD.
    ``quantile_relative_error``: 0.0 when the percentiles are exact, else their relative error
    bound (answered from the lake's hourly summaries: :mod:`dashboard.summarystats`).
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
    quantile_relative_error: float = 0.0


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
        ttft_s=_quantiles(df["ttft_s"]),
        tpot_s=_quantiles(df["tpot_s"]),
        tokens_per_s=float(tokens.sum()) / window_s if known_tokens.any() else None,
        cost_usd=float(df["cost_usd"].sum()) if df["cost_usd"].notna().any() else None,
        unpriced_calls=int(is_unpriced(df).sum()),
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
    d["unpriced"] = is_unpriced(d)
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
    if bucket_s < 1:
        raise ValueError("bucket_s must be at least 1")
    step = bucket_s * 1_000_000_000
    gid, labels = _group_codes(df, by)
    b = pd.DataFrame(
        {
            "bucket_ns": (df["start_unix_nano"].to_numpy(dtype="int64") // step) * step,
            "gid": gid,
            "usd": df[["cost_usd", "gpu_cost_usd"]].sum(axis=1, min_count=1).to_numpy(),
            "tokens": (df["input_tokens"].fillna(0) + df["output_tokens"].fillna(0)).to_numpy(
                dtype="float64", na_value=0.0
            ),
        }
    )
    g = b.groupby(["bucket_ns", "gid"]).agg(usd=("usd", "sum"), tokens=("tokens", "sum"))
    g["usd"] = g["usd"].where(b.groupby(["bucket_ns", "gid"])["usd"].count() > 0)  # min_count=1
    g["usd_per_1k_tokens"] = (g["usd"] / (g["tokens"] / 1000.0)).where(g["tokens"] > 0)
    g = g.dropna(subset=["usd_per_1k_tokens"]).reset_index()
    g["bucket"] = pd.to_datetime(g["bucket_ns"].to_numpy(dtype="int64"), unit="ns", utc=True)
    g["group"] = labels[g["gid"].to_numpy(dtype="int64")]
    return g[cols]


def feedback_rates(
    calls: pd.DataFrame, feedback: pd.DataFrame, by: str = "variant"
) -> pd.DataFrame:
    """Per ``by`` value: calls, and for each feedback kind the events per 100 calls.

    Feedback is attributed through its linked ``trace_id`` (pending events are not counted).
    """
    if calls.empty:
        return pd.DataFrame(columns=[by, "calls"])
    if feedback.empty:  # no trace_id needed: ``calls`` may hold ``by`` only
        c = calls[[by]].copy()
        c[by] = c[by].astype("object").where(c[by].notna(), "?")
        return c.groupby(by).size().rename("calls").reset_index()
    c = calls[["trace_id", by]].copy()
    c[by] = c[by].astype("object").where(c[by].notna(), "?")
    n = c.groupby(by).size().rename("calls")
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
