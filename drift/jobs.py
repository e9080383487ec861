"""The collector's scheduled drift job (registered in ``driftline.jobs.JOB_FACTORIES``)."""

from __future__ import annotations

import logging
import time
from typing import Any

from collector.lake.jobs import lake_of
from collector.scheduler import Job, JobContext
from drift.callreaders import lake_reader
from drift.runs import (
    DriftSettings,
    load_drift_settings,
    monitored_tenants,
    resolve_windows,
    run_drift,
)

log = logging.getLogger(__name__)


def run_once(ctx: JobContext, settings: DriftSettings) -> None:
    """One scheduled pass: a rolling (or pinned) run per monitored tenant.

    A tenant whose windows cannot be resolved or whose run fails is logged and skipped; the
    others still run (the job never dies on one bad tenant). Calls are read through the lake
    when one is configured (sealed hours from Parquet, the hot tail from the store).
    """
    read = lake_reader(lake_of(ctx.settings))
    now_ns = time.time_ns()
    horizon = now_ns - int((settings.current_hours + settings.reference_hours) * 3600e9)
    for tenant in monitored_tenants(ctx.engine, settings, since_ns=horizon):
        try:
            windows = resolve_windows(ctx.engine, tenant, settings, now_ns=now_ns)
            summary = run_drift(
                ctx.engine, ctx.settings.database_url, tenant, windows, settings,
                trigger="schedule", read=read,
            )  # fmt: skip
        except Exception:
            log.exception("drift: scheduled run of tenant %s failed", tenant)
            continue
        log.info(
            "drift run %s tenant=%s status=%s drifted=%d/%d",
            summary.run_id, tenant, summary.status, summary.n_drifted, summary.n_evaluated,
        )  # fmt: skip


def jobs(settings: Any) -> list[Job]:
    """``[drift]`` every ``DRIFTLINE_DRIFT_INTERVAL_S`` seconds, or ``[]`` when disabled.

    ``settings`` is the collector's; the drift settings are read from the environment here
    (``DRIFTLINE_DRIFT_*``), when the app starts, never at import.
    """
    drift_settings = load_drift_settings()
    if not drift_settings.enabled:
        return []
    return [
        Job(
            "drift",
            drift_settings.interval_s,
            lambda ctx: run_once(ctx, drift_settings),
            initial_delay_s=min(60.0, drift_settings.interval_s),
        )
    ]
