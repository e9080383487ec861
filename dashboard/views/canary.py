"""Canary: each rollout's step and weights, confidence sequences, decision, audit, overrides."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import charts, data_quality, ui

ctx = ui.page_context("Canary", "Anytime-valid evidence: safe to look at whenever you like.")
roll = data_quality.rollouts(ctx.database_url, ctx.tenant)
if roll is None:
    ui.no_data("rollouts", "The canary subsystem has not been installed / migrated yet.")
    st.stop()
if roll.empty:
    ui.no_data("rollouts", "Create one with `driftline canary create`.")
    st.stop()
ui.table(
    roll[
        [
            "name",
            "status",
            "baseline",
            "candidate",
            "step",
            "steps_pct",
            "candidate_weight_pct",
            "baseline_weight_pct",
            "last_action",
            "last_evaluated_at",
        ]
    ],
    hide_index=True,
    column_config={
        "candidate_weight_pct": st.column_config.NumberColumn("candidate (%)", format="%.0f"),
        "baseline_weight_pct": st.column_config.NumberColumn("baseline (%)", format="%.0f"),
    },
)
name = st.selectbox("Rollout", roll["name"].tolist(), key="canary_pick")
r = roll[roll["name"] == name].iloc[0]
c = st.columns(4)
c[0].metric("Status", ui.md(r["status"]))
c[1].metric("Step", f"{r['step'] + 1} of {r['steps_pct'].count('%')}", help=ui.md(r["steps_pct"]))
c[2].metric(
    "Weights",
    f"{r['baseline_weight_pct']:.0f} % / {r['candidate_weight_pct']:.0f} %",
    help=ui.md(f"{r['baseline']} / {r['candidate']}"),
)
c[3].metric("Decision", ui.md(r["last_action"] or "not evaluated yet"))
if r["last_reasons"]:
    st.markdown("**Reasons:** " + ui.md("; ".join(r["last_reasons"])))

st.subheader("Confidence sequence per metric (candidate − baseline)")
cs = data_quality.confidence_sequences(ctx.database_url, ctx.tenant, name, ctx.until_ns)
if cs.empty:
    ui.no_data("evidence", "No call of this rollout has arrived since it started.")
else:
    names = sorted(cs["metric"].unique())
    # open on the metric that decided (named first in the reasons), else TTFT
    reasons = [str(x) for x in (r["last_reasons"] or [])]
    deciding = [n for x in reasons for n in names if x.startswith(f"{n}:")]
    first = deciding[0] if deciding else ("ttft_s" if "ttft_s" in names else names[0])
    metric = st.selectbox("Metric", names, index=names.index(first), key="canary_metric")
    m = cs[cs["metric"] == metric].dropna(subset=["estimate"])
    band = (
        alt.Chart(m)
        .mark_area(opacity=0.25)
        .encode(
            x=alt.X("time:T", axis=charts.TIME_AXIS),
            y=alt.Y("ci_lower:Q", title=f"{metric}: candidate − c × baseline (metric unit)"),
            y2="ci_upper:Q",
        )
    )
    est = (
        alt.Chart(m)
        .mark_line(point=True)
        .encode(
            x="time:T",
            y="estimate:Q",
            tooltip=[
                "time:T",
                "status:N",
                "n_baseline:Q",
                "n_candidate:Q",
                alt.Tooltip("estimate:Q", format=".4g"),
                alt.Tooltip("e_value:Q", format=".3g"),
            ],
        )
    )
    null = float(m["null_value"].iloc[0]) if not m.empty else 0.0
    bound = alt.Chart(m.head(1)).mark_rule(strokeDash=[4, 4]).encode(y=alt.datum(null))
    charts.show((band + est + bound).properties(height=280))
    st.caption(
        "Band: the one-sided bounds the decision uses, each at level α/K (K metrics), valid at "
        f"every look. Dashed line: the tolerated harm ({null:g}); c = 1 + margin for a relative "
        "margin, else 1. Band entirely on the harm side of the line: worse than tolerated "
        "(rollback); entirely on the other side: non-inferior (promote once the step's minimum "
        "samples and time are met). Rare-event metrics have no band (count e-value only)."
    )
    ui.table(cs[cs["time"] == cs["time"].max()], hide_index=True)

st.subheader("Audit log")
audit = data_quality.rollout_decisions(ctx.database_url, ctx.tenant, name)
ui.table(audit, hide_index=True)

st.subheader("Manual override")
if not ctx.allows("admin"):
    st.caption(f"Overrides need an admin key (this key: {ctx.principal.role}).")
    st.stop()
actions = {"running": ["pause", "abort"], "paused": ["resume", "abort"]}.get(r["status"], [])
if not actions:
    st.caption(f"The rollout is {ui.md(r['status'])}; nothing to override.")
    st.stop()
reason = st.text_input("Reason (goes to the audit log)", key="canary_reason")
cols = st.columns(len(actions))
for col, action in zip(cols, actions, strict=True):
    if col.button(action.capitalize(), key=f"canary_{action}"):
        st.session_state["canary_confirm"] = action
pending = st.session_state.get("canary_confirm")
if pending in actions:
    st.warning(
        f"{pending.capitalize()} rollout **{ui.md(name)}**? This changes the gateway's weights."
    )
    yes, no = st.columns(2)
    if yes.button(f"Confirm {pending}", key="canary_yes", type="primary"):
        try:
            status = data_quality.override_rollout(
                ctx.database_url, ctx.tenant, name, pending, reason, ctx.actor
            )
        except ValueError as exc:
            st.error(ui.md(exc))
        else:
            st.session_state.pop("canary_confirm", None)
            st.success(ui.md(f"{name}: {pending} applied, status now {status}."))
            st.rerun()
    if no.button("Cancel", key="canary_no"):
        st.session_state.pop("canary_confirm", None)
        st.rerun()
