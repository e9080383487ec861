"""The flywheel export: calls flagged by users or judges, with human corrections, as chat JSONL.

Flagged = a thumbs-down or escalation in ``feedback``, or a judge score at or below
``low_score_threshold``; only calls a reviewer corrected (``corrected_output``) produce a line
(``judges.flywheel.finetune_lines``). Text is what the store holds, i.e. already subject to the
tenant's capture policy; with ``redact=True`` (default) it is passed through
``collector.ingest.redaction.redact`` once more so that no PII reaches a training file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sqlalchemy import Engine, and_, exists, or_, select

from collector.ingest.redaction import redact as redact_text
from collector.store.judgescore import usable_score
from collector.store.models import LLMCall
from collector.store.models.api import Feedback
from collector.store.models.judges import HumanLabel, JudgeResultRow, ReviewItem
from judges.flywheel import Correction, finetune_lines
from judges.rubrics import Rubric, builtin_rubrics
from judges.selection import FLAG_KINDS


@dataclass(frozen=True)
class ExportReport:
    """Lines written and flagged-and-corrected calls considered."""

    lines: int
    considered: int


def flagged_corrections(
    engine: Engine,
    tenant: str,
    *,
    since_ns: int,
    low_score_threshold: float | None = 2.0,
    redact: bool = True,
    include_approved: bool = False,
    rubrics: Mapping[str, Rubric] | None = None,
) -> Iterator[Correction]:
    """Flagged calls of ``tenant`` started at or after ``since_ns`` with a human correction.

    With ``include_approved``, also flagged calls a reviewer approved as they are: a label
    without correction, not skipped, whose score is the top of the item's rubric scale
    (``rubrics``: by name, default the shipped ones); they come with ``approved=True``.
    The latest label per call wins. Raises ValueError naming ``since_ns`` when negative.
    """
    known = dict(rubrics) if rubrics is not None else builtin_rubrics()
    if since_ns < 0:
        raise ValueError("since_ns must be >= 0")
    thumbs = exists().where(
        Feedback.tenant == LLMCall.tenant,
        Feedback.trace_id == LLMCall.trace_id,
        Feedback.kind.in_(FLAG_KINDS),
    )
    conditions = [thumbs]
    if low_score_threshold is not None:
        conditions.append(
            exists().where(
                JudgeResultRow.tenant == LLMCall.tenant,
                JudgeResultRow.trace_id == LLMCall.trace_id,
                JudgeResultRow.span_id == LLMCall.span_id,
                usable_score(JudgeResultRow),
                JudgeResultRow.score <= low_score_threshold,
            )
        )
    query = (
        select(
            LLMCall.call_id,
            LLMCall.input_text,
            LLMCall.output_text,
            HumanLabel.corrected_output,
            HumanLabel.score,
            ReviewItem.rubric,
        )
        .join(
            ReviewItem,
            and_(
                ReviewItem.tenant == LLMCall.tenant,
                ReviewItem.trace_id == LLMCall.trace_id,
                ReviewItem.span_id == LLMCall.span_id,
            ),
        )
        .join(HumanLabel, HumanLabel.review_item_id == ReviewItem.id)
        .where(
            LLMCall.tenant == tenant,
            LLMCall.start_unix_nano >= since_ns,
            LLMCall.input_text.is_not(None),
            or_(HumanLabel.corrected_output.is_not(None), HumanLabel.score.is_not(None))
            if include_approved
            else HumanLabel.corrected_output.is_not(None),
            HumanLabel.skipped.is_(False),
            or_(*conditions),
        )
        .order_by(LLMCall.call_id, HumanLabel.id.desc())
    )
    seen: set[str] = set()
    with engine.connect() as conn:
        for row in conn.execute(query):
            if row.call_id in seen:
                continue
            seen.add(row.call_id)
            prompt, output, corrected = row.input_text, row.output_text, row.corrected_output
            rubric = known.get(row.rubric)
            approved = (
                corrected is None and rubric is not None and row.score == max(rubric.scale.scores)
            )
            if corrected is None and not approved:
                continue
            if redact:
                prompt = redact_text(prompt).text or ""
                output = redact_text(output).text if output is not None else None
                corrected = redact_text(corrected).text if corrected is not None else None
            yield Correction(
                call_id=row.call_id,
                prompt=prompt,
                original_output=output,
                corrected_output=corrected,
                approved=approved,
            )


def export_flywheel(
    engine: Engine,
    tenant: str,
    out: str,
    *,
    since_ns: int,
    low_score_threshold: float | None = 2.0,
    system_prompt: str | None = None,
    redact: bool = True,
    include_approved: bool = False,
) -> ExportReport:
    """Write the flywheel JSONL for ``tenant`` to path ``out`` (one chat example per line)."""
    items = list(
        flagged_corrections(
            engine,
            tenant,
            since_ns=since_ns,
            low_score_threshold=low_score_threshold,
            redact=redact,
            include_approved=include_approved,
        )
    )
    lines = finetune_lines(items, system_prompt=system_prompt, include_approved=include_approved)
    with open(out, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
    return ExportReport(lines=len(lines), considered=len(items))
