"""Cost: per tenant / model / variant, priced and GPU-amortised, USD per 1k tokens, unpriced."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, ui

ctx = ui.page_context(
    "Cost",
    "Priced = list price per token (cached input priced separately); GPU = self-hosted replica "
    "cost amortised over the tokens it served. Unknown costs are not counted as $0.",
)
dims = st.multiselect(
    "Group by",
    ["tenant", "model", "variant", "service_name"],
    ["model", "variant"],
    key="cost_by",
)
by = tuple(dims) or ("model",)
scope = ctx.tenants if "tenant" in by else (ctx.tenant,)
table, trend = data.cost(ctx.database_url, scope, ctx.since_ns, ctx.until_ns, by)
if table.empty:
    ui.no_data("costs", f"No calls in the {ctx.range_label}.")
    st.stop()
total = table["total_usd"].sum(min_count=1)
c = st.columns(4)
c[0].metric("Total (priced + GPU)", ui.fmt(total, "USD", 4))
c[1].metric("Priced", ui.fmt(table["cost_usd"].sum(min_count=1), "USD", 4))
c[2].metric("GPU-amortised", ui.fmt(table["gpu_cost_usd"].sum(min_count=1), "USD", 4))
c[3].metric("Unpriced calls", int(table["unpriced_calls"].sum()))
label = " / ".join(by)
chart_df = table.assign(group=table[list(by)].astype(str).agg(" / ".join, axis=1))
left, right = st.columns(2)
with left:
    st.markdown(f"**Cost by {label} (USD)**")
    charts.show(
        charts.bars(
            chart_df.dropna(subset=["total_usd"]), x="total_usd", y="group", x_title="cost (USD)"
        )
    )
with right:
    st.markdown("**USD per 1k tokens over time**")
    if trend.empty:
        ui.no_data("priced tokens", "Every call of the window is unpriced.")
    else:
        charts.show(
            charts.line(
                trend, x="bucket", y="usd_per_1k_tokens", y_title="USD / 1k tokens", color="group"
            )
        )
ui.table(
    table,
    hide_index=True,
    column_config={
        "tokens": st.column_config.NumberColumn("tokens", format="%d"),
        "cost_usd": st.column_config.NumberColumn("priced (USD)", format="$%.4f"),
        "gpu_cost_usd": st.column_config.NumberColumn("GPU (USD)", format="$%.4f"),
        "total_usd": st.column_config.NumberColumn("total (USD)", format="$%.4f"),
        "usd_per_1k_tokens": st.column_config.NumberColumn("USD / 1k tokens", format="$%.5f"),
        "unpriced_calls": st.column_config.NumberColumn("unpriced calls"),
    },
)
if int(table["unpriced_calls"].sum()):
    st.caption(
        "Unpriced calls: the model has no list price (add it to the price file given by "
        "DRIFTLINE_PRICES). Self-hosted models have none: their cost is the GPU-amortised "
        "column, filled when DRIFTLINE_GPU_COST_PER_HOUR names the service's replica cost."
    )
