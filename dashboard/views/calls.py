"""Calls explorer: filter calls, open one with its spans, text, feedback and judge results."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from collector.store import exports, search
from collector.store import queries as store_queries
from dashboard import data, ui

ctx = ui.page_context("Calls explorer", "Newest first; times UTC, latencies ms, cost USD.")
f = st.columns(5)
model = f[0].text_input("Model", key="calls_model")
variant = f[1].text_input("Variant", key="calls_variant")
service = f[2].text_input("Service", key="calls_service")
trace = f[3].text_input("Trace id", key="calls_trace")
limit = f[4].selectbox("Rows", [50, 200, 1000], key="calls_limit")
g = st.columns([3, 2])
query = g[0].text_input(
    "Search prompts and answers", key="calls_q", placeholder="every word must occur"
)
session = g[1].text_input("Session", key="calls_session")
if query.strip():
    try:
        search.words(query)
    except ValueError as exc:
        st.warning(ui.md(exc))
        st.stop()
filters = tuple(
    sorted(
        (k, v.strip())
        for k, v in (
            ("model", model),
            ("variant", variant),
            ("service", service),
            ("trace_id", trace),
            ("q", query),
            ("session_id", session),
        )
        if v and v.strip()
    )
)
items = data.call_page(
    ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns, filters, int(limit)
)
if not items:
    ui.no_data("calls", f"No call matches these filters in the {ctx.range_label}.")
    st.stop()
df = pd.DataFrame(items)
view = df[
    [
        "started_at",
        "call_id",
        "service_name",
        "model",
        "variant",
        "status",
        "ttft_s",
        "e2e_s",
        "input_tokens",
        "output_tokens",
        "cost_usd",
    ]
].assign(ttft_ms=lambda d: d["ttft_s"] * 1000, e2e_ms=lambda d: d["e2e_s"] * 1000)
view = view.drop(columns=["ttft_s", "e2e_s"])
st.caption(f"{len(df)} calls shown")
d = st.columns([1, 1, 4])
fmt = d[0].selectbox("Export format", exports.FORMATS, key="calls_export_fmt")
if d[1].button("Prepare export", key="calls_export"):
    extra: dict[str, Any] = dict(filters)  # string-valued CallFilter fields
    flt = store_queries.CallFilter(
        since_unix_nano=ctx.since_ns, until_unix_nano=ctx.until_ns, **extra
    )
    pages = exports.iter_calls(data.engine(ctx.database_url), ctx.tenant, flt)
    st.session_state["calls_export_blob"] = (fmt, exports.to_bytes(pages, "calls", fmt))
blob = st.session_state.get("calls_export_blob")
if blob is not None:
    d[2].download_button(
        f"Download calls.{blob[0]} ({len(blob[1]):,} bytes, every matching call)",
        data=blob[1],
        file_name=f"calls.{blob[0]}",
        key="calls_download",
    )
event = ui.table(
    view,
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="calls_table",
    column_config={
        "ttft_ms": st.column_config.NumberColumn("TTFT (ms)", format="%.0f"),
        "e2e_ms": st.column_config.NumberColumn("e2e (ms)", format="%.0f"),
        "input_tokens": st.column_config.NumberColumn("input (tokens)"),
        "output_tokens": st.column_config.NumberColumn("output (tokens)"),
        "cost_usd": st.column_config.NumberColumn("cost (USD)", format="$%.5f"),
    },
)
rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
default_id = df.iloc[rows[0]]["call_id"] if rows else df.iloc[0]["call_id"]
call_id = st.text_input(
    "Open call (call id or trace_id:span_id)", value=default_id, key="calls_open"
)
call = data.call_detail(ctx.database_url, ctx.tenant, call_id.strip())
if call is None:
    st.warning(f"No call {ui.md(repr(call_id))} for tenant {ui.md(ctx.tenant)}.")
    st.stop()
st.subheader(f"Call {ui.md(call['call_id'])}")
m = st.columns(6)
m[0].metric("TTFT", ui.fmt(call["ttft_s"], "ms"))
m[1].metric("TPOT", ui.fmt(call["tpot_s"], "ms"))
m[2].metric("e2e", ui.fmt(call["e2e_s"], "ms"))
m[3].metric("Tokens in / out", f"{call['input_tokens'] or '–'} / {call['output_tokens'] or '–'}")
m[4].metric("Cost", ui.fmt(call["cost_usd"], "USD", 5))
error = f" ({call['error_type']})" if call["error_type"] else ""
m[5].metric("Status", ui.md(f"{call['status']}{error}"))
t1, t2 = st.columns(2)
t1.markdown("**Prompt**")
t1.text(call["input_text"] or "(not captured)")
t2.markdown("**Answer**")
t2.text(call["output_text"] or "(not captured)")
tabs = st.tabs(["Spans", "Feedback", "Judge results", "Record"])
with tabs[0]:
    spans = pd.DataFrame(call["spans"])
    if spans.empty:
        st.caption("No stored span.")
    else:
        spans["duration_ms"] = (spans["end_unix_nano"] - spans["start_unix_nano"]) / 1e6
        ui.table(
            spans[
                [
                    "name",
                    "service_name",
                    "span_id",
                    "parent_span_id",
                    "llm_role",
                    "duration_ms",
                    "status_code",
                ]
            ],
            hide_index=True,
        )
with tabs[1]:
    if call["feedback"]:
        ui.table(pd.DataFrame(call["feedback"]), hide_index=True)
    else:
        st.caption("No feedback on this call.")
with tabs[2]:
    if call["judge_results"] is None:
        ui.no_data("judge results", "The judges subsystem is not installed in this store.")
    elif call["judge_results"]:
        ui.table(pd.DataFrame(call["judge_results"]), hide_index=True)
    else:
        st.caption("This call was not judged.")
with tabs[3]:
    st.json({k: v for k, v in call.items() if k not in ("spans", "feedback", "judge_results")})
