"""The list of scheduled jobs the collector runs (drift, canary, judges, alerts, scrapes...).

Each subsystem exposes a factory ``jobs(settings) -> list[Job]`` in its own module; the
factories are imported when the app starts (not when ``collector`` is imported). Add one line
per subsystem to ``JOB_FACTORIES``.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from collector.scheduler import Job

log = logging.getLogger(__name__)

#: "module:function" returning list[Job] for the given settings.
JOB_FACTORIES: list[str] = [
    "collector.background:jobs",
    "judges.jobs:jobs",
    "drift.canary_jobs:jobs",
    "drift.jobs:jobs",
    "collector.alerts.jobs:jobs",
]


def load_jobs(settings: Any) -> list[Job]:
    """All jobs enabled by ``settings``."""
    jobs: list[Job] = []
    for ref in JOB_FACTORIES:
        module_name, attr = ref.split(":")
        factory = getattr(importlib.import_module(module_name), attr)
        jobs.extend(factory(settings))
    return jobs
