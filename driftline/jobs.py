"""The job registry: every scheduled job the collector process runs (scrapes, judges, canary,
drift, alerts), one line per subsystem, imported here where the whole product is composed.

Each subsystem exposes a factory ``jobs(settings) -> list[Job]`` next to the work it schedules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from alerts import jobs as alert_jobs
from alerts.runtime import RuntimeSlot
from collector import background
from collector.lake import jobs as lake_jobs
from collector.scheduler import Job
from drift import jobs as drift_jobs
from drift.canary import jobs as canary_jobs
from judges import jobs as judge_jobs

log = logging.getLogger(__name__)

#: factories returning the jobs enabled by the collector's settings, in start order (the alert
#: jobs come last, from :func:`load_jobs`: they are handed the app's alert runtime).
JOB_FACTORIES: list[Callable[[Any], list[Job]]] = [
    background.jobs,
    lake_jobs.jobs,
    judge_jobs.jobs,
    canary_jobs.jobs,
    drift_jobs.jobs,
]


def load_jobs(settings: Any, *, alerts: RuntimeSlot | None = None) -> list[Job]:
    """All jobs enabled by ``settings`` (the collector's :class:`~collector.settings.Settings`);
    the alert jobs share their runtime with the REST API through ``alerts``."""
    jobs: list[Job] = []
    for factory in JOB_FACTORIES:
        jobs.extend(factory(settings))
    jobs.extend(alert_jobs.jobs(settings, runtime=alerts))
    return jobs
