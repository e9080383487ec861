"""``POST /api/v1/scores`` (scores from outside: evaluators, annotation tools, CI) and
``GET /api/v1/scores``. Scores are checked against their score config
(:mod:`judges.score_configs`: a rubric's, or a free ``numeric``/``categorical``/``boolean``)
and stored beside the judge results in ``external_scores``."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from collector.errors import BadRequestError
from collector.ingest.feedback import check_json
from collector.store import scores
from collector.store.queries import MAX_PAGE
from driftline.api.calls import hex_id
from driftline.api.deps import IngestTenant, State, Tenant
from driftline.api.params import MAX_TIME_CHARS, Cursor, parse_time, reject_unknown_params
from judges.review import configured_rubrics
from judges.rubrics import Rubric
from judges.score_configs import resolve

router = APIRouter(prefix="/api/v1", tags=["scores"])
MAX_BATCH = 1000


class ScoreIn(BaseModel):
    """One score; give ``trace_id`` (+ ``span_id`` for one call) or ``response_id``."""

    model_config = ConfigDict(extra="forbid")

    score_id: str | None = Field(default=None, min_length=1, max_length=128)
    trace_id: str | None = None
    span_id: str | None = None
    response_id: str | None = Field(default=None, max_length=512)
    session_id: str | None = Field(default=None, max_length=256)
    name: str = Field(min_length=1, max_length=128)
    data_type: str | None = None
    value: float | None = Field(default=None, allow_inf_nan=False)
    label: str | None = Field(default=None, max_length=128)
    comment: str | None = None
    evaluator: str | None = Field(default=None, max_length=256)
    #: unix seconds, ISO 8601 or a duration ago; 1970-01-01 .. 2262-04-11 (params.parse_time)
    timestamp: str | None = Field(default=None, max_length=MAX_TIME_CHARS)
    attributes: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _storable(self) -> ScoreIn:
        """No NUL, no nesting past MAX_JSON_DEPTH: refused here, not a 500 at insert."""
        check_json(self.model_dump(), "score")
        return self


def _row(raw: Any, rubrics: dict[str, Rubric]) -> dict[str, Any]:
    """A table row from one request item; raises ValueError/BadRequestError naming the field."""
    try:
        item = ScoreIn.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "score"
        raise ValueError(f"{where}: {err['msg']}") from None
    if item.trace_id is None and item.response_id is None and item.session_id is None:
        raise ValueError("give trace_id, response_id or session_id")
    if item.span_id is not None and item.trace_id is None:
        raise ValueError("span_id needs trace_id")
    cfg = resolve(item.name, item.data_type, rubrics)
    value, label = cfg.normalize(item.value, item.label)
    ts = parse_time(item.timestamp, "timestamp") if item.timestamp else time.time_ns()
    return {
        "score_id": item.score_id or f"sc-{uuid.uuid4().hex}",
        "trace_id": hex_id(item.trace_id, 32, "trace_id"),
        "span_id": hex_id(item.span_id, 16, "span_id"),
        "response_id": item.response_id,
        "session_id": item.session_id,
        "name": item.name,
        "data_type": cfg.data_type,
        "value": value,
        "label": label,
        "comment": item.comment,
        "source": "api",
        "evaluator": item.evaluator,
        "attributes": item.attributes,
        "timestamp_unix_nano": ts,
    }


@router.post("/scores", status_code=201, summary="Record scores (one object or {items: [...]})")
def post_scores(
    state: State, tenant: IngestTenant, body: Annotated[Any, Body()] = None
) -> dict[str, Any]:
    items = body.get("items") if isinstance(body, dict) and "items" in body else [body]
    if not isinstance(items, list) or not items or len(items) > MAX_BATCH:
        raise BadRequestError(f"items must be a list of 1..{MAX_BATCH} scores")
    rows, rejected = [], []
    rubrics = configured_rubrics()  # shipped + DRIFTLINE_JUDGE_RUBRIC_DIR, read once a request
    for i, raw in enumerate(items):
        try:
            rows.append((i, _row(raw, rubrics)))
        except (ValueError, BadRequestError) as exc:
            rejected.append({"index": i, "error": str(exc)})
    if rejected and len(items) == 1:
        raise BadRequestError(rejected[0]["error"])
    with state.engine.begin() as conn:
        linked = [scores.link(conn, tenant, r) for _, r in rows]
        fresh = scores.insert_scores(conn, tenant, linked)
    return {
        "items": [
            {"index": i, "score_id": r["score_id"], "duplicate": not new, "trace_id": r["trace_id"]}
            for (i, _), r, new in zip(rows, linked, fresh, strict=True)
        ],
        "rejected": rejected,
    }


@router.get(
    "/scores",
    summary="List scores sent from outside, newest first",
    dependencies=[Depends(reject_unknown_params)],
)
def list_scores(
    state: State,
    tenant: Tenant,
    trace_id: str | None = None,
    name: str | None = None,
    session: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: Cursor = None,
) -> dict[str, Any]:
    try:
        with state.engine.connect() as conn:
            items, nxt = scores.list_scores(
                conn,
                tenant,
                trace_id=hex_id(trace_id, 32, "trace_id"),
                name=name,
                session_id=session,
                limit=limit,
                cursor=cursor,
            )
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return {"items": items, "next_cursor": nxt}
