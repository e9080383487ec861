"""Quality: judge scores and human labels per variant, PPI estimate, κ, confusion, feedback."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data, data_quality, stats, ui

ctx = ui.page_context("Quality", "Judge scores, human audit labels and user feedback per variant.")
bucket = stats.bucket_size_s(ctx.window_s, max_buckets=24)

st.subheader("Judge scores and human labels over time")
st.caption("Mean score of the calls started in each interval (by call time, not judging time).")
if not data_quality.judges_ready(ctx.database_url):
    ui.no_data("judge scores", "The judges subsystem has not been installed / migrated yet.")
else:
    scores = data_quality.judge_scores(ctx.database_url, ctx.tenant, ctx.since_ns)
    labels = data_quality.human_labels(ctx.database_url, ctx.tenant, ctx.since_ns)
    if scores.empty:
        ui.no_data("judge scores", "No call has been judged in this window.")
    else:
        s = scores.assign(
            start_unix_nano=scores["call_start_unix_nano"],
            source="judge",
            variant=scores["variant"].fillna("?"),
        )
        h = labels.assign(
            start_unix_nano=labels["call_start_unix_nano"],
            source="human",
            score=labels["human_score"],
            variant=labels["variant"].fillna("?"),
        )
        both = pd.concat([s, h], ignore_index=True).dropna(subset=["start_unix_nano"])
        both["start_unix_nano"] = both["start_unix_nano"].astype("int64")
        both = stats.with_bucket(both, bucket)
        mean = both.groupby(["bucket", "variant", "source"], as_index=False)["score"].mean()
        charts.show(
            charts.line(
                mean,
                x="bucket",
                y="score",
                y_title="mean score (rubric scale 1–5)",
                color="variant",
                stroke_dash="source",
            )
        )
        est = data_quality.quality_estimates(ctx.database_url, ctx.tenant, ctx.since_ns)
        st.markdown(
            "**PPI++ estimate of the mean human score per variant (90 % interval)** — judge "
            "scores of every judged call, rectified by the human labels of the audit sample"
        )
        ui.table(
            est.rename(columns={"group": "variant"}),
            hide_index=True,
            column_config={
                c: st.column_config.NumberColumn(c, format="%.2f")
                for c in ("judge_mean", "human_mean", "ppi_estimate", "ppi_low", "ppi_high")
            }
            | {"kappa": st.column_config.NumberColumn("κ", format="%.3f")},
        )
        ok = est.dropna(subset=["ppi_estimate"]).rename(columns={"group": "variant"})
        if not ok.empty:
            base = alt.Chart(ok).encode(y=alt.Y("variant:N", title=None))
            charts.show(
                base.mark_rule(strokeWidth=3).encode(
                    x=alt.X(
                        "ppi_low:Q",
                        title="estimated mean human score (rubric scale)",
                        scale=alt.Scale(zero=False),
                    ),
                    x2="ppi_high:Q",
                )
                + base.mark_point(filled=True, size=90).encode(
                    x="ppi_estimate:Q",
                    tooltip=[
                        "variant",
                        alt.Tooltip("ppi_estimate:Q", format=".2f"),
                        alt.Tooltip("ppi_low:Q", format=".2f"),
                        alt.Tooltip("ppi_high:Q", format=".2f"),
                        "audit_labels",
                        "judged",
                    ],
                )
                + base.mark_tick(color="gray", thickness=2).encode(x="judge_mean:Q")
            )
            st.caption("Dot and bar: PPI++ estimate and interval; grey tick: judge-only mean.")
        overall = data_quality.quality_estimates(
            ctx.database_url, ctx.tenant, ctx.since_ns, group_by="none"
        )
        n, cm = data_quality.confusion(labels)
        k1, k2 = st.columns([1, 2])
        kappas = overall["kappa"].dropna()
        k1.metric(
            "Judge vs human κ (quadratic)", "–" if len(kappas) != 1 else f"{kappas.iloc[0]:.3f}"
        )
        k1.caption(f"{n} audit items with both a judge score and a human label")
        if n:
            with k2:
                charts.show(
                    alt.Chart(cm)
                    .mark_rect()
                    .encode(
                        x=alt.X("judge:O", title="judge score"),
                        y=alt.Y("human:O", title="human score", sort="descending"),
                        color=alt.Color("count:Q", title="items"),
                        tooltip=["human", "judge", "count"],
                    )
                    .properties(height=220, title="Confusion matrix (audit items)")
                )

st.subheader("User feedback per variant (events per 100 calls)")
rates = data.feedback_rates(ctx.database_url, ctx.tenant, ctx.since_ns, ctx.until_ns)
cols = [c for c in rates.columns if c.endswith("_per_100_calls")]
if rates.empty or not cols:
    ui.no_data("feedback", "No linked feedback event in this window.")
else:
    long = rates.melt(id_vars=["variant"], value_vars=cols, var_name="kind", value_name="rate")
    long["kind"] = long["kind"].str.replace("_per_100_calls", "", regex=False)
    charts.show(
        alt.Chart(long.dropna())
        .mark_bar()
        .encode(
            x=alt.X("rate:Q", title="events per 100 calls"),
            y=alt.Y("kind:N", title=None),
            color="variant:N",
            yOffset="variant:N",
            tooltip=["variant", "kind", alt.Tooltip("rate:Q", format=".2f")],
        )
    )
    ui.table(rates, hide_index=True)
