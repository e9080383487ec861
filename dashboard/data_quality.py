"""Cached query functions of the quality pages: rollouts (canary), judges, review, drift.

Each subsystem may not be installed or migrated yet: then the function returns None and the
page shows its "no data yet" state. Canary reads go through ``drift.canary.store`` and
``drift.canary.jobs`` (the confidence sequences are re-computed at past looks with
``evaluate_rollout(..., apply=False)``, which writes nothing); PPI, κ and means through
``judges.quality`` (as the quality API), the confusion matrix through ``judges.agreement``;
the review queue through ``judges.review``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import queries_quality
from dashboard.data import CACHE_TTL_S, engine, tables_present
from drift import errors as drift_errors
from drift.canary import jobs as canary_jobs
from drift.canary import store as canary_store
from judges import agreement as judges_agreement
from judges import quality as judges_quality
from judges import review as judges_review

CANARY_TABLES = ("rollouts", "rollout_decisions")
JUDGE_TABLES = ("judge_results", "review_items", "human_labels")
DRIFT_TABLES = ("drift_runs", "drift_results")


def canary_ready(database_url: str) -> bool:
    """Canary code installed and its tables migrated."""
    return tables_present(database_url, CANARY_TABLES)


def judges_ready(database_url: str) -> bool:
    """Judge tables migrated."""
    return tables_present(database_url, JUDGE_TABLES)


def review_ready(database_url: str) -> bool:
    """Review-queue code installed and its tables migrated."""
    return judges_ready(database_url)


def drift_ready(database_url: str) -> bool:
    """Drift tables migrated."""
    return tables_present(database_url, DRIFT_TABLES)


def _ts(ns: int | None) -> pd.Timestamp | None:
    return None if ns is None else pd.Timestamp(ns, unit="ns", tz="UTC")


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def rollouts(database_url: str, tenant: str) -> pd.DataFrame | None:
    """Rollouts of the tenant (None when canary has not landed): name, baseline, candidate,
    status, step, weights (percent), last action and reasons, started / finished (UTC)."""
    if not canary_ready(database_url):
        return None
    store = canary_store
    recs = store.list_rollouts(engine(database_url), tenant)
    cols = [
        "name",
        "baseline",
        "candidate",
        "status",
        "step",
        "steps_pct",
        "candidate_weight_pct",
        "baseline_weight_pct",
        "version",
        "last_action",
        "last_reasons",
        "last_evaluated_at",
        "started",
        "finished",
    ]
    return pd.DataFrame(
        [
            {
                "name": r.name,
                "baseline": r.policy.baseline_variant,
                "candidate": r.policy.candidate_variant,
                "status": r.status,
                "step": r.step_index,
                "steps_pct": " → ".join(f"{p:g} %" for p in r.policy.steps_pct),
                "candidate_weight_pct": r.candidate_weight_pct,
                "baseline_weight_pct": r.baseline_weight_pct,
                "version": r.version,
                "last_action": r.last_action,
                "last_reasons": list(r.last_reasons),
                "last_evaluated_at": r.last_evaluated_at,
                "started": _ts(r.data_since_unix_nano),
                "finished": r.finished_at,
            }
            for r in recs
        ],
        columns=cols,
    )


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def rollout_decisions(database_url: str, tenant: str, name: str) -> pd.DataFrame:
    """The audit log of one rollout, newest first."""
    store = canary_store
    return pd.DataFrame(store.list_decisions(engine(database_url), tenant, name, limit=200))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def confidence_sequences(
    database_url: str, tenant: str, name: str, until_ns: int, looks: int = 24
) -> pd.DataFrame:
    """Each policy metric's anytime-valid confidence sequence at ``looks`` evenly spaced times
    from the rollout's start to ``until_ns``.

    Columns: time, metric, role, estimate (the tested contrast ``candidate − c × baseline``,
    metric units; ``c = 1 + margin`` for a relative margin, else 1), ci_lower, ci_upper: the
    one-sided bounds the decision uses, each at the per-metric level alpha/K
    (``drift.canary.sequential.one_sided_bound``; Howard et al. 2021): the harm test's bound
    on its side and the non-inferiority test's on the other, so the harm e-value reaches
    K/alpha exactly when the harm-side bound crosses ``null_value`` and the non-inferiority
    e-value exactly when the other bound does (None for rare-event metrics, which have no
    bound); null_value (the tolerated-harm boundary of the contrast: the margin for an
    absolute margin, 0 for a relative one), e_value (harm), ni_e_value, threshold (K/alpha),
    status, n_baseline, n_candidate. Looks before any data give no rows.
    """
    store = canary_store
    jobs = canary_jobs
    eng = engine(database_url)
    rec = store.get_rollout(eng, tenant, name)
    start = rec.data_since_unix_nano
    end = until_ns if rec.finished_at is None else int(rec.finished_at.timestamp() * 1e9)
    rows: list[dict[str, Any]] = []
    if end <= start:
        return pd.DataFrame(rows)
    for i in range(1, looks + 1):
        t = start + (end - start) * i // looks
        now = dt.datetime.fromtimestamp(t / 1e9, dt.UTC)
        ev = jobs.evaluate_rollout(eng, rec, now=now, apply=False).decision.evidence
        for m in ev.metrics:
            harm, ni = m.harm, m.non_inferiority
            if harm is None or ni is None:
                continue
            rows.append(
                {
                    "time": pd.Timestamp(t, unit="ns", tz="UTC"),
                    "metric": m.name,
                    "role": m.role,
                    "estimate": harm.statistic,
                    "ci_lower": harm.ci_lower if harm.ci_lower is not None else ni.ci_lower,
                    "ci_upper": harm.ci_upper if harm.ci_upper is not None else ni.ci_upper,
                    "null_value": harm.null_value,
                    "e_value": harm.e_value,
                    "ni_e_value": ni.e_value,
                    "threshold": ev.threshold,
                    "status": str(m.status),
                    "n_baseline": m.n_baseline,
                    "n_candidate": m.n_candidate,
                }
            )
    return pd.DataFrame(rows)


def override_rollout(
    database_url: str, tenant: str, name: str, action: str, reason: str, actor: str
) -> str:
    """Apply a manual ``pause`` / ``resume`` / ``abort`` (audited); returns the new status.

    Raises:
        ValueError: empty reason, unknown action, or the canary store refused it (no such
            rollout, invalid state, a concurrent change), with its message.
    """
    if not reason.strip():
        raise ValueError("reason must not be empty")
    jobs = canary_jobs
    errors = drift_errors
    try:
        after, _ = jobs.override_rollout(
            engine(database_url),
            tenant,
            name,
            action,
            reason.strip(),
            actor=actor,
            now=dt.datetime.now(dt.UTC),
        )
    except errors.DriftError as exc:
        raise ValueError(str(exc)) from exc
    st.cache_data.clear()
    return str(after.status)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def judge_scores(database_url: str, tenant: str, since_ns: int) -> pd.DataFrame:
    """Successful judge scores since ``since_ns`` with the call's model / variant."""
    since = dt.datetime.fromtimestamp(since_ns / 1e9, dt.UTC)
    return queries_quality.judge_scores_frame(engine(database_url), tenant, since)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def human_labels(database_url: str, tenant: str, since_ns: int) -> pd.DataFrame:
    """Human labels since ``since_ns`` with the judge's score on the same item."""
    since = dt.datetime.fromtimestamp(since_ns / 1e9, dt.UTC)
    return queries_quality.human_labels_frame(engine(database_url), tenant, since)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def quality_estimates(
    database_url: str,
    tenant: str,
    since_ns: int,
    group_by: judges_quality.GroupBy = "variant",
    alpha: float = 0.1,
) -> pd.DataFrame:
    """Per (rubric, judge model, ``group_by`` value) over calls started since ``since_ns``:
    judged and audit-labelled counts, the design-weighted judge and human means, the PPI++
    estimate of the mean human score with its (1 − alpha) interval (Angelopoulos et al. 2023)
    and quadratic-weighted Cohen's κ — computed by :func:`judges.quality.quality_by_group`,
    the same numbers as ``GET /api/v1/quality``. Unknown values are None.

    Columns: group, rubric, judge_model, judged, audit_labels, judge_mean, human_mean,
    ppi_estimate, ppi_low, ppi_high, kappa.
    """
    quality = judges_quality
    with engine(database_url).connect() as conn:
        groups = quality.quality_by_group(
            conn, tenant, group_by=group_by, since_ns=since_ns, alpha=alpha
        )
    return pd.DataFrame(
        [
            {
                "group": "?" if q.group is None else q.group,
                "rubric": q.rubric,
                "judge_model": q.judge_model,
                "judged": q.n_judged,
                "audit_labels": q.n_labelled,
                "judge_mean": q.judge_mean,
                "human_mean": q.human_mean,
                "ppi_estimate": None if q.ppi is None else q.ppi.estimate,
                "ppi_low": None if q.ppi is None else q.ppi.ci_low,
                "ppi_high": None if q.ppi is None else q.ppi.ci_high,
                "kappa": q.kappa,
            }
            for q in groups
        ],
        columns=[
            "group",
            "rubric",
            "judge_model",
            "judged",
            "audit_labels",
            "judge_mean",
            "human_mean",
            "ppi_estimate",
            "ppi_low",
            "ppi_high",
            "kappa",
        ],
    )


def confusion(labels: pd.DataFrame) -> tuple[int, pd.DataFrame]:
    """Judge vs human on audit labels: the number of pairs and the confusion matrix (rows
    human, columns judge; ``judges.agreement.confusion_matrix``) as a long frame
    ``human, judge, count``."""
    agr = judges_agreement
    audit = labels[labels["audit"].astype(bool)].dropna(subset=["human_score", "judge_score"])
    h = [round(float(v)) for v in audit["human_score"]]
    j = [round(float(v)) for v in audit["judge_score"]]
    if not h:
        return 0, pd.DataFrame(columns=["human", "judge", "count"])
    cm = agr.confusion_matrix(h, j)
    long = [
        {"human": str(hl), "judge": str(jl), "count": cm.counts[a][b]}
        for a, hl in enumerate(cm.labels)
        for b, jl in enumerate(cm.labels)
    ]
    return len(h), pd.DataFrame(long)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def latest_drift(database_url: str, tenant: str) -> tuple[dict[str, Any] | None, pd.DataFrame]:
    """The newest finished drift run and its results, flagged signals first."""
    return queries_quality.latest_drift_results(engine(database_url), tenant)


def review_progress(database_url: str, tenant: str, reviewer: str) -> dict[str, int]:
    """Today's (UTC) labelled / skipped counts of ``reviewer`` and the open queue size."""
    day = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return queries_quality.review_progress(engine(database_url), tenant, reviewer, day)


def next_review(database_url: str, tenant: str, reviewer: str) -> Any | None:
    """Claim (or re-read) the reviewer's next task (``judges.review.ReviewTask``) for 10 min."""
    review = judges_review
    return review.next_item(engine(database_url), tenant, reviewer, lease_s=600.0)


def submit_review(
    database_url: str,
    tenant: str,
    item_id: int,
    reviewer: str,
    *,
    score: int | None,
    comment: str | None,
    skip: bool,
    corrected_output: str | None = None,
) -> Any:
    """Store a label (or skip) through ``judges.review.submit_label``; clears cached reads.

    ``corrected_output``: the reviewer's rewritten answer (blank = none), for the flywheel.
    """
    review = judges_review
    stored = review.submit_label(
        engine(database_url),
        tenant,
        item_id,
        reviewer,
        score=score,
        comment=comment or None,
        corrected_output=corrected_output
        if corrected_output and corrected_output.strip()
        else None,
        skip=skip,
    )
    st.cache_data.clear()
    return stored


def histogram_frame(histogram: dict[str, Any] | None) -> pd.DataFrame:
    """A drift result's stored histogram as ``bin, window, share`` (share of the window's
    non-null values, so windows of different sizes compare)."""
    if not histogram:
        return pd.DataFrame(columns=["bin", "window", "share"])
    if histogram.get("type") == "bins":
        edges = histogram.get("edges") or []
        names = [f"{edges[i]:.4g}–{edges[i + 1]:.4g}" for i in range(len(edges) - 1)]
    else:
        names = [str(c) for c in histogram.get("categories") or []]
    rows = []
    for window in ("reference", "current"):
        counts = np.asarray(histogram.get(window) or [], dtype=float)
        total = counts.sum()
        for name, c in zip(names, counts, strict=False):
            rows.append({"bin": name, "window": window, "share": c / total if total else None})
    return pd.DataFrame(rows)


def judge_verdict(
    database_url: str, tenant: str, trace_id: str, span_id: str
) -> list[dict[str, Any]]:
    """The judge's results on one call (shown to a reviewer only after labelling)."""
    from dashboard import queries

    return [
        {k: r[k] for k in ("rubric_name", "judge_model", "status", "score", "label", "explanation")}
        for r in queries.judge_results_of_call(engine(database_url), tenant, trace_id, span_id)
    ]
