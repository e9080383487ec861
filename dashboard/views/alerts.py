"""Alerts: firing and history, silences in effect, receivers' delivery status."""

from __future__ import annotations

import time

import streamlit as st

from dashboard import data, ui

ctx = ui.page_context("Alerts", "Alert states as the collector's evaluator stored them.")
alerts = data.alerts(ctx.database_url, ctx.tenant)
firing = alerts[alerts["status"] == "firing"]
c = st.columns(3)
c[0].metric("Firing", len(firing))
c[1].metric("Pending", int((alerts["status"] == "pending").sum()))
c[2].metric("Resolved (history)", int((alerts["status"] == "resolved").sum()))
cfg = {
    "value": st.column_config.NumberColumn("last value (rule unit)", format="%.4g"),
    "fired_at": st.column_config.DatetimeColumn("fired at (UTC)"),
    "resolved_at": st.column_config.DatetimeColumn("resolved at (UTC)"),
}
st.subheader("Firing")
if firing.empty:
    st.success("Nothing is firing.")
else:
    ui.table(firing, hide_index=True, column_config=cfg)
st.subheader("History")
history = alerts[alerts["status"] != "firing"]
if history.empty and not firing.empty:
    st.caption("No pending or resolved alert yet (the firing ones are above).")
elif history.empty:
    ui.no_data("alert history", "No rule has fired for this tenant.")
else:
    ui.table(history, hide_index=True, column_config=cfg)
st.subheader("Silences in effect")
sil = data.silences(ctx.database_url, ctx.tenant, float(int(time.time()) // 10 * 10))
if sil.empty:
    st.caption("No silence in effect.")
else:
    ui.table(sil, hide_index=True)
st.subheader("Receivers' delivery status")
out = data.deliveries(ctx.database_url, ctx.tenant)
if out.empty:
    ui.no_data("notifications", "No notification has been sent to a receiver.")
else:
    summary = out.groupby(["receiver", "status"]).size().unstack(fill_value=0).reset_index()
    ui.table(summary, hide_index=True)
    if not ctx.allows("admin"):
        # a failed answer's body may hold what a receiver's host leaked: admins only, as the
        # API's /alerts/deliveries does
        out = out.drop(columns=["last_error"])
        st.caption("Failed answers' bodies (last_error) are shown to admin keys only.")
    ui.table(out, hide_index=True)
