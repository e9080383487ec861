"""Drift: the latest run per segment, flagged signals first, histograms and effect sizes."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data_quality, ui

ctx = ui.page_context(
    "Drift",
    "Reference window vs current window per signal × segment (newest run of each segment). "
    "Effect sizes: normalised Wasserstein distance (numbers), Jensen–Shannon distance "
    "(categories), rate difference (proportions), held-out AUC above chance and centroid "
    "distance (prompt_* and answer_* embeddings, sampled).",
)
if not data_quality.drift_ready(ctx.database_url):
    ui.no_data("drift runs", "The drift monitor has not been installed / migrated yet.")
    st.stop()
run, results = data_quality.latest_drift(ctx.database_url, ctx.tenant)
if run is None or results.empty:
    ui.no_data("drift runs", "No drift run has finished for this tenant (`driftline drift run`).")
    st.stop()
results = results.assign(
    verdict=results["drifted"].map({True: "DRIFTED", False: "ok"}).fillna("insufficient data"),
    segment=results["segment"].fillna("all traffic"),
)
flagged = results[results["verdict"] == "DRIFTED"]
c = st.columns(4)
c[0].metric(
    "Signals drifted", f"{len(flagged)} / {int((results['verdict'] != 'insufficient data').sum())}"
)
c[1].metric("Segments", results["segment"].nunique())
c[2].metric("Reference calls", run["n_reference_calls"] or "–")
c[3].metric("Current calls", run["n_current_calls"] or "–")


def _when(ns: object) -> str:
    return (
        "–"
        if ns is None
        else pd.Timestamp(int(str(ns)), unit="ns", tz="UTC").strftime("%m-%d %H:%M")
    )


st.caption(
    f"Newest run {run['run_id']} started {pd.Timestamp(run['started_at']):%Y-%m-%d %H:%M} UTC · "
    f"{run['reference_kind']} reference {_when(run['reference_start_unix_nano'])} → "
    f"{_when(run['reference_end_unix_nano'])}, current {_when(run['current_start_unix_nano'])} → "
    f"{_when(run['current_end_unix_nano'])} UTC · FDR q = {run['fdr_q']}"
)

st.subheader("Segments")
segments = (
    results.groupby("segment", sort=False)
    .agg(
        run_started_at=("run_started_at", "max"),
        evaluated=("verdict", lambda v: int((v != "insufficient data").sum())),
        drifted=("verdict", lambda v: int((v == "DRIFTED").sum())),
    )
    .reset_index()
    .sort_values("drifted", ascending=False, kind="stable")
)
names = flagged.groupby("segment")["signal"].agg(", ".join)
segments["drifted_signals"] = segments["segment"].map(names).fillna("–")
ui.table(segments, hide_index=True)

st.subheader("Signals (flagged first)")
if flagged.empty:
    st.success("No signal drifted in the newest run of any segment.")
else:
    st.warning(
        "Drifted: "
        + "; ".join(f"**{ui.md(r.signal)}** in {ui.md(r.segment)}" for r in flagged.itertuples()),
        icon=":material/warning:",
    )
untested = results["verdict"] == "insufficient data"


def _shown(column: str, fmt: str) -> pd.Series:
    """``column`` formatted; "–" when unknown and for untested signals (a statistic computed
    on too few samples is not evidence, so none is shown)."""
    return pd.Series(
        [
            "–" if bad or pd.isna(v) else format(float(v), fmt)
            for v, bad in zip(results[column], untested, strict=True)
        ],
        index=results.index,
    )


ui.table(
    pd.DataFrame(
        {
            "verdict": results["verdict"],
            "signal": results["signal"],
            "segment": results["segment"],
            "method": results["method"].where(~untested, "–").fillna("–"),
            "effect size": _shown("effect_size", ".3f"),
            "effect kind": results["effect_kind"].where(~untested, "–").fillna("–"),
            "p-value": _shown("pvalue", ".2e"),
            "BH-adjusted p": _shown("adjusted_pvalue", ".2e"),
            "n reference": results["n_reference"].astype("string").fillna("–"),
            "n current": results["n_current"].astype("string").fillna("–"),
        }
    ),
    hide_index=True,
)
sized = results.dropna(subset=["effect_size"])
sized = sized[sized["verdict"] != "insufficient data"]
if not sized.empty:
    st.markdown("**Effect sizes of the tested signals**")
    st.caption("One panel per effect kind, each on its own axis (kinds are not comparable).")
    for kind, part in sized.groupby(sized["effect_kind"].fillna("unknown kind"), sort=True):
        charts.show(
            alt.Chart(part.assign(name=part["signal"] + " · " + part["segment"]))
            .mark_bar()
            .encode(
                x=alt.X("effect_size:Q", title=f"effect size: {kind}"),
                y=alt.Y("name:N", sort="-x", title="signal · segment"),
                color=alt.Color(
                    "verdict:N",
                    scale=alt.Scale(domain=["DRIFTED", "ok"], range=["#d62728", "#9ecae1"]),
                ),
                tooltip=[
                    "verdict",
                    "signal",
                    "segment",
                    alt.Tooltip("effect_size:Q", format=".3f"),
                ],
            )
            .properties(height=max(80, 24 * len(part)))
        )

st.subheader("Reference vs current")
options = {f"{r.verdict} · {r.signal} · {r.segment}": r for r in results.itertuples()}
pick = st.selectbox("Histogram of", list(options), key="drift_pick")
chosen = options[pick]
hist = data_quality.histogram_frame(chosen.histogram)
if hist.empty:
    st.caption("No histogram for this signal (embeddings or an empty window).")
else:
    st.caption(
        f"{ui.md(chosen.signal)} · {ui.md(chosen.segment)}: {chosen.method} test, effect size "
        f"{ui.fmt(chosen.effect_size, '', 3)} ({chosen.effect_kind}), p = "
        f"{'–' if pd.isna(chosen.pvalue) else f'{chosen.pvalue:.2e}'}, "
        f"n = {chosen.n_reference} reference / {chosen.n_current} current"
    )
    charts.show(
        alt.Chart(hist)
        .mark_bar(opacity=0.85)
        .encode(
            x=alt.X("bin:N", sort=None, title=f"{chosen.signal} (bin)"),
            y=alt.Y("share:Q", title="share of window (%)", axis=alt.Axis(format="%")),
            color=alt.Color("window:N", sort=["reference", "current"]),
            xOffset=alt.XOffset("window:N", sort=["reference", "current"]),
            tooltip=["window", "bin", alt.Tooltip("share:Q", format=".1%")],
        )
    )
