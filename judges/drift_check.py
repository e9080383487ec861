"""The scheduled judge-drift check: has the human − judge gap moved? If so, raise an alert event.

Per tenant × rubric × judge model, the labelled audit items of the last ``window_s`` (current)
are compared with the window before (reference) by ``judges.judge_drift.judge_drift`` (Welch
test on the gaps; reference §3.6 "Practical recipe"). A drifted result is sent to the alerting
engine as a ``judge_drift`` event (``alerts`` ``emit_event``).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, and_, select

from collector.store.judgescore import usable_score
from collector.store.models.judges import HumanLabel, JudgeResultRow, ReviewItem
from judges.judge_drift import JudgeDriftResult, judge_drift

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DriftCheck:
    """The judge-drift result of one (tenant, rubric, judge model) and whether an event went out."""

    tenant: str
    rubric: str
    judge_model: str
    result: JudgeDriftResult
    alerted: bool


def _pairs(engine: Engine, since: dt.datetime) -> dict[tuple[str, str, str], list[Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                ReviewItem.tenant,
                JudgeResultRow.rubric_name,
                JudgeResultRow.judge_model,
                JudgeResultRow.score,
                HumanLabel.score.label("human"),
                HumanLabel.created_at,
            )
            .join(HumanLabel, HumanLabel.review_item_id == ReviewItem.id)
            .join(
                JudgeResultRow,
                and_(
                    JudgeResultRow.sample_id == ReviewItem.sample_id,
                    usable_score(JudgeResultRow),
                ),
            )
            .where(
                ReviewItem.audit.is_(True),
                HumanLabel.skipped.is_(False),
                HumanLabel.score.is_not(None),
                HumanLabel.created_at >= since,
            )
        ).all()
    out: dict[tuple[str, str, str], list[Any]] = {}
    for r in rows:
        out.setdefault((r.tenant, r.rubric_name, r.judge_model), []).append(r)
    return out


def emit_judge_drift_alert(engine: Engine, check: DriftCheck, now: dt.datetime) -> bool:
    """THE call site that hands a judge-drift verdict to the alerting engine.

    Calls ``alerts.events.emit_event(engine, tenant, "judge_drift", ...)``.
    """
    from collector.store.events import emit_event

    r = check.result
    emit_event(
        engine,
        check.tenant,
        "judge_drift",
        labels={"rubric": check.rubric, "judge_model": check.judge_model},
        annotations={
            "summary": (
                f"human - judge gap moved by {r.gap_change:+.3f} "
                f"(p={r.pvalue:.3g}, n={r.n_reference}/{r.n_current})"
            ),
        },
        at=now.timestamp(),
        value=r.gap_change,
    )
    return True


def check_judge_drift(
    engine: Engine,
    *,
    window_s: float,
    threshold: float = 0.05,
    min_samples: int = 30,
    now: dt.datetime | None = None,
) -> list[DriftCheck]:
    """Run the judge-drift test for every (tenant, rubric, judge model) with labels.

    Reference window [now − 2·window_s, now − window_s), current [now − window_s, now).
    Raises ValueError naming ``window_s`` when it is not > 0 (and what ``judge_drift`` raises).
    """
    if window_s <= 0:
        raise ValueError("window_s must be > 0")
    now = now or dt.datetime.now(dt.UTC)
    split = now - dt.timedelta(seconds=window_s)
    checks = []
    for (tenant, rubric, model), rows in _pairs(engine, now - 2 * (now - split)).items():
        ref = [r for r in rows if r.created_at < split]
        cur = [r for r in rows if r.created_at >= split]
        result = judge_drift(
            [r.human for r in ref],
            [r.score for r in ref],
            [r.human for r in cur],
            [r.score for r in cur],
            threshold=threshold,
            min_samples=min_samples,
        )
        check = DriftCheck(tenant, rubric, model, result, alerted=False)
        if result.drifted:
            try:
                check = DriftCheck(
                    tenant, rubric, model, result, emit_judge_drift_alert(engine, check, now)
                )
            except Exception:
                log.exception("judge drift alert for %s/%s/%s failed", tenant, rubric, model)
        checks.append(check)
    return checks
