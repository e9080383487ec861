"""Sessions: conversations (calls sharing gen_ai.conversation.id / session.id), one shown
turn by turn with its judge scores, feedback and cost."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from collector.store import sessions
from dashboard import data, ui

ctx = ui.page_context("Sessions", "Most recently active first; cost USD, tokens summed.")
f = st.columns(2)
user = f[0].text_input("User", key="sessions_user").strip() or None
limit = f[1].selectbox("Rows", [50, 200], key="sessions_limit")
with data.engine(ctx.database_url).connect() as conn:
    items, _ = sessions.list_sessions(
        conn,
        ctx.tenant,
        user_id=user,
        since_unix_nano=ctx.since_ns,
        until_unix_nano=ctx.until_ns,
        limit=int(limit),
    )
if not items:
    ui.no_data("sessions", f"No call with a session id in the {ctx.range_label}.")
    st.stop()
listing = pd.DataFrame(
    [
        {
            "session": s["session_id"],
            "last_at": s["last_at"],
            "calls": s["calls"],
            "tokens": (s["input_tokens"] or 0) + (s["output_tokens"] or 0),
            "cost_usd": s["cost_usd"],
            "errors": s["errors"],
            "feedback": ", ".join(f"{k} {v}" for k, v in sorted(s["feedback"].items())) or "",
            "judge": ", ".join(
                f"{k} {v['mean_score']:.2f} (n={v['n']})"
                for k, v in sorted(s["judge_scores"].items())
                if v["mean_score"] is not None
            ),
        }
        for s in items
    ]
)
event = ui.table(
    listing,
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="sessions_table",
    column_config={"cost_usd": st.column_config.NumberColumn("cost (USD)", format="$%.5f")},
)
rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
default_id = listing.iloc[rows[0]]["session"] if rows else listing.iloc[0]["session"]
session_id = st.text_input("Open session", value=default_id, key="sessions_open").strip()
with data.engine(ctx.database_url).connect() as conn:
    conv = sessions.get_session(conn, ctx.tenant, session_id)
if conv is None:
    st.warning(f"No session {ui.md(repr(session_id))} for tenant {ui.md(ctx.tenant)}.")
    st.stop()
st.subheader(f"Session {ui.md(session_id)}")
m = st.columns(4)
m[0].metric("Calls", conv["calls"])
m[1].metric("Traces", conv["traces"])
m[2].metric("Cost", ui.fmt(conv["cost_usd"], "USD", 5))
m[3].metric("Errors", conv["errors"])
if conv["truncated"]:
    st.caption(f"Showing the first {len(conv['turns'])} calls.")
for turn in conv["turns"]:
    with st.chat_message("user"):
        st.text(turn["input_text"] or "(prompt not captured)")
    with st.chat_message("assistant"):
        st.text(turn["output_text"] or "(answer not captured)")
        scores = " · ".join(
            f"{j['rubric_name']} {j['score']:g}" for j in turn["judge"] if j["score"] is not None
        )
        st.caption(
            ui.md(
                f"{turn['started_at']} · {turn['model'] or '?'} · "
                f"{turn['input_tokens'] or '–'}/{turn['output_tokens'] or '–'} tokens · "
                f"{ui.fmt(turn['cost_usd'], 'USD', 5)} · call {turn['call_id']}"
                + (f" · judge: {scores}" if scores else "")
            )
        )
