"""The human review queue: claim the next item with a lease, label it on its rubric, or skip it.

Reviewers are blind to the judge's verdict (the task shows prompt, answer and rubric only) so
that agreement measures the judge, not anchoring. Audit items come first: they are the uniformly
random subset agreement and PPI are computed on. A skip is recorded; the item returns to the
queue for other reviewers and is not offered again to the one who skipped it.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, and_, exists, insert, or_, select, update

from collector.errors import ConfigError
from collector.store.models import LLMCall
from collector.store.models.judges import HumanLabel, ReviewItem
from judges.errors import JudgeError
from judges.rubrics import Rubric, RubricError
from judges.score_configs import config_of_rubric
from judges.settings import ENV_PREFIX as JUDGE_ENV_PREFIX
from judges.user_rubrics import all_rubrics


class ReviewNotFoundError(JudgeError):
    """No review item with this id for this tenant."""


class ReviewConflictError(JudgeError):
    """The item is held by another reviewer, or was already labelled, or the label is invalid."""


@dataclass(frozen=True)
class ReviewTask:
    """A claimed review item: what the reviewer sees (no judge verdict)."""

    id: int
    rubric: Rubric
    call_id: str
    trace_id: str
    span_id: str
    model: str | None
    variant: str | None
    prompt: str | None
    answer: str | None
    audit: bool
    reason: str
    lease_expires_at: dt.datetime


@dataclass(frozen=True)
class StoredLabel:
    """A stored label (or skip) of ``review_item_id`` by ``reviewer``."""

    id: int
    review_item_id: int
    reviewer: str
    score: float | None
    label: str | None
    skipped: bool


def configured_rubrics() -> dict[str, Rubric]:
    """The rubrics a review item or an outside score may name: shipped ones plus those in
    ``DRIFTLINE_JUDGE_RUBRIC_DIR`` (the same set the judge worker scores with). Reads only that
    variable: the rest of the judge configuration is the worker's to validate.

    Raises:
        ConfigError: a rubric file in the folder is invalid (the message names the variable).
    """
    folder = os.environ.get(f"{JUDGE_ENV_PREFIX}RUBRIC_DIR") or None
    try:
        return all_rubrics(folder)
    except RubricError as exc:
        raise ConfigError(f"{JUDGE_ENV_PREFIX}RUBRIC_DIR: {exc}") from None


def _rubric(name: str, rubrics: dict[str, Rubric] | None) -> Rubric:
    known = configured_rubrics() if rubrics is None else rubrics
    if name not in known:
        raise ReviewConflictError(
            f"review item's rubric {name!r} is not loaded here (known: {sorted(known)}); "
            "set DRIFTLINE_JUDGE_RUBRIC_DIR to the folder the judge worker uses"
        )
    return known[name]


def _open(now: dt.datetime) -> Any:
    return or_(
        ReviewItem.status == "pending",
        and_(ReviewItem.status == "claimed", ReviewItem.lease_expires_at < now),
    )


def next_item(
    engine: Engine,
    tenant: str,
    reviewer: str,
    *,
    lease_s: float,
    rubric: str | None = None,
    now: dt.datetime | None = None,
    rubrics: dict[str, Rubric] | None = None,
) -> ReviewTask | None:
    """Claim the next review item of ``tenant`` for ``reviewer`` for ``lease_s`` seconds.

    An item the reviewer already holds is returned again (lease renewed). Audit items first, then
    oldest; items on a rubric not in ``rubrics`` (default :func:`configured_rubrics`) are left
    in the queue. None when the queue is empty. Raises ValueError naming the parameter for an
    empty ``reviewer`` or ``lease_s`` <= 0.
    """
    if not reviewer:
        raise ValueError("reviewer must be non-empty")
    if lease_s <= 0:
        raise ValueError("lease_s must be > 0")
    now = now or dt.datetime.now(dt.UTC)
    expires = now + dt.timedelta(seconds=lease_s)
    known = configured_rubrics() if rubrics is None else rubrics
    skipped_by_me = exists().where(
        HumanLabel.review_item_id == ReviewItem.id,
        HumanLabel.reviewer == reviewer,
        HumanLabel.skipped.is_(True),
    )
    with engine.begin() as conn:
        mine = or_(
            _open(now),
            and_(ReviewItem.status == "claimed", ReviewItem.lease_owner == reviewer),
        )
        query = (
            select(ReviewItem.id)
            .where(ReviewItem.tenant == tenant, mine, ~skipped_by_me)
            .order_by(
                (ReviewItem.lease_owner == reviewer).desc(),
                ReviewItem.audit.desc(),
                ReviewItem.id,
            )
            .limit(8)
        )
        if rubric is not None:
            query = query.where(ReviewItem.rubric == rubric)
        # an item on a rubric this process has not loaded is left for one that has (claiming
        # it here would fail and, first in the order, block the whole queue)
        query = query.where(ReviewItem.rubric.in_(sorted(known)))
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        for (item_id,) in conn.execute(query).all():
            taken = conn.execute(
                update(ReviewItem)
                .where(ReviewItem.id == item_id, mine)
                .values(status="claimed", lease_owner=reviewer, lease_expires_at=expires)
            ).rowcount
            if taken:
                return _task(conn, item_id, expires, known)
    return None


def _task(
    conn: Any, item_id: int, expires: dt.datetime, rubrics: dict[str, Rubric] | None
) -> ReviewTask:
    row = conn.execute(
        select(
            ReviewItem.__table__,
            LLMCall.model,
            LLMCall.variant,
            LLMCall.input_text,
            LLMCall.output_text,
        )
        .outerjoin(
            LLMCall,
            and_(
                LLMCall.tenant == ReviewItem.tenant,
                LLMCall.trace_id == ReviewItem.trace_id,
                LLMCall.span_id == ReviewItem.span_id,
            ),
        )
        .where(ReviewItem.id == item_id)
    ).one()
    item = row
    return ReviewTask(
        id=item.id,
        rubric=_rubric(item.rubric, rubrics),
        call_id=item.call_id,
        trace_id=item.trace_id,
        span_id=item.span_id,
        model=row.model,
        variant=row.variant,
        prompt=row.input_text,
        answer=row.output_text,
        audit=item.audit,
        reason=item.reason,
        lease_expires_at=expires,
    )


def submit_label(
    engine: Engine,
    tenant: str,
    item_id: int,
    reviewer: str,
    *,
    score: int | None = None,
    comment: str | None = None,
    corrected_output: str | None = None,
    skip: bool = False,
    now: dt.datetime | None = None,
    rubrics: dict[str, Rubric] | None = None,
) -> StoredLabel:
    """Label review item ``item_id`` with ``score`` on its rubric's scale, or ``skip`` it.

    The score is checked by the rubric's score config (:mod:`judges.score_configs`, the same one
    judges and ``POST /api/v1/scores`` use), which also gives its label. ``rubrics``: as in
    :func:`next_item`. The reviewer must hold the item's claim or the item must be open
    (pending / lease expired). Raises ReviewNotFoundError (no such item for the tenant),
    ReviewConflictError (held by someone else, already labelled, score missing / off the scale,
    rubric not loaded, or both score and skip).
    """
    now = now or dt.datetime.now(dt.UTC)
    if skip and score is not None:
        raise ReviewConflictError("give either a score or skip=true, not both")
    if not skip and score is None:
        raise ReviewConflictError("score is required unless skip=true")
    with engine.begin() as conn:
        item = conn.execute(
            select(ReviewItem.rubric, ReviewItem.status).where(
                ReviewItem.tenant == tenant, ReviewItem.id == item_id
            )
        ).first()
        if item is None:
            raise ReviewNotFoundError(f"review item {item_id} not found")
        label = None
        if score is not None:
            rubric = _rubric(item.rubric, rubrics)
            try:
                _, label = config_of_rubric(rubric).normalize(score, None)
            except ValueError as exc:
                raise ReviewConflictError(f"score: {exc} (rubric {rubric.name})") from exc
        held_by_me = and_(ReviewItem.status == "claimed", ReviewItem.lease_owner == reviewer)
        values: dict[str, Any] = (
            {"status": "pending", "lease_owner": None, "lease_expires_at": None}
            if skip
            else {"status": "labelled", "lease_owner": reviewer, "labelled_at": now}
        )
        updated = conn.execute(
            update(ReviewItem)
            .where(ReviewItem.id == item_id, or_(held_by_me, _open(now)))
            .values(**values)
        ).rowcount
        if not updated:
            state = "already labelled" if item.status == "labelled" else "claimed by another"
            raise ReviewConflictError(f"review item {item_id} is {state}")
        label_id = conn.execute(
            insert(HumanLabel)
            .values(
                tenant=tenant,
                review_item_id=item_id,
                reviewer=reviewer,
                score=float(score) if score is not None else None,
                label=label,
                comment=comment,
                corrected_output=corrected_output,
                skipped=skip,
                created_at=now,
            )
            .returning(HumanLabel.id)
        ).scalar_one()
    return StoredLabel(
        id=int(label_id),
        review_item_id=item_id,
        reviewer=reviewer,
        score=float(score) if score is not None else None,
        label=label,
        skipped=skip,
    )
