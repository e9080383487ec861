"""Reading stored judge results, each also in the ``gen_ai.evaluation.result`` shape.

The attribute names are those of ``judges.semconv`` (OpenTelemetry GenAI semantic conventions):
a failed or "unknown" verdict has no ``gen_ai.evaluation.score.value`` (unknown is absent,
never 0); a failure has no label either.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, select

from collector.store.judgescore import is_usable_score
from collector.store.models import LLMCall
from collector.store.models.judges import JudgeResultRow
from judges.semconv import EVALUATION_NAME, EXPLANATION, RESPONSE_ID, SCORE_LABEL, SCORE_VALUE


def evaluation_attributes_of(row: Any, response_id: str | None) -> dict[str, str | float]:
    """``gen_ai.evaluation.*`` attributes of a stored result row."""
    attributes: dict[str, str | float] = {EVALUATION_NAME: row.rubric_name}
    if is_usable_score(row.status, row.score):
        attributes[SCORE_VALUE] = float(row.score)
    if row.status == "ok" and row.label is not None:
        attributes[SCORE_LABEL] = row.label
    if row.explanation:
        attributes[EXPLANATION] = row.explanation
    if response_id is not None:
        attributes[RESPONSE_ID] = response_id
    return attributes


def list_results(
    conn: Connection,
    tenant: str,
    *,
    call_id: str | None = None,
    rubric: str | None = None,
    status: str | None = None,
    after_id: int | None = None,
    limit: int = 100,
) -> tuple[list[dict[str, Any]], int | None]:
    """Results of ``tenant`` by increasing id: (items, last id when more may follow else None).

    Raises ValueError naming ``limit`` outside 1..1000.
    """
    if not 1 <= limit <= 1000:
        raise ValueError("limit must be in 1..1000")
    query = (
        select(JudgeResultRow.__table__, LLMCall.response_id)
        .outerjoin(
            LLMCall,
            and_(
                LLMCall.tenant == JudgeResultRow.tenant,
                LLMCall.trace_id == JudgeResultRow.trace_id,
                LLMCall.span_id == JudgeResultRow.span_id,
            ),
        )
        .where(JudgeResultRow.tenant == tenant)
        .order_by(JudgeResultRow.id)
        .limit(limit)
    )
    if call_id is not None:
        query = query.where(JudgeResultRow.call_id == call_id)
    if rubric is not None:
        query = query.where(JudgeResultRow.rubric_name == rubric)
    if status is not None:
        query = query.where(JudgeResultRow.status == status)
    if after_id is not None:
        query = query.where(JudgeResultRow.id > after_id)
    items: list[dict[str, Any]] = []
    for result in conn.execute(query).all():
        response_id = result.response_id
        items.append(
            {
                "id": result.id,
                "sample_id": result.sample_id,
                "call_id": result.call_id,
                "trace_id": result.trace_id,
                "span_id": result.span_id,
                "status": result.status,
                "rubric": result.rubric_name,
                "rubric_version": result.rubric_version,
                "rubric_fingerprint": result.rubric_fingerprint,
                "judge_model": result.judge_model,
                "score": result.score,
                "discrete_score": result.discrete_score,
                "weighted_score": result.weighted_score,
                "label": result.label,
                "explanation": result.explanation,
                "latency_s": result.latency_s,
                "input_tokens": result.input_tokens,
                "output_tokens": result.output_tokens,
                "cost_usd": result.cost_usd,
                "error_kind": result.error_kind,
                "error": result.error,
                "raw_text": result.raw_text,
                "created_at": result.created_at.isoformat(),
                "attributes": evaluation_attributes_of(result, response_id),
            }
        )
    more = len(items) == limit
    return items, (int(items[-1]["id"]) if more and items else None)
