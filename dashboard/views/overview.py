"""Overview: traffic, errors, latency percentiles, throughput, cost, alerts and rollouts."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from dashboard import data, stats, summarystats, ui
from dashboard.data_quality import rollouts

ctx = ui.page_context("Overview", "Headline numbers of the selected window; sparklines per bucket.")
summary, series = data.traffic(
    ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns, exact=ctx.exact
)
if summary.calls == 0:
    ui.no_data("calls", f"Nothing arrived for tenant `{ctx.tenant}` in the {ctx.range_label}.")


def spark(column: str) -> list[float | None]:
    """The bucket series of ``column`` (a bucket without a known value: a gap)."""
    if series.empty:
        return []
    return [None if pd.isna(v) else float(v) for v in series[column].tolist()]


row1 = st.columns(4)
ui.metric_card(
    row1[0],
    "Requests / s",
    ui.fmt(summary.requests_per_s, ""),
    trend=spark("requests_per_s"),
    help=(
        f"{summary.calls} calls in the {ctx.range_label}, per second of the span they were "
        "observed over (first call to now)"
    ),
)
ui.metric_card(
    row1[1],
    "Error rate",
    ui.fmt(summary.error_rate, "%"),
    trend=spark("error_rate"),
)
ui.metric_card(
    row1[2],
    "429 / rejected rate",
    ui.fmt(summary.rate_limited_rate, "%"),
    trend=spark("rate_limited_rate"),
)
ui.metric_card(
    row1[3],
    "Tokens / s (in + out)",
    ui.fmt(summary.tokens_per_s, ""),
    trend=spark("tokens_per_s"),
)
row2 = st.columns(6)
for i, (name, stat, col) in enumerate(
    [
        ("TTFT p50", summary.ttft_s["p50"], "ttft_s_p50"),
        ("TTFT p95", summary.ttft_s["p95"], "ttft_s_p95"),
        ("TTFT p99", summary.ttft_s["p99"], "ttft_s_p99"),
        ("TPOT p50", summary.tpot_s["p50"], "tpot_s_p50"),
        ("TPOT p95", summary.tpot_s["p95"], "tpot_s_p95"),
        ("TPOT p99", summary.tpot_s["p99"], "tpot_s_p99"),
    ]
):
    ui.metric_card(row2[i], name, ui.fmt(stat, "ms"), trend=spark(col))
if summary.quantile_relative_error:
    st.caption(summarystats.CAPTION)

today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
today_ns = int(today.timestamp()) * 1_000_000_000
today_summary, today_series = data.traffic(
    ctx.database_url, ctx.tenant, today_ns, ctx.until_ns, exact=ctx.exact
)
alerts = data.alerts(ctx.database_url, ctx.tenant)
firing = alerts[alerts["status"] == "firing"]
running = rollouts(ctx.database_url, ctx.tenant)
running = running[running["status"] == "running"] if running is not None else None
row3 = st.columns(3)
# the same total as the Cost page (priced + GPU-amortised) over the UTC day
cost_today, _ = data.cost(ctx.database_url, (ctx.tenant,), today_ns, ctx.until_ns, ("model",))
total_today = cost_today["total_usd"].sum(min_count=1) if not cost_today.empty else None
ui.metric_card(
    row3[0],
    "Cost today (priced + GPU, UTC day)",
    ui.fmt(total_today, "USD", 4),
    trend=[float(v) for v in today_series["cost_usd"].fillna(0).cumsum()],
    help=(
        f"as on the Cost page for today; {today_summary.unpriced_calls} calls today have no "
        "list price"
    ),
)
ui.metric_card(
    row3[1],
    "Firing alerts",
    len(firing),
    trend=stats.active_counts(
        alerts["fired_at"], alerts["resolved_at"], ctx.since_ns, ctx.until_ns
    ),
)
ui.metric_card(
    row3[2],
    "Running rollouts",
    "–" if running is None else len(running),
    trend=None
    if running is None
    else stats.active_counts(running["started"], running["finished"], ctx.since_ns, ctx.until_ns),
)
if len(firing):
    st.subheader("Firing alerts")
    ui.table(firing[["rule", "labels", "summary", "value", "fired_at"]], hide_index=True)
if running is not None and len(running):
    st.subheader("Running rollouts")
    ui.table(
        running[["name", "baseline", "candidate", "step", "candidate_weight_pct", "last_action"]],
        hide_index=True,
        column_config={"candidate_weight_pct": st.column_config.NumberColumn("candidate %")},
    )
