"""Typed FastAPI dependencies: the app state and the tenant of the request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from collector.cost.prices import PriceTable
from collector.ingest.writer import BatchWriter
from collector.metrics import IngestMetrics
from collector.settings import Settings

DEV_TENANT = "default"


@dataclass
class AppState:
    """Everything the routes need; built once in the app's lifespan."""

    settings: Settings
    engine: Engine
    prices: PriceTable
    writer: BatchWriter
    metrics: IngestMetrics
    grpc_port: int | None = None


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.driftline
    return state


def get_tenant(request: Request) -> str:
    """The tenant of the request. In ``--dev`` mode every request is tenant ``default``."""
    return DEV_TENANT


State = Annotated[AppState, Depends(get_state)]
Tenant = Annotated[str, Depends(get_tenant)]
