"""Seed the judged, reviewed, drift-tested and GPU-costed parts of a demo store, each through
its subsystem's own code.

- Judges: one round of the real worker (:func:`judges.worker.run_once`: sampling, claims, the
  judge requests over HTTP through ``openai.AsyncOpenAI``, results, review items, pairwise
  pass) against the OpenAI-compatible endpoint of the given :class:`judges.settings.JudgeSettings`;
  then simulated reviewers label every *audit* item through :func:`judges.review.submit_label`,
  scoring each answer with the grade of :func:`driftline.demo.seed_text.answer_grades` plus reviewer
  noise. Correction items (flagged, low score) stay in the queue for the Review page.
- Drift: one run of :func:`drift.runs.run_drift` over rolling windows (the seed's topic shift
  sits in the current window).
- GPU cost: :func:`collector.background.amortize_gpu_cost` for the self-hosted service, every
  clock hour of the seeded period (what the collector's ``gpu-cost`` job does each minute).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import openai
from sqlalchemy import Engine, and_, func, select

from collector.background import HOUR_NS, amortize_gpu_cost
from collector.store.models import LLMCall
from collector.store.models.judges import JudgeResultRow, ReviewItem
from drift.runs import DriftSettings, RunSummary, load_drift_settings, resolve_windows, run_drift
from drift.signals import EMBEDDING_SIGNALS, SIGNALS
from judges.review import submit_label
from judges.settings import JudgeSettings
from judges.worker import RunReport, run_once

REVIEWERS = ("alice", "bob")


@dataclass(frozen=True, slots=True)
class AuditLabel:
    """One audit item labelled by a simulated reviewer: the judge's and the human's score."""

    review_item_id: int
    variant: str | None
    judge_score: float
    human_score: int


@dataclass(frozen=True, slots=True)
class JudgesSeed:
    """The worker round's counts, the audit labels stored, and the items left in the queue."""

    report: RunReport
    audit_labels: tuple[AuditLabel, ...]
    open_items: int


def reviewer_score(grade: int, rng: np.random.Generator) -> int:
    """A reviewer's score of an answer of ``grade`` (1-5): the grade 70 % of the time, one
    step lower or higher 15 % each, clipped to the scale.

    Raises:
        ValueError: ``grade`` not in 1..5.
    """
    if not 1 <= grade <= 5:
        raise ValueError("grade must be in 1..5")
    step = int(rng.choice((-1, 0, 1), p=(0.15, 0.70, 0.15)))
    return min(5, max(1, grade + step))


async def _judge_round(settings: JudgeSettings, engine: Engine) -> RunReport:
    base_url, _ = settings.require_endpoint()
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key=settings.api_key.get_secret_value(),
        max_retries=0,
        timeout=settings.timeout_s,
    )
    async with client:
        return await run_once(client, engine, settings, worker_id="seed", pace=False)


def seed_judges(
    engine: Engine,
    tenant: str,
    settings: JudgeSettings,
    grades: Mapping[str, int],
    rng: np.random.Generator,
) -> JudgesSeed:
    """Judge the store's new calls once, then label every audit item of ``tenant``.

    Args:
        engine: the store.
        tenant: whose review items are labelled.
        settings: judge endpoint, model, sampling and audit rates (``settle_s`` 0 so just
            ingested calls are judged).
        grades: answer text → the grade (1-5) a careful reviewer gives it; answers not in it
            are not labelled.
        rng: reviewer noise (:func:`reviewer_score`).

    Raises:
        judges.settings.JudgeConfigError: no endpoint or model in ``settings``.
    """
    report = asyncio.run(_judge_round(settings, engine))
    r, j, c = ReviewItem.__table__, JudgeResultRow.__table__, LLMCall.__table__
    latest = (
        select(j.c.sample_id, func.max(j.c.id).label("rid"))
        .where(j.c.tenant == tenant, j.c.status == "ok")
        .group_by(j.c.sample_id)
        .subquery()
    )
    query = (
        select(r.c.id, c.c.variant, c.c.output_text, j.c.score)
        .select_from(
            r.join(latest, latest.c.sample_id == r.c.sample_id)
            .join(j, j.c.id == latest.c.rid)
            .join(
                c,
                and_(
                    c.c.tenant == r.c.tenant,
                    c.c.trace_id == r.c.trace_id,
                    c.c.span_id == r.c.span_id,
                ),
            )
        )
        .where(r.c.tenant == tenant, r.c.audit.is_(True), r.c.status == "pending")
        .order_by(r.c.id)
    )
    with engine.connect() as conn:
        items = conn.execute(query).all()
    labels = []
    for n, (item_id, variant, answer, judge_score) in enumerate(items):
        grade = grades.get(answer or "")
        if grade is None or judge_score is None:
            continue
        human = reviewer_score(grade, rng)
        submit_label(engine, tenant, int(item_id), REVIEWERS[n % len(REVIEWERS)], score=human)
        labels.append(AuditLabel(int(item_id), variant, float(judge_score), human))
    with engine.connect() as conn:
        left = conn.execute(
            select(func.count()).where(r.c.tenant == tenant, r.c.status != "labelled")
        ).scalar_one()
    return JudgesSeed(report, tuple(labels), int(left))


def demo_drift_settings(
    *, current_hours: float = 2.0, reference_hours: float = 4.0
) -> DriftSettings:
    """Drift settings of the seeded run: every signal but prompt embeddings (no embedding model
    in a demo), a fixed seed, no alert events (the alert seed has its own drift episodes);
    other fields from ``DRIFTLINE_DRIFT_*`` or their defaults."""
    return load_drift_settings(
        current_hours=current_hours,
        reference_hours=reference_hours,
        signals=[s for s in SIGNALS if s not in EMBEDDING_SIGNALS],
        min_samples=30,
        seed=0,
        alert=False,
    )


def seed_drift(
    engine: Engine,
    database_url: str,
    tenant: str,
    settings: DriftSettings,
    *,
    now_s: float | None = None,
) -> RunSummary:
    """One drift run of ``tenant``: rolling windows ending at ``now_s`` (unix s).

    Raises:
        ValueError: empty windows.
    """
    now_ns = int((time.time() if now_s is None else now_s) * 1e9)
    windows = resolve_windows(engine, tenant, settings, now_ns=now_ns)
    return run_drift(engine, database_url, tenant, windows, settings, trigger="cli")


def seed_gpu_cost(
    engine: Engine,
    service: str,
    usd_per_hour: float,
    *,
    since_s: float,
    now_s: float,
) -> int:
    """Amortise ``usd_per_hour`` (USD per hour of the replica) over ``service``'s calls in every
    clock hour from the one holding ``since_s`` to the one holding ``now_s`` (unix s), as the
    collector's job does; returns the calls costed.

    Raises:
        ValueError: ``usd_per_hour`` not positive or ``since_s`` after ``now_s``.
    """
    if not usd_per_hour > 0:
        raise ValueError("usd_per_hour must be positive")
    if since_s > now_s:
        raise ValueError("since_s must not be after now_s")
    now_ns = int(now_s * 1e9)
    hour = int(since_s * 1e9) // HOUR_NS * HOUR_NS
    updated = 0
    while hour <= now_ns:
        updated += amortize_gpu_cost(engine, service, usd_per_hour, hour, now_ns)
        hour += HOUR_NS
    return updated
