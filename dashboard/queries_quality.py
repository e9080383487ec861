"""Reads of the judge, review and drift tables (SQLAlchemy Core, one tenant at a time).

Used by :mod:`dashboard.data_quality` while the judges / drift packages expose no read
functions for these views. Wall times are tz-aware UTC datetimes; scores on the rubric's scale.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
from sqlalchemy import Engine, and_, desc, func, select

from collector.store.models import LLMCall


def judge_scores_frame(engine: Engine, tenant: str, since: dt.datetime) -> pd.DataFrame:
    """Successful judge results since ``since`` with the judged call's model and variant.

    Columns: created_at, rubric, judge_model, score, label, model, variant, trace_id, span_id,
    call_start_unix_nano (when the judged call started; None when the call is gone).
    """
    from collector.store.models.judges import JudgeResultRow

    j, c = JudgeResultRow.__table__, LLMCall.__table__
    q = (
        select(
            j.c.created_at,
            j.c.rubric_name.label("rubric"),
            j.c.judge_model,
            j.c.score,
            j.c.label,
            c.c.model,
            c.c.variant,
            j.c.trace_id,
            j.c.span_id,
            c.c.start_unix_nano,
        )
        .select_from(
            j.outerjoin(
                c,
                and_(
                    c.c.tenant == j.c.tenant,
                    c.c.trace_id == j.c.trace_id,
                    c.c.span_id == j.c.span_id,
                ),
            )
        )
        .where(j.c.tenant == tenant, j.c.status == "ok", j.c.created_at >= since)
        .order_by(j.c.created_at)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return pd.DataFrame(
        rows,
        columns=[
            "created_at",
            "rubric",
            "judge_model",
            "score",
            "label",
            "model",
            "variant",
            "trace_id",
            "span_id",
            "call_start_unix_nano",
        ],
    )


def human_labels_frame(engine: Engine, tenant: str, since: dt.datetime) -> pd.DataFrame:
    """Human labels (not skips) since ``since`` with the item's judge score and the call's variant.

    Columns: created_at, reviewer, rubric, audit, inclusion_probability, human_score,
    human_label, judge_score, judge_label, variant, comment, trace_id, span_id,
    call_start_unix_nano.
    """
    from collector.store.models.judges import HumanLabel, JudgeResultRow, ReviewItem

    h, r, j = HumanLabel.__table__, ReviewItem.__table__, JudgeResultRow.__table__
    c = LLMCall.__table__
    latest = (
        select(j.c.sample_id, func.max(j.c.id).label("rid"))
        .where(j.c.tenant == tenant, j.c.status == "ok")
        .group_by(j.c.sample_id)
        .subquery()
    )
    q = (
        select(
            h.c.created_at,
            h.c.reviewer,
            r.c.rubric,
            r.c.audit,
            r.c.inclusion_probability,
            h.c.score.label("human_score"),
            h.c.label.label("human_label"),
            j.c.score.label("judge_score"),
            j.c.label.label("judge_label"),
            c.c.variant,
            h.c.comment,
            r.c.trace_id,
            r.c.span_id,
            c.c.start_unix_nano,
        )
        .select_from(
            h.join(r, r.c.id == h.c.review_item_id)
            .outerjoin(latest, latest.c.sample_id == r.c.sample_id)
            .outerjoin(j, j.c.id == latest.c.rid)
            .outerjoin(
                c,
                and_(
                    c.c.tenant == r.c.tenant,
                    c.c.trace_id == r.c.trace_id,
                    c.c.span_id == r.c.span_id,
                ),
            )
        )
        .where(h.c.tenant == tenant, h.c.skipped.is_(False), h.c.created_at >= since)
        .order_by(h.c.created_at)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return pd.DataFrame(
        rows,
        columns=[
            "created_at",
            "reviewer",
            "rubric",
            "audit",
            "inclusion_probability",
            "human_score",
            "human_label",
            "judge_score",
            "judge_label",
            "variant",
            "comment",
            "trace_id",
            "span_id",
            "call_start_unix_nano",
        ],
    )


def review_progress(
    engine: Engine, tenant: str, reviewer: str, day_start: dt.datetime
) -> dict[str, int]:
    """Today's review work: ``labelled`` / ``skipped`` by ``reviewer`` since ``day_start``, and
    ``open`` items left in the tenant's queue (pending or claimed)."""
    from collector.store.models.judges import HumanLabel, ReviewItem

    h, r = HumanLabel.__table__, ReviewItem.__table__
    with engine.connect() as conn:
        done: dict[bool, int] = dict(
            conn.execute(
                select(h.c.skipped, func.count())
                .where(h.c.tenant == tenant, h.c.reviewer == reviewer, h.c.created_at >= day_start)
                .group_by(h.c.skipped)
            ).all()
        )
        open_ = conn.execute(
            select(func.count()).where(r.c.tenant == tenant, r.c.status != "labelled")
        ).scalar_one()
    return {
        "labelled": int(done.get(False, 0)),
        "skipped": int(done.get(True, 0)),
        "open": int(open_),
    }


def latest_drift_results(
    engine: Engine, tenant: str, *, runs: int = 20
) -> tuple[dict[str, object] | None, pd.DataFrame]:
    """The newest finished drift run of the tenant, and per segment the results of the newest
    of its last ``runs`` finished runs that tested that segment (a segment label of None is
    all traffic). Results carry ``run_id`` and ``run_started_at`` and are ordered flagged
    first (drifted, then insufficient data, then not drifted), then by ``|effect_size|``
    descending; ``(None, empty)`` when no run finished."""
    from collector.store.models.drift import DriftResultRow, DriftRun

    run_t, res_t = DriftRun.__table__, DriftResultRow.__table__
    with engine.connect() as conn:
        recent = (
            conn.execute(
                select(run_t)
                .where(run_t.c.tenant == tenant, run_t.c.status == "ok")
                .order_by(desc(run_t.c.started_at))
                .limit(runs)
            )
            .mappings()
            .all()
        )
        if not recent:
            return None, pd.DataFrame()
        started = {r["run_id"]: r["started_at"] for r in recent}
        rows = (
            conn.execute(
                select(res_t)
                .where(res_t.c.tenant == tenant, res_t.c.run_id.in_(list(started)))
                .order_by(res_t.c.run_id, res_t.c.seq)
            )
            .mappings()
            .all()
        )
    df = pd.DataFrame([dict(r) for r in rows])
    if df.empty:
        return dict(recent[0]), df
    df["run_started_at"] = df["run_id"].map(started)
    seg = df["segment"].astype("object").where(df["segment"].notna(), "")
    newest = df.groupby(seg)["run_started_at"].transform("max")
    df = df[df["run_started_at"] == newest].copy()
    df["flag"] = df["drifted"].map({True: 0, False: 2}).fillna(1)
    df["abs_effect"] = df["effect_size"].abs()
    df = df.sort_values(["flag", "abs_effect"], ascending=[True, False], na_position="last")
    return dict(recent[0]), df.drop(columns=["abs_effect"]).reset_index(drop=True)
