"""Traces: agent runs as span trees (indented, plus a waterfall over time); each LLM span
opens its call in the calls explorer."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from collector.store import traces
from collector.store.trace_tree import walk
from dashboard import data, ui

ctx = ui.page_context("Traces", "Newest first; durations ms, cost USD, tokens summed per subtree.")
f = st.columns(5)
service = f[0].text_input("Service", key="traces_service").strip() or None
status = f[1].selectbox("Status", ["any", "error", "ok"], key="traces_status")
session = f[2].text_input("Session", key="traces_session").strip() or None
llm_only = f[3].checkbox("With LLM calls only", key="traces_llm")
limit = f[4].selectbox("Rows", [50, 200], key="traces_limit")
flt = traces.TraceFilter(
    since_unix_nano=ctx.since_ns,
    until_unix_nano=ctx.until_ns,
    service=service,
    status=None if status == "any" else status,
    has_llm=True if llm_only else None,
    session_id=session,
)
with data.engine(ctx.database_url).connect() as conn:
    items, _ = traces.list_traces(conn, ctx.tenant, flt, limit=int(limit))
if not items:
    ui.no_data("traces", f"No trace matches these filters in the {ctx.range_label}.")
    st.stop()
listing = pd.DataFrame(
    [
        {
            "started_at": t["started_at"],
            "trace_id": t["trace_id"],
            "root": (t["root"] or {}).get("label"),
            "duration_ms": None if t["duration_s"] is None else t["duration_s"] * 1000,
            "spans": t["spans"],
            "llm_calls": t["llm_calls"],
            "tokens": (t["input_tokens"] or 0) + (t["output_tokens"] or 0)
            if t["input_tokens"] is not None or t["output_tokens"] is not None
            else None,
            "cost_usd": t["cost_usd"],
            "errors": t["errors"],
            "session": t["session_id"],
        }
        for t in items
    ]
)
event = ui.table(
    listing,
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="traces_table",
    column_config={
        "duration_ms": st.column_config.NumberColumn("duration (ms)", format="%.0f"),
        "cost_usd": st.column_config.NumberColumn("cost (USD)", format="$%.5f"),
    },
)
rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
# a deep link (``traces?trace_id=...``, e.g. from the calls explorer) opens that trace
linked = str(st.query_params.get("trace_id") or "").strip().lower()
default_id = listing.iloc[rows[0]]["trace_id"] if rows else linked or listing.iloc[0]["trace_id"]
trace_id = st.text_input("Open trace", value=default_id, key="traces_open").strip().lower()
with data.engine(ctx.database_url).connect() as conn:
    tree = traces.get_trace(conn, ctx.tenant, trace_id)
if tree is None:
    st.warning(f"No trace {ui.md(repr(trace_id))} for tenant {ui.md(ctx.tenant)}.")
    st.stop()
tot = tree["totals"]
st.subheader(f"Trace {ui.md(trace_id)}")
m = st.columns(5)
m[0].metric("Duration", ui.fmt(tot["latency_s"], "ms"))
m[1].metric("LLM calls", tot["llm_calls"])
m[2].metric("Tokens in / out", f"{tot['input_tokens'] or '–'} / {tot['output_tokens'] or '–'}")
m[3].metric("Cost", ui.fmt(tot["cost_usd"], "USD", 5))
m[4].metric("Errors", tot["errors"])
if tree["missing_parents"]:
    st.warning(
        f"{len(tree['missing_parents'])} parent span(s) never arrived; shown as placeholders."
    )
t0 = tot["start_unix_nano"] or 0
nodes = list(walk(tree["roots"]))
rows_out = []
for depth, n in nodes:
    call = n["call"]
    rows_out.append(
        {
            "span": "\u2003" * depth + ("└ " if depth else "") + n["label"],
            "kind": "missing" if n["missing"] else n["kind"],
            "start_ms": None if not n["start_unix_nano"] else (n["start_unix_nano"] - t0) / 1e6,
            "end_ms": None if not n["end_unix_nano"] else (n["end_unix_nano"] - t0) / 1e6,
            "duration_ms": None if n["duration_s"] is None else n["duration_s"] * 1000,
            "status": n["status"],
            "tokens": None
            if n["totals"]["input_tokens"] is None and n["totals"]["output_tokens"] is None
            else (n["totals"]["input_tokens"] or 0) + (n["totals"]["output_tokens"] or 0),
            "cost_usd": n["totals"]["cost_usd"],
            "call_id": call["call_id"] if call else n["call_ref"],
        }
    )
tree_df = pd.DataFrame(rows_out)
tabs = st.tabs(["Tree", "Waterfall"])
with tabs[0]:
    ui.table(
        tree_df.drop(columns=["end_ms"]),
        hide_index=True,
        key="traces_tree",
        column_config={
            "start_ms": st.column_config.NumberColumn("start (ms)", format="%.0f"),
            "duration_ms": st.column_config.NumberColumn("duration (ms)", format="%.0f"),
            "cost_usd": st.column_config.NumberColumn("cost (USD, subtree)", format="$%.5f"),
            "tokens": st.column_config.NumberColumn("tokens (subtree)"),
        },
    )
with tabs[1]:
    bars = tree_df.dropna(subset=["start_ms", "end_ms"]).assign(order=lambda d: d.index)
    chart = (
        alt.Chart(bars)
        .mark_bar()
        .encode(
            x=alt.X("start_ms:Q", title="ms since trace start"),
            x2="end_ms:Q",
            y=alt.Y("span:N", sort=alt.SortField("order"), title="span (indented by depth)"),
            color=alt.Color("kind:N"),
            tooltip=["span", "duration_ms", "status", "tokens", "cost_usd", "call_id"],
        )
    )
    st.altair_chart(chart, width="stretch")


def _open_call(call_id: str) -> None:
    st.session_state["calls_open"] = call_id
    st.session_state["traces_goto_call"] = call_id


llm = [r for r in rows_out if r["call_id"]]
if llm:
    st.markdown("**LLM calls in this trace**")
    cols = st.columns(min(len(llm), 4))
    for i, r in enumerate(llm):
        cols[i % len(cols)].button(
            f"Open call {ui.md(r['call_id'][-12:])}",
            key=f"traces_call_{i}",
            on_click=_open_call,
            args=(r["call_id"],),
            help=ui.md(r["span"].strip()),
        )
if st.session_state.pop("traces_goto_call", None):
    st.switch_page("views/calls.py")
