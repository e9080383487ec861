"""Drift: the latest run per segment, flagged signals first, histograms and effect sizes."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import charts, data_quality, ui

ctx = ui.page_context("Drift", "Reference window vs current window per signal × segment.")
if not data_quality.drift_ready(ctx.database_url):
    ui.no_data("drift runs", "The drift monitor has not been installed / migrated yet.")
    st.stop()
run, results = data_quality.latest_drift(ctx.database_url, ctx.tenant)
if run is None or results.empty:
    ui.no_data("drift runs", "No drift run has finished for this tenant (`driftline drift run`).")
    st.stop()
c = st.columns(4)
c[0].metric("Signals drifted", f"{run['n_drifted'] or 0} / {run['n_evaluated'] or 0}")
c[1].metric("Drift share", ui.fmt(run["drift_share"], "%"))
c[2].metric("Reference calls", run["n_reference_calls"] or "–")
c[3].metric("Current calls", run["n_current_calls"] or "–")
st.caption(f"Run {run['run_id']} started {run['started_at']} ({run['reference_kind']} reference)")
results = results.assign(
    verdict=results["drifted"].map({True: "DRIFTED", False: "ok"}).fillna("insufficient data"),
    segment=results["segment"].fillna("all traffic"),
)
st.dataframe(
    results[
        [
            "verdict",
            "signal",
            "segment",
            "method",
            "effect_size",
            "effect_kind",
            "pvalue",
            "adjusted_pvalue",
            "threshold",
            "n_reference",
            "n_current",
        ]
    ],
    hide_index=True,
    column_config={"pvalue": st.column_config.NumberColumn("p-value", format="%.2e")},
)
flagged = results.dropna(subset=["effect_size"])
if not flagged.empty:
    charts.show(
        alt.Chart(flagged.assign(name=flagged["signal"] + " · " + flagged["segment"]))
        .mark_bar()
        .encode(
            x=alt.X("effect_size:Q", title="effect size (see effect kind)"),
            y=alt.Y("name:N", sort="-x", title=None),
            color=alt.Color("verdict:N"),
            tooltip=[
                "signal",
                "segment",
                "effect_kind",
                alt.Tooltip("effect_size:Q", format=".3f"),
            ],
        )
    )
options = {f"{r.verdict} · {r.signal} · {r.segment}": r for r in results.itertuples()}
pick = st.selectbox("Histogram of", list(options), key="drift_pick")
hist = data_quality.histogram_frame(options[pick].histogram)
if hist.empty:
    st.caption("No histogram for this signal (embeddings or an empty window).")
else:
    charts.show(
        alt.Chart(hist)
        .mark_bar(opacity=0.8)
        .encode(
            x=alt.X("bin:N", sort=None, title=f"{options[pick].signal} (bin)"),
            y=alt.Y("share:Q", title="share of window", axis=alt.Axis(format="%")),
            color="window:N",
            xOffset="window:N",
        )
    )
