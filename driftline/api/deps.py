"""Typed FastAPI dependencies: the app state and the tenant of the request, per permission.

``--dev``: every request is tenant ``default`` with every permission (loopback only).
Otherwise ``Authorization: Bearer <key>`` decides the tenant; a key without the permission
gets 403, a missing/invalid key 401.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from alerts.runtime import RuntimeSlot
from collector.auth import PLATFORM_ROLE, ForbiddenError, KeyStore, Principal
from collector.cost.prices import PriceTable
from collector.ingest.capture import CapturePolicies
from collector.ingest.log_join import LogJoiner
from collector.ingest.writer import BatchWriter
from collector.scheduler import Scheduler
from collector.settings import Settings
from collector.spool.log import Spool
from collector.spool.processor import SpoolProcessor
from collector.spool.supervisor import ProcessorSupervisor
from collector.telemetry.exposition import Source
from collector.telemetry.metrics import IngestMetrics
from driftline.receive.sink import Sink

DEV_TENANT = "default"
DEV_PRINCIPAL = Principal(tenant=DEV_TENANT, role=PLATFORM_ROLE, key_id=None)


@dataclass
class AppState:
    """Everything the routes need; built once in the app's lifespan (``app.state.driftline``).

    The optional parts are None when their component is off (``spool``, ``spool_processor``:
    ``DRIFTLINE_SPOOL_ENABLED``; ``grpc_port``: the gRPC receiver; ``scheduler``).
    """

    settings: Settings
    engine: Engine
    prices: PriceTable
    writer: BatchWriter
    metrics: IngestMetrics
    keys: KeyStore
    capture: CapturePolicies
    #: joins gen_ai log records to their spans (collector.ingest.log_join)
    joiner: LogJoiner
    #: the app's alert runtime (file receivers, alert settings), shared with the alert jobs
    alerts: RuntimeSlot
    #: where the receivers hand requests (the spool, or the store with the spool off)
    sink: Sink
    #: tenants with feedback waiting for its call (linked after each commit)
    feedback_pending: set[str] = field(default_factory=set)
    grpc_port: int | None = None
    spool: Spool | None = None
    spool_processor: SpoolProcessor | ProcessorSupervisor | None = None
    scheduler: Scheduler | None = None
    #: per-tenant LLM KPI series; exposed only to keys (collector.telemetry.exposition)
    kpi_registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    #: more KPI sources merged into the same view (a spool processor in another process)
    kpi_sources: list[Source] = field(default_factory=list)


def state_of(request: Request) -> AppState:
    """The app's :class:`AppState` (set in its lifespan)."""
    state: AppState = request.app.state.driftline
    return state


# The dependencies are ``async def``: FastAPI runs a plain ``def`` dependency in its thread
# pool, two thread hand-offs per request on every route (state, then principal) that an OTLP
# export paid on the GIL beside the receiver's event loop. Only a key the cache does not know
# goes to a thread, for its store lookup.
async def get_state(request: Request) -> AppState:
    return state_of(request)


def principal_of(state: AppState, authorization: str | None) -> Principal:
    """Resolve the caller (dev mode: the default admin); may look the key up in the store.

    Raises:
        AuthError: missing, malformed, unknown or revoked key (401).
    """
    if state.settings.dev:
        return DEV_PRINCIPAL
    return state.keys.verify(authorization)


async def get_principal(request: Request) -> Principal:
    """The caller: from the key cache on the event loop, else verified in a worker thread.

    Raises:
        AuthError: missing, malformed, unknown or revoked key (401).
    """
    state = state_of(request)
    authorization = request.headers.get("authorization")
    if state.settings.dev:
        return DEV_PRINCIPAL
    known = state.keys.cached(authorization)
    if known is not None:
        return known
    return await run_in_threadpool(principal_of, state, authorization)


def _tenant_with(permission: str, *, gateway: bool = True) -> Callable[[Request], Any]:
    async def dependency(request: Request) -> str:
        principal = await get_principal(request)
        if not principal.allows(permission):
            raise ForbiddenError(f"this API key (role {principal.role}) may not {permission}")
        if not gateway and principal.role == "gateway":
            raise ForbiddenError(
                "a gateway key sends spans only (POST /v1/traces); send logs, scores and "
                "feedback with the tenant's own ingest key"
            )
        return principal.tenant

    dependency.__name__ = f"tenant_with_{permission}"
    return dependency


State = Annotated[AppState, Depends(get_state)]
CurrentPrincipal = Annotated[Principal, Depends(get_principal)]
#: tenant of a caller allowed to read (GET routes)
ReadTenant = Annotated[str, Depends(_tenant_with("read"))]
#: tenant of a caller allowed to send logs, scores and feedback (a gateway key may not: its
#: requests speak for several tenants, and only spans carry the tenant it speaks for)
IngestTenant = Annotated[str, Depends(_tenant_with("ingest", gateway=False))]
#: tenant of a caller allowed to label review samples
ReviewTenant = Annotated[str, Depends(_tenant_with("review"))]
#: tenant of an admin of that tenant (rollout changes, receivers, silences); a tenant admin
#: and a platform admin alike act on the key's own tenant only
AdminTenant = Annotated[str, Depends(_tenant_with("admin"))]
#: kept for the read routes written before roles existed
Tenant = ReadTenant
