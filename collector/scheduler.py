"""The collector's scheduler: periodic jobs run in worker threads beside the receivers.

A job is a plain function ``fn(ctx) -> None`` that opens its own transactions. A failing run
is logged with the job's name and counted; the loop never dies on one bad run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobContext:
    """What a job may use: the app's settings, engine and metrics registry (anything else a
    job needs is handed to its factory explicitly)."""

    settings: Any
    engine: Any
    registry: CollectorRegistry


@dataclass(frozen=True)
class Job:
    """``fn`` runs every ``interval_s`` seconds (first run after ``initial_delay_s``)."""

    name: str
    interval_s: float
    fn: Callable[[JobContext], None]
    initial_delay_s: float = 0.0


class Scheduler:
    """Runs :class:`Job` s as asyncio tasks, each run in a thread (``asyncio.to_thread``)."""

    def __init__(self, ctx: JobContext, jobs: list[Job]) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self._tasks: list[asyncio.Task[None]] = []
        self.failures = Counter(
            "driftline_job_failures",
            "Scheduled job runs that raised.",
            ["job"],
            registry=ctx.registry,
        )
        self.runs = Counter(
            "driftline_job_runs", "Scheduled job runs.", ["job"], registry=ctx.registry
        )

    async def _loop(self, job: Job) -> None:
        await asyncio.sleep(job.initial_delay_s)
        while True:
            t0 = time.monotonic()
            try:
                await asyncio.to_thread(job.fn, self.ctx)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures.labels(job.name).inc()
                log.exception("scheduled job %s failed", job.name)
            self.runs.labels(job.name).inc()
            await asyncio.sleep(max(0.0, job.interval_s - (time.monotonic() - t0)))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._loop(j), name=f"job:{j.name}") for j in self.jobs]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
