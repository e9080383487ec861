"""Capacity: replicas, KV-cache use, queue depth, desired vs actual replicas, cost per 1k tokens.

Engine side: the collector's scraped engine samples (one row per scrape of a replica's
``/metrics``). Gateway side (optional): the gateway's ``/metrics`` read over HTTP
(``driftline_desired_replicas{model}``, ``driftline_replicas{model}``, queue depth per class),
URL from the page's input or the ``gateway`` query parameter, fetched within the egress policy
(:mod:`dashboard.gateway`: public addresses unless ``DRIFTLINE_EGRESS_ALLOW`` lists it). Cost
per 1k tokens of a replica is its price (USD per hour, the input or the ``usd_per_hour`` query
parameter) divided by the tokens (prompt + generated) it processed per hour in the window, times
1,000.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from collector.egress import EgressPolicy
from dashboard import charts, data, ui
from dashboard.gateway import GatewayMetrics, read_gateway_metrics


@st.cache_data(ttl=10, show_spinner=False)
def gateway_metrics(url: str, egress_allow: str) -> GatewayMetrics:
    """The gateway's ``driftline_*`` gauges (:func:`dashboard.gateway.read_gateway_metrics`)."""
    return read_gateway_metrics(url, EgressPolicy.parse(egress_allow))


def per_replica(eng: pd.DataFrame, usd_per_hour: float | None) -> pd.DataFrame:
    """Latest gauges and window token throughput per replica URL (one row each)."""
    out = []
    for url, g in eng.groupby("url"):
        g = g.sort_values("scraped_unix_nano")
        last = g.iloc[-1]
        span_h = (g["scraped_unix_nano"].iloc[-1] - g["scraped_unix_nano"].iloc[0]) / 3.6e12
        toks = None
        if span_h > 0:
            d = (g["prompt_tokens_total"].iloc[-1] - g["prompt_tokens_total"].iloc[0]) + (
                g["generation_tokens_total"].iloc[-1] - g["generation_tokens_total"].iloc[0]
            )
            toks = float(d) / span_h if pd.notna(d) and d >= 0 else None
        cost = usd_per_hour / toks * 1000 if usd_per_hour and toks else None
        out.append(
            {
                "replica": url,
                "model": last["model_name"],
                "KV cache %": None
                if pd.isna(last["kv_cache_usage"])
                else round(100 * last["kv_cache_usage"], 1),
                "running": last["requests_running"],
                "waiting": last["requests_waiting"],
                "tokens / hour": None if toks is None else round(toks),
                "USD / 1k tokens": None if cost is None else round(cost, 5),
            }
        )
    return pd.DataFrame(out)


def advice(desired: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """Sentences an operator acts on (scale up / down / hold, and why), as Markdown: model
    labels (the gateway's ``/metrics``) and replica URLs are escaped with :func:`ui.md`."""
    words = []
    for _, r in desired.iterrows():
        want, have = int(r["desired"]), int(r["actual"])
        if want > have:
            words.append(f"Scale **{ui.md(r['model'])}** up from {have} to {want} replicas.")
        elif want < have:
            words.append(f"**{ui.md(r['model'])}** can shrink from {have} to {want} replicas.")
        else:
            words.append(f"**{ui.md(r['model'])}**: {have} replicas match the demand.")
    if not table.empty:
        hot = table[(table["KV cache %"].fillna(0) > 90) | (table["waiting"].fillna(0) > 0)]
        for _, r in hot.iterrows():
            words.append(
                f"Replica {ui.md(r['replica'])} is saturated (KV cache {r['KV cache %']} %, "
                f"{ui.md(r['waiting'])} waiting): add capacity or route away from it."
            )
        if hot.empty and desired.empty:
            peak = table["KV cache %"].max()
            words.append(f"No replica is saturated (peak KV cache {peak} %).")
    return words


ctx = ui.page_context("Capacity", "Replicas, their load, and how many the gateway asks for.")
qp = st.query_params
c1, c2 = st.columns(2)
gw_url = c1.text_input("Gateway URL (its /metrics)", qp.get("gateway", ""), key="cap_gw")
price = c2.number_input(
    "Replica price (USD / hour)", min_value=0.0, value=float(qp.get("usd_per_hour", 0.0))
)
eng = data.engine_samples(ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns)
table = per_replica(eng, price or None) if not eng.empty else pd.DataFrame()
fetched = gateway_metrics(gw_url, ctx.settings.egress_allow) if gw_url else None
gm = fetched.frame if fetched is not None else None
if fetched is not None and fetched.error:
    st.warning(f"Gateway metrics: {ui.md(fetched.error)}")  # it may quote the URL
desired = pd.DataFrame(columns=["model", "desired", "actual"])
if gm is not None and not gm.empty and "model" in gm:
    piv = gm[gm["name"].isin(["driftline_desired_replicas", "driftline_replicas"])]
    desired = (
        piv.pivot_table(index="model", columns="name", values="value", aggfunc="last")
        .rename(columns={"driftline_desired_replicas": "desired", "driftline_replicas": "actual"})
        .reset_index()
        .astype({"desired": int, "actual": int})
    )

k = st.columns(4)
k[0].metric("Replicas (engine samples)", len(table))
k[1].metric("Peak KV cache", ui.fmt(None if table.empty else table["KV cache %"].max() / 100, "%"))
k[2].metric("Waiting at engines", 0 if table.empty else int(table["waiting"].fillna(0).sum()))
if gm is not None and not gm.empty:
    depth = gm[gm["name"] == "driftline_gateway_queue_depth"]["value"].sum()
    k[3].metric("Queued at the gateway", int(depth))
else:
    k[3].metric("Queued at the gateway", "–")

st.subheader("Advice")
for line in advice(desired, table) or ["Not enough data for advice yet."]:
    st.markdown(f"- {line}")

st.subheader("Desired vs actual replicas")
if desired.empty:
    why = "Enter the gateway URL." if not gw_url else f"No scaling metrics from {ui.md(gw_url)}."
    ui.no_data("scaling signal", why)
else:
    # HTML table: small, and readable by screen readers; st.table renders Markdown in cells
    st.table(ui.md_frame(desired).set_index("model"))

st.subheader("Per replica")
if table.empty:
    ui.no_data("engine samples", "Configure engine /metrics scraping in the collector.")
else:
    st.table(ui.md_frame(table).set_index("replica"))
    eng = eng.assign(kv_pct=eng["kv_cache_usage"] * 100)
    a, b = st.columns(2)
    with a:
        charts.show(
            charts.line(eng, x="time", y="kv_pct", y_title="KV cache (%)", color="url", height=220)
        )
    with b:
        charts.show(
            charts.line(
                eng, x="time", y="requests_waiting", y_title="waiting", color="url", height=220
            )
        )
