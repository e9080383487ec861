"""The lake's scheduled job: seal closed hours, re-seal late ones, apply retention.

Registered in ``driftline/jobs.py`` through :func:`jobs`. Lake retention follows each tenant's
``retention_days`` (the store's policy), so the lake never keeps what the store may not.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from collector.lake.layout import Lake, default_lake_url, open_lake
from collector.lake.seal import apply_retention, seal_pending
from collector.scheduler import Job, JobContext
from collector.store.models import Tenant

log = logging.getLogger(__name__)


def lake_of(settings: Any) -> Lake | None:
    """The lake configured by ``settings`` (``DRIFTLINE_LAKE_URL`` or the default next to the
    store); None when ``lake_enabled`` is false or the store is in memory.

    Raises:
        ValueError: an unusable ``DRIFTLINE_LAKE_URL``.
    """
    if not getattr(settings, "lake_enabled", False):
        return None
    url = settings.lake_url or default_lake_url(settings.database_url)
    if ":memory:" in settings.database_url:
        return None
    return open_lake(url)


def seal_job(ctx: JobContext) -> None:
    """One run: seal pending hours of every tenant, then lake retention."""
    lake = lake_of(ctx.settings)
    if lake is None:
        return
    s = ctx.settings
    report = seal_pending(s.database_url, lake, delay_s=s.lake_seal_delay_s, late_s=s.lake_late_s)
    if report.sealed or report.failed:
        log.info(
            "lake: sealed %d hours (%d calls), %d failed",
            len(report.sealed),
            report.rows,
            len(report.failed),
        )
    with ctx.engine.connect() as conn:
        policies = {
            str(n): int(d) for n, d in conn.execute(select(Tenant.name, Tenant.retention_days))
        }
    apply_retention(lake, policies)


def jobs(settings: Any) -> list[Job]:
    """The seal job when the lake is enabled."""
    if not getattr(settings, "lake_enabled", False):
        return []
    return [Job("lake-seal", settings.lake_seal_interval_s, seal_job, initial_delay_s=10.0)]
