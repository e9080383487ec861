"""Judges REST API: the human review queue, calibrated quality, judge results (semconv shape).

``GET /api/v1/review/next`` claims the next review item for the calling reviewer with a lease;
``POST /api/v1/review/{id}`` labels it on its rubric (or skips it); ``GET /api/v1/quality``
serves judge mean, human mean, the PPI++ estimate with its 90 % interval and κ per group;
``GET /api/v1/judge/results`` lists stored judge results with ``gen_ai.evaluation.*`` attributes.
The logic lives in ``judges.review`` / ``judges.quality`` / ``judges.results``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from collector.errors import BadRequestError, NotFoundError
from driftline.api.deps import CurrentPrincipal, ReadTenant, ReviewTenant, State
from driftline.api.params import Since, Until, parse_time
from judges.quality import GroupBy, group_to_dict, quality_by_group
from judges.results import list_results
from judges.review import (
    ReviewConflictError,
    ReviewNotFoundError,
    ReviewTask,
    next_item,
    submit_label,
)

router = APIRouter(prefix="/api/v1", tags=["judges"])


class LabelIn(BaseModel):
    """A reviewer's answer: ``score`` on the item's rubric scale, or ``skip``."""

    model_config = ConfigDict(extra="forbid")

    score: int | None = Field(None, ge=-(2**31), le=2**31 - 1)
    skip: bool = False
    comment: str | None = Field(None, max_length=20_000)
    corrected_output: str | None = Field(None, max_length=1_000_000)
    reviewer: str | None = Field(None, min_length=1, max_length=128)


def _reviewer(principal: Any, explicit: str | None) -> str:
    """The reviewer's name: as given, else the API key id, else ``default`` (--dev)."""
    return explicit or principal.key_id or "default"


def _task_dict(task: ReviewTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "call_id": task.call_id,
        "trace_id": task.trace_id,
        "span_id": task.span_id,
        "model": task.model,
        "variant": task.variant,
        "prompt": task.prompt,
        "answer": task.answer,
        "audit": task.audit,
        "reason": task.reason,
        "lease_expires_at": task.lease_expires_at.isoformat(),
        "rubric": {
            "name": task.rubric.name,
            "version": task.rubric.version,
            "description": task.rubric.description,
            "instructions": task.rubric.instructions,
            "scale": task.rubric.scale.kind,
            "levels": [
                {"score": lv.score, "label": lv.label, "description": lv.description}
                for lv in task.rubric.scale.levels
            ],
        },
    }


@router.get("/review/next", summary="Claim the next review item (blind to the judge verdict)")
def review_next(
    state: State,
    tenant: ReviewTenant,
    principal: CurrentPrincipal,
    rubric: str | None = None,
    reviewer: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    lease_s: Annotated[float, Query(ge=10, le=86_400)] = 900.0,
) -> dict[str, Any]:
    """``{"item": {...}}`` or ``{"item": null}`` when the queue is empty."""
    task = next_item(
        state.engine, tenant, _reviewer(principal, reviewer), lease_s=lease_s, rubric=rubric
    )
    return {"item": _task_dict(task) if task is not None else None}


@router.post("/review/{item_id}", summary="Label (or skip) a review item")
def review_label(
    item_id: int, body: LabelIn, state: State, tenant: ReviewTenant, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Stores the label; 404 unknown item, 400 held by another / already labelled / bad score."""
    try:
        stored = submit_label(
            state.engine,
            tenant,
            item_id,
            _reviewer(principal, body.reviewer),
            score=body.score,
            comment=body.comment,
            corrected_output=body.corrected_output,
            skip=body.skip,
        )
    except ReviewNotFoundError as exc:
        raise NotFoundError(str(exc)) from None
    except ReviewConflictError as exc:
        raise BadRequestError(str(exc)) from None
    return {
        "id": stored.id,
        "review_item_id": stored.review_item_id,
        "reviewer": stored.reviewer,
        "score": stored.score,
        "label": stored.label,
        "skipped": stored.skipped,
    }


@router.get("/quality", summary="Judge mean, human mean, PPI++ estimate and interval, κ")
def quality(
    state: State,
    tenant: ReadTenant,
    group_by: GroupBy = "variant",
    rubric: str | None = None,
    since: Since = None,
    until: Until = None,
    confidence: Annotated[float, Query(gt=0.0, lt=1.0)] = 0.9,
) -> dict[str, Any]:
    """One item per (rubric, judge model, group value) of calls started in [since, until)."""
    with state.engine.connect() as conn:
        groups = quality_by_group(
            conn,
            tenant,
            group_by=group_by,
            rubric=rubric,
            since_ns=parse_time(since, "since"),
            until_ns=parse_time(until, "until"),
            alpha=1.0 - confidence,
        )
    items = []
    for g in groups:
        item = group_to_dict(g)
        item[group_by] = item.pop("group")
        items.append(item)
    return {"items": items, "next_cursor": None}


@router.get("/judge/results", summary="Judge results, each with gen_ai.evaluation.* attributes")
def judge_results(
    state: State,
    tenant: ReadTenant,
    call_id: str | None = None,
    rubric: str | None = None,
    status: Annotated[str | None, Query(pattern="^(ok|failed)$")] = None,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Oldest first; ``next_cursor`` pages on (a result id: decimal, below 2**31, the id
    column's range on PostgreSQL)."""
    after = None
    if cursor is not None:
        if not (cursor.isascii() and cursor.isdigit()) or int(cursor) >= 2**31:
            raise BadRequestError(f"cursor must be a cursor returned by this API, got {cursor!r}")
        after = int(cursor)
    with state.engine.connect() as conn:
        items, last = list_results(
            conn, tenant, call_id=call_id, rubric=rubric, status=status, after_id=after,
            limit=limit,
        )  # fmt: skip
    return {"items": items, "next_cursor": str(last) if last is not None else None}
