"""Calibrated quality per group: judge mean, human mean, PPI++ estimate with its interval, κ.

Per (rubric, judge model, group) over judged calls of a tenant:
  * judged set: every sample judged with a score; π_judge its inclusion probability;
  * labelled set: audit items with a human score (π = π_judge · π_audit);
  * unlabelled set: judged calls outside the audit subset (π = π_judge · (1 − π_audit));
    audit items still waiting for a label are in neither set.
Estimates: ``judge_mean`` is the Hajek mean of judge scores (weights 1/π_judge);
``human_mean`` the Hajek mean of labels (``judges.ppi.classic_mean``); the PPI++ estimate and its
(1 − alpha) interval from ``judges.ppi.ppi_mean`` with those inclusion probabilities (reference
§3.6); κ is quadratic-weighted Cohen's κ between the human and the judge's discrete score on the
labelled audit items (``judges.agreement.cohen_kappa``, reference §3.4), Spearman ρ alongside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection, and_, func, select

from collector.store.judgescore import usable_score
from collector.store.models import LLMCall
from collector.store.models.judges import HumanLabel, JudgeResultRow, JudgeSample, ReviewItem
from judges.agreement import cohen_kappa, spearman
from judges.ppi import PPIEstimate, classic_mean, ppi_mean
from judges.rubrics import RubricError, builtin_rubric

GroupBy = Literal["variant", "model", "rollout", "service", "none"]
_GROUP_COLUMNS = {
    "variant": LLMCall.variant,
    "model": LLMCall.model,
    "rollout": LLMCall.rollout,
    "service": LLMCall.service_name,
}


@dataclass(frozen=True)
class JudgedRow:
    """One judged call: judge score, π_judge, audit design and its human label if any."""

    group: str | None
    rubric: str
    judge_model: str
    score: float
    discrete_score: int | None
    judge_probability: float
    audit: bool
    audit_probability: float | None
    human_score: float | None
    labelled_at_s: float | None


@dataclass(frozen=True)
class QualityGroup:
    """Quality of one (rubric, judge model, group). Means on the rubric's scale; None = unknown.

    ``ppi``: None below 2 labelled or 2 unlabelled calls; ``kappa``: None when undefined.
    """

    group: str | None
    rubric: str
    judge_model: str
    n_judged: int
    n_labelled: int
    judge_mean: float | None
    human_mean: float | None
    ppi: PPIEstimate | None
    kappa: float | None
    spearman: float | None


def load_judged(
    conn: Connection,
    tenant: str,
    *,
    group_by: GroupBy = "variant",
    rubric: str | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
) -> list[JudgedRow]:
    """Judged calls of ``tenant`` (optionally one rubric, calls started in [since, until) ns)."""
    latest = (
        select(func.max(HumanLabel.id).label("label_id"), HumanLabel.review_item_id)
        .where(HumanLabel.tenant == tenant, HumanLabel.skipped.is_(False))
        .group_by(HumanLabel.review_item_id)
        .subquery()
    )
    group_col = _GROUP_COLUMNS.get(group_by)
    query = (
        select(
            (group_col if group_col is not None else LLMCall.tenant).label("grp"),
            JudgeResultRow.rubric_name,
            JudgeResultRow.judge_model,
            JudgeResultRow.score,
            JudgeResultRow.discrete_score,
            JudgeSample.inclusion_probability,
            JudgeSample.audit_probability,
            ReviewItem.audit,
            HumanLabel.score.label("human_score"),
            HumanLabel.created_at.label("labelled_at"),
        )
        .join(JudgeSample, JudgeSample.id == JudgeResultRow.sample_id)
        .join(
            LLMCall,
            and_(
                LLMCall.tenant == JudgeResultRow.tenant,
                LLMCall.trace_id == JudgeResultRow.trace_id,
                LLMCall.span_id == JudgeResultRow.span_id,
            ),
        )
        .outerjoin(ReviewItem, ReviewItem.sample_id == JudgeSample.id)
        .outerjoin(latest, latest.c.review_item_id == ReviewItem.id)
        .outerjoin(HumanLabel, HumanLabel.id == latest.c.label_id)
        .where(
            JudgeResultRow.tenant == tenant,
            usable_score(JudgeResultRow),
        )
    )
    if rubric is not None:
        query = query.where(JudgeResultRow.rubric_name == rubric)
    if since_ns is not None:
        query = query.where(LLMCall.start_unix_nano >= since_ns)
    if until_ns is not None:
        query = query.where(LLMCall.start_unix_nano < until_ns)
    out = []
    for r in conn.execute(query):
        out.append(
            JudgedRow(
                group=r.grp if group_col is not None else None,
                rubric=r.rubric_name,
                judge_model=r.judge_model,
                score=float(r.score),
                discrete_score=r.discrete_score,
                judge_probability=float(r.inclusion_probability),
                audit=bool(r.audit),
                audit_probability=r.audit_probability,
                human_score=r.human_score if r.audit else None,
                labelled_at_s=r.labelled_at.timestamp() if r.labelled_at is not None else None,
            )
        )
    return out


def _hajek(values: Sequence[float], probabilities: Sequence[float]) -> float | None:
    if not values:
        return None
    w = 1.0 / np.asarray(probabilities, dtype=float)
    return float(np.sum(w * np.asarray(values, dtype=float)) / np.sum(w))


def _scale_labels(rubric: str) -> tuple[int, ...] | None:
    try:
        return builtin_rubric(rubric).scale.scores
    except RubricError:
        return None


def summarize(rows: Sequence[JudgedRow], *, alpha: float = 0.1) -> QualityGroup:
    """The quality of one group's rows (all with the same rubric, judge model and group).

    Raises ValueError naming the parameter for empty ``rows`` or ``alpha`` outside (0, 1).
    """
    if not rows:
        raise ValueError("rows must be non-empty")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    first = rows[0]
    labelled = [r for r in rows if r.audit and r.human_score is not None]
    unlabelled = [r for r in rows if not r.audit]
    y = [float(r.human_score) for r in labelled if r.human_score is not None]
    f = [r.score for r in labelled]
    pi_lab = [r.judge_probability * (r.audit_probability or 1.0) for r in labelled]
    f_unl = [r.score for r in unlabelled]
    pi_unl = [r.judge_probability * (1.0 - (r.audit_probability or 0.0)) for r in unlabelled]
    human = classic_mean(y, alpha=alpha, inclusion=pi_lab).estimate if len(y) >= 2 else None
    ppi = None
    if len(y) >= 2 and len(f_unl) >= 2:
        ppi = ppi_mean(y, f, f_unl, alpha=alpha, inclusion=pi_lab, inclusion_unlabeled=pi_unl)
    discrete = [r.discrete_score for r in labelled]
    labels = _scale_labels(first.rubric)
    kappa = None
    if labelled and labels is not None:
        kappa = cohen_kappa(
            [int(v) for v in y], discrete, weights="quadratic", labels=labels
        ).statistic
    return QualityGroup(
        group=first.group,
        rubric=first.rubric,
        judge_model=first.judge_model,
        n_judged=len(rows),
        n_labelled=len(labelled),
        judge_mean=_hajek([r.score for r in rows], [r.judge_probability for r in rows]),
        human_mean=human,
        ppi=ppi,
        kappa=kappa,
        spearman=spearman(y, f).statistic if labelled else None,
    )


def quality_by_group(
    conn: Connection,
    tenant: str,
    *,
    group_by: GroupBy = "variant",
    rubric: str | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    alpha: float = 0.1,
) -> list[QualityGroup]:
    """``summarize`` per (rubric, judge model, group value), sorted by those keys (None first).

    Raises ValueError naming ``group_by`` when it is not one of variant, model, rollout,
    service, none, or ``alpha`` outside (0, 1).
    """
    if group_by not in (*_GROUP_COLUMNS, "none"):
        raise ValueError("group_by must be one of variant, model, rollout, service, none")
    rows = load_judged(
        conn, tenant, group_by=group_by, rubric=rubric, since_ns=since_ns, until_ns=until_ns
    )
    groups: dict[tuple[str, str, str | None], list[JudgedRow]] = {}
    for r in rows:
        groups.setdefault((r.rubric, r.judge_model, r.group), []).append(r)
    keys = sorted(groups, key=lambda k: (k[0], k[1], k[2] is not None, k[2] or ""))
    return [summarize(groups[k], alpha=alpha) for k in keys]


def group_to_dict(q: QualityGroup) -> dict[str, Any]:
    """JSON shape of one group for the API (unknown values null)."""
    ppi = None
    if q.ppi is not None:
        ppi = {
            "estimate": q.ppi.estimate,
            "ci_low": q.ppi.ci_low,
            "ci_high": q.ppi.ci_high,
            "confidence": 1.0 - q.ppi.alpha,
            "se": q.ppi.se,
            "lam": q.ppi.lam,
            "efficiency_gain": q.ppi.efficiency_gain,
        }
    return {
        "group": q.group,
        "rubric": q.rubric,
        "judge_model": q.judge_model,
        "n_judged": q.n_judged,
        "n_labelled": q.n_labelled,
        "judge_mean": q.judge_mean,
        "human_mean": q.human_mean,
        "ppi": ppi,
        "kappa": q.kappa,
        "spearman": q.spearman,
    }
