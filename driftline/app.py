"""The collector's FastAPI application: ``create_app(settings)`` plus its lifespan.

The lifespan starts the process's components (:func:`driftline.components.start_components`:
schema migration with ``auto_migrate``, the store engine, the writer, the spool and its
processor, the receivers' sink, the OTLP/gRPC receiver, the scheduler) on one
:class:`contextlib.AsyncExitStack`, which stops them in reverse order at shutdown or when a
later start-up step fails.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from collector.errors import ConfigError
from collector.settings import Settings, is_loopback
from driftline.api import alerts as api_alerts
from driftline.api import calls, errors, health, quality, rollouts, stats
from driftline.api import drift as api_drift
from driftline.api import feedback as api_feedback
from driftline.api import scores as api_scores
from driftline.api import sessions as api_sessions
from driftline.api import traces as api_traces
from driftline.api.limits import LimitsMiddleware
from driftline.api.params import reject_nul
from driftline.components import start_components
from driftline.receive import http as otlp

log = logging.getLogger(__name__)

#: every APIRouter the app serves; one line per resource.
ROUTERS: list[APIRouter] = [
    otlp.router,
    calls.router,
    health.router,
    quality.router,
    stats.router,
    api_feedback.router,
    rollouts.router,
    api_drift.router,
    api_alerts.router,
    api_traces.router,
    api_sessions.router,
    api_scores.router,
]


def check_mode(settings: Settings) -> None:
    """Refuse unsafe modes at start-up.

    Raises:
        ConfigError: ``--dev`` (no authentication) bound beyond loopback.
    """
    if settings.dev and not is_loopback(settings.host):
        raise ConfigError(
            f"DRIFTLINE_HOST: --dev has no authentication and binds loopback only, "
            f"got {settings.host!r}"
        )


def create_app(settings: Settings) -> FastAPI:
    """Build the collector app for ``settings`` (nothing starts until the lifespan runs)."""
    check_mode(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # every component registers its stop on the stack as it starts: a failure at a later
        # step, and the app's shutdown alike, stop the ones started, in reverse order
        async with AsyncExitStack() as stack:
            app.state.driftline = await start_components(settings, stack)
            yield

    app = FastAPI(
        title="driftline collector",
        version="0.1.0",
        summary="OTLP gen_ai ingestion and the LLM-call store",
        lifespan=lifespan,
        dependencies=[Depends(reject_nul)],  # PostgreSQL cannot bind NUL: 400, not 500
    )
    errors.install(app)
    app.add_middleware(LimitsMiddleware, max_request_bytes=settings.max_request_bytes)
    for router in ROUTERS:
        app.include_router(router)
    return app
