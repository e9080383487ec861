"""Overview: traffic, errors, latency percentiles, throughput, cost, alerts and rollouts."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from dashboard import data, stats, summarystats, ui
from dashboard.data_quality import rollouts

ctx = ui.page_context("Overview", "Headline numbers of the selected window; sparklines per bucket.")
summary, series = data.traffic(
    ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns, exact=ctx.exact
)
if summary.calls == 0:
    ui.no_data("calls", f"Nothing arrived for tenant `{ctx.tenant}` in the {ctx.range_label}.")


def spark(column: str) -> list[float]:
    """The bucket series of ``column`` (missing buckets as gaps)."""
    if series.empty:
        return []
    return [float(v) for v in series[column].fillna(0.0).tolist()]


row1 = st.columns(4)
row1[0].metric(
    "Requests / s",
    ui.fmt(summary.requests_per_s, ""),
    chart_data=spark("requests_per_s"),
    help=(
        f"{summary.calls} calls in the {ctx.range_label}, per second of the span they were "
        "observed over (first call to now)"
    ),
    border=True,
)
row1[1].metric(
    "Error rate",
    ui.fmt(summary.error_rate, "%"),
    chart_data=spark("error_rate"),
    border=True,
)
row1[2].metric(
    "429 / rejected rate",
    ui.fmt(summary.rate_limited_rate, "%"),
    chart_data=spark("rate_limited_rate"),
    border=True,
)
row1[3].metric(
    "Tokens / s (in + out)",
    ui.fmt(summary.tokens_per_s, ""),
    chart_data=spark("tokens_per_s"),
    border=True,
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
    row2[i].metric(name, ui.fmt(stat, "ms"), chart_data=spark(col), border=True)
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
row3[0].metric(
    "Cost today (priced + GPU, UTC day)",
    ui.fmt(total_today, "USD", 4),
    chart_data=[float(v) for v in today_series["cost_usd"].fillna(0).cumsum()],
    help=(
        f"as on the Cost page for today; {today_summary.unpriced_calls} calls today have no "
        "list price"
    ),
    border=True,
)
row3[1].metric(
    "Firing alerts",
    len(firing),
    chart_data=stats.active_counts(
        alerts["fired_at"], alerts["resolved_at"], ctx.since_ns, ctx.until_ns
    ),
    border=True,
)
row3[2].metric(
    "Running rollouts",
    "–" if running is None else len(running),
    chart_data=None
    if running is None
    else stats.active_counts(running["started"], running["finished"], ctx.since_ns, ctx.until_ns),
    border=True,
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
