"""A review item queued directly in the store (as the judge worker queues one)."""

from __future__ import annotations

from sqlalchemy import insert

from collector.store.models.judges import JudgeSample, ReviewItem


def queue_review_item(engine: object, call: dict[str, str], rubric: str = "helpfulness") -> int:
    """A judged sample of ``call`` (a /api/v1/calls item) and its pending review item; its id."""
    with engine.begin() as conn:  # type: ignore[attr-defined]
        sid = conn.execute(
            insert(JudgeSample).values(
                tenant="default",
                trace_id=call["trace_id"],
                span_id=call["span_id"],
                call_id=call["call_id"],
                rubric=rubric,
                inclusion_probability=1.0,
                design_rate=1.0,
                stratum="all",
                reason="flagged",
                status="done",
                attempts=1,
            )
        ).inserted_primary_key[0]
        return int(
            conn.execute(
                insert(ReviewItem).values(
                    tenant="default",
                    sample_id=sid,
                    trace_id=call["trace_id"],
                    span_id=call["span_id"],
                    call_id=call["call_id"],
                    rubric=rubric,
                    audit=False,
                    stratum="all",
                    reason="flagged",
                    status="pending",
                )
            ).inserted_primary_key[0]
        )
