"""Scheduled jobs of the judges, registered in ``driftline.jobs.JOB_FACTORIES``.

``judge`` (every ``DRIFTLINE_JUDGE_INTERVAL_S``): one worker round (select, judge, pairwise)
with a client built for the run; only when the judge endpoint and model are configured.
``judge-drift`` (every ``DRIFTLINE_JUDGE_DRIFT_INTERVAL_S``): the judge-drift check, which
raises ``judge_drift`` alert events.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from collector.scheduler import Job, JobContext
from judges.cli import build_client
from judges.drift_check import check_judge_drift
from judges.queue_health import register_queue_health
from judges.settings import JudgeSettings, load_judge_settings
from judges.worker import run_once

log = logging.getLogger(__name__)


def judge_round(settings: JudgeSettings, ctx: JobContext) -> None:
    """One judge round on the collector's engine (runs in a scheduler thread)."""
    register_queue_health(ctx.registry, ctx.engine)  # the queue on /metrics (once)

    async def _round() -> None:
        client = build_client(settings)
        try:
            report = await run_once(client, ctx.engine, settings)
            log.info("judge job: %s", report)
        finally:
            await client.close()

    asyncio.run(_round())


def drift_round(settings: JudgeSettings, ctx: JobContext) -> None:
    """One judge-drift check over every tenant."""
    for check in check_judge_drift(
        ctx.engine,
        window_s=settings.drift_window_s,
        threshold=settings.drift_threshold,
        min_samples=settings.drift_min_samples,
    ):
        if check.result.drifted:
            log.warning(
                "judge drift %s/%s/%s: gap change %s (alerted: %s)",
                check.tenant, check.rubric, check.judge_model,
                check.result.gap_change, check.alerted,
            )  # fmt: skip


def jobs(collector_settings: Any) -> list[Job]:
    """The judge jobs enabled by the ``DRIFTLINE_JUDGE_*`` environment (read here, at start)."""
    settings = load_judge_settings()
    if not settings.enabled:
        return []
    out = [
        Job(
            "judge-drift",
            settings.drift_interval_s,
            lambda ctx: drift_round(settings, ctx),
            initial_delay_s=60.0,
        )
    ]
    if settings.base_url and settings.model:
        out.append(Job("judge", settings.interval_s, lambda ctx: judge_round(settings, ctx)))
    else:
        log.info("judge job off: DRIFTLINE_JUDGE_BASE_URL / DRIFTLINE_JUDGE_MODEL not set")
    return out
