"""The collector's own periodic jobs (see collector.jobs)."""

from __future__ import annotations

from typing import Any

from collector.scheduler import Job


def jobs(settings: Any) -> list[Job]:
    """Jobs of the collector itself; more are added as their subsystems land."""
    return []
