"""Latency: percentiles over time by model and variant; the caller's vs the engine's TTFT and
the ITL distribution (the values ``GET /api/v1/stats`` serves exact, by model); one request's
breakdown; engine gauges. The page's three aggregations of the calls come from one read
(:func:`dashboard.data.latency_page`)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data, summarystats, ui

#: ``call_stats`` fields shown side by side: the caller's view and the engine's
SIDE_BY_SIDE = {
    "TTFT, caller (gateway / SDK)": "ttft_s",
    "TTFT, engine": "server_ttft_s",
    "e2e, caller": "e2e_s",
    "e2e, engine": "server_e2e_s",
    "queue, gateway": "gateway_queue_s",
    "queue, engine": "queue_s",
    "ITL, per-call median": "itl_p50_s",
    "ITL, per-call p95": "itl_p95_s",
}

METRICS = {
    "TTFT (time to first token)": "ttft_s",
    "TPOT (time per output token)": "tpot_s",
    "Queue": "queue_s",
    "Prefill": "prefill_s",
    "Decode": "decode_s",
    "End to end": "e2e_s",
}

ctx = ui.page_context("Latency", "Percentiles per time bucket; unknown latencies are skipped.")
c1, c2 = st.columns([2, 1])
label = c1.selectbox("Latency", list(METRICS), key="lat_metric")
quantiles = c2.multiselect("Percentiles", ["p50", "p95", "p99"], ["p50", "p95"], key="lat_q")
# one read of the calls for the page's three aggregations; only the chosen latency's
# percentiles over time (each metric's quantiles are much of the read; another is read when
# chosen, then cached like this one)
page = data.latency_page(
    ctx.database_url,
    ctx.tenant,
    ctx.since_ns,
    ctx.until_ns,
    METRICS[label],
    tuple(dict.fromkeys(SIDE_BY_SIDE.values())),
    exact=ctx.exact,
)
if page.quantile_relative_error:
    st.caption(summarystats.CAPTION)
pct = page.percentiles
if pct.empty:
    ui.no_data(label, f"No call reports this latency in the {ctx.range_label}.")
else:
    sel = pct[pct["quantile"].isin(quantiles)]
    if sel.empty:
        ui.no_data(label, "No percentile is selected.")
    else:
        sel = sel.assign(value_ms=sel["value_s"] * 1000.0)
        charts.show(
            charts.line(
                sel,
                x="bucket",
                y="value_ms",
                y_title=f"{label} (ms)",
                color="group",
                stroke_dash="quantile",
            )
        )
        st.caption("Lines: model / variant; dash: percentile. Hover for values (ms).")


st.subheader("Caller vs engine: TTFT, e2e, queue, inter-token latency")
overall = page.by_model  # the API's call_stats by model, these fields only (see the caption)
if not overall:
    ui.no_data("calls", f"No call in the {ctx.range_label}.")
else:
    table = pd.DataFrame(
        [
            {
                "model": row["model"] or "?",
                "latency": label,
                "calls": row[f"n_{f}"],
                **{p: row[f"{f}_{p}"] for p in ("p50", "p95", "p99")},
            }
            for row in overall
            for label, f in SIDE_BY_SIDE.items()
            if row[f"n_{f}"]
        ]
    )
    if table.empty:
        ui.no_data("latencies", "No call of this window reports these latencies.")
    else:
        for p in ("p50", "p95", "p99"):
            table[p] = table[p].map(lambda v: ui.fmt(v, "ms"))
        ui.table(table, hide_index=True, width="stretch")
    st.caption(
        "Caller: measured by the gateway or SDK (includes network and gateway queue). Engine: "
        "vLLM's own gen_ai.latency.* of the same request, kept next to it when the two spans "
        "merge. ITL: percentiles over calls of each call's median / p95 gap between streamed "
        "tokens. Blank rows: nobody reported that latency."
    )
    itl = page.engine
    if not itl.empty:
        charts.show(
            charts.line(
                itl,
                x="bucket",
                y="value_ms",
                y_title="ms",
                color="group",
                stroke_dash="quantile",
            )
        )
        st.caption("Per-call median ITL and engine TTFT percentiles per time bucket (ms).")

st.subheader("One request: queue → prefill → decode")
recent = data.call_page(ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns, (), 200)
broken_down = [c for c in recent if c["queue_s"] is not None and c["decode_s"] is not None]
if not broken_down:
    ui.no_data(
        "server-side breakdown",
        "Only calls served by an engine that reports queue/prefill/decode (vLLM) have one.",
    )
else:
    options = {
        f"{c['call_id'][:40]} · {c['model']} / {c['variant'] or '-'} · "
        f"{(c['e2e_s'] or 0) * 1000:.0f} ms": c
        for c in broken_down[:50]
    }
    pick = st.selectbox("Request (newest first)", list(options), key="lat_call")
    call = options[pick]
    parts = pd.DataFrame(
        [
            {"phase": p, "order": i, "ms": (call[f"{p}_s"] or 0.0) * 1000.0}
            for i, p in enumerate(("queue", "prefill", "decode"))
        ]
    ).assign(request=call["call_id"][:24])
    bar = (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            x=alt.X("sum(ms):Q", title="time (ms)", stack="zero"),
            y=alt.Y("request:N", title=None),
            color=alt.Color("phase:N", sort=["queue", "prefill", "decode"]),
            order=alt.Order("order:Q"),
            tooltip=["phase:N", alt.Tooltip("ms:Q", format=".1f", title="ms")],
        )
        .properties(height=90)
    )
    charts.show(bar)
    st.caption(
        f"TTFT {ui.fmt(call['ttft_s'], 'ms')} · e2e {ui.fmt(call['e2e_s'], 'ms')} · "
        f"{call['output_tokens']} output tokens · TPOT {ui.fmt(call['tpot_s'], 'ms')}"
    )

st.subheader("Engine: KV cache, queue depth, prefix cache")
eng = data.engine_samples(ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns)
if eng.empty:
    ui.no_data("engine samples", "Configure engine /metrics scraping in the collector.")
else:
    eng = eng.assign(engine=eng["model_name"].fillna("?") + " @ " + eng["url"])
    a, b, c = st.columns(3)
    with a:
        charts.show(
            charts.line(
                eng.assign(kv_pct=eng["kv_cache_usage"] * 100),
                x="time",
                y="kv_pct",
                y_title="KV-cache usage (%)",
                color="engine",
                height=200,
            )
        )
    with b:
        rw = eng.melt(
            id_vars=["time", "engine"],
            value_vars=["requests_running", "requests_waiting"],
            var_name="state",
            value_name="requests",
        )
        charts.show(
            charts.line(rw, x="time", y="requests", y_title="requests", color="state", height=200)
        )
    with c:
        charts.show(
            charts.line(
                eng.dropna(subset=["prefix_cache_hit_rate"]).assign(
                    hit_pct=lambda d: d["prefix_cache_hit_rate"] * 100
                ),
                x="time",
                y="hit_pct",
                y_title="prefix-cache hit rate (%)",
                color="engine",
                height=200,
            )
        )
    tails = eng.melt(
        id_vars=["time", "engine"],
        value_vars=[c for c in ("ttft_p95_s", "itl_p95_s") if c in eng.columns],
        var_name="latency",
        value_name="seconds",
    ).dropna(subset=["seconds"])
    if not tails.empty:
        charts.show(
            charts.line(
                tails.assign(
                    ms=tails["seconds"] * 1000.0,
                    series=tails["engine"] + " · " + tails["latency"].str.replace("_s", ""),
                ),
                x="time",
                y="ms",
                y_title="engine p95 per scrape interval (ms)",
                color="series",
                height=200,
            )
        )
        st.caption("The engine's own TTFT / inter-token latency p95 per scrape interval.")
