"""``/api/v1/alerts/receivers``: webhook receivers of a tenant, with signing-secret rotation.

Reads need ``read``, changes ``admin``; the tenant comes from the API key. Secrets are
write-only: a receiver's ``whsec_`` secret is returned once, when it is generated (create or
rotate), never by a GET; PagerDuty routing keys and extra header values are never returned.
Receivers from ``DRIFTLINE_ALERT_RECEIVERS_FILE`` are listed but changed only in that file.
A receiver URL must pass the collector's egress policy (public addresses, plus
``DRIFTLINE_EGRESS_ALLOW``: :mod:`collector.egress`), else 400 naming the rule; the delivery
worker checks the resolved address again at connect time.
:mod:`driftline.api.alerts` includes this router before its ``/alerts/{fingerprint}`` route.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from pydantic import SecretStr, ValidationError
from sqlalchemy.orm import Session

from alerts import admin, store
from alerts.apishapes import ReceiverBody, RotateBody, iso, receiver_to_dict
from alerts.receivers import Receiver
from alerts.signing import generate_secret
from collector.egress import EgressDenied, EgressPolicy
from collector.errors import BadRequestError, ConflictError
from driftline.api.deps import AdminTenant, AppState, ReadTenant, State

#: no prefix of its own: mounted under /api/v1 by driftline.api.alerts
router = APIRouter()


def invalid_request(exc: ValidationError | ValueError) -> BadRequestError:
    """A 400 naming the fields, never echoing input values (they may hold secrets)."""
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors(include_input=False, include_url=False):
            loc = ".".join(str(p) for p in err["loc"])
            parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
        return BadRequestError("; ".join(parts))
    return BadRequestError(str(exc))


def _file_receiver(state: AppState, tenant: str, name: str) -> Receiver | None:
    return state.alerts.get().static.get(tenant, name)


def _not_file(state: AppState, tenant: str, name: str) -> None:
    if _file_receiver(state, tenant, name) is not None:
        raise BadRequestError(
            f"receiver {name!r} is defined in DRIFTLINE_ALERT_RECEIVERS_FILE; change it there"
        )


def check_egress(state: AppState, url: str) -> None:
    """400 unless ``url`` passes the egress policy of ``DRIFTLINE_EGRESS_ALLOW``.

    Raises:
        BadRequestError: the URL is not allowed (the message names the rule).
    """
    try:
        EgressPolicy.parse(state.settings.egress_allow).check_url(url)
    except EgressDenied as exc:
        raise BadRequestError(str(exc)) from None


def _build_receiver(
    state: AppState,
    tenant: str,
    name: str,
    body: ReceiverBody,
    secret: str | None,
    old: Receiver | None,
) -> Receiver:
    check_egress(state, body.url)
    try:
        return Receiver(
            name=name,
            tenant=tenant,
            kind=body.kind,
            url=body.url,
            send_resolved=body.send_resolved,
            routing_key=SecretStr(body.routing_key) if body.routing_key else None,
            max_alerts=body.max_alerts,
            timeout_s=body.timeout_s,
            headers=body.headers,
            secret=SecretStr(secret) if secret else None,
            previous_secret=old.previous_secret if old else None,
            previous_secret_until=old.previous_secret_until if old else None,
        ).check_kind()
    except (ValidationError, ValueError) as exc:
        raise invalid_request(exc) from None


@router.get("/alerts/receivers", summary="Receivers (secrets are never returned)")
def list_receivers(state: State, tenant: ReadTenant) -> dict[str, Any]:
    static = [r for r in state.alerts.get().static.all() if r.tenant == tenant]
    with Session(state.engine) as s:
        db = store.load_db_receivers(s, tenant).all()
    names = {r.name for r in static}
    items = [receiver_to_dict(r, "file") for r in static]
    items += [receiver_to_dict(r, "api") for r in db if r.name not in names]
    return {"items": sorted(items, key=lambda x: x["name"]), "next_cursor": None}


@router.post("/alerts/receivers", status_code=201, summary="Create a receiver")
def create_receiver(state: State, tenant: AdminTenant, body: ReceiverBody) -> dict[str, Any]:
    if body.name is None:
        raise BadRequestError("name is required")
    _not_file(state, tenant, body.name)
    generated = generate_secret() if (body.secret is None and body.signed) else None
    secret = body.secret if body.secret is not None else generated
    if not body.signed and body.secret is not None:
        raise BadRequestError("secret given with signed=false")
    r = _build_receiver(state, tenant, body.name, body, secret, None)
    with Session(state.engine) as s, s.begin():
        if store.load_db_receiver(s, tenant, body.name) is not None:
            raise ConflictError(f"receiver {body.name!r} already exists; use PUT to change it")
        store.save_receiver(s, r, now=time.time())
    out = receiver_to_dict(r, "api")
    if generated is not None:
        out["secret"] = generated
    return out


@router.get("/alerts/receivers/{name}", summary="One receiver (without its secret)")
def get_receiver(name: str, state: State, tenant: ReadTenant) -> dict[str, Any]:
    f = _file_receiver(state, tenant, name)
    if f is not None:
        return receiver_to_dict(f, "file")
    with Session(state.engine) as s:
        return receiver_to_dict(admin.db_receiver(s, tenant, name), "api")


@router.put("/alerts/receivers/{name}", summary="Change a receiver (its secret is kept)")
def put_receiver(
    name: str, state: State, tenant: AdminTenant, body: ReceiverBody
) -> dict[str, Any]:
    if body.name not in (None, name):
        raise BadRequestError(f"name in the body ({body.name!r}) differs from the path")
    if body.secret is not None:
        raise BadRequestError("secret cannot be set by PUT; use rotate-secret")
    _not_file(state, tenant, name)
    with Session(state.engine) as s, s.begin():
        old = admin.db_receiver(s, tenant, name)
        secret = old.secret.get_secret_value() if (old.secret and body.signed) else None
        r = _build_receiver(state, tenant, name, body, secret, old)
        store.save_receiver(s, r, now=time.time())
    return receiver_to_dict(r, "api")


@router.delete("/alerts/receivers/{name}", status_code=204, summary="Delete a receiver")
def delete_receiver(name: str, state: State, tenant: AdminTenant) -> Response:
    _not_file(state, tenant, name)
    with Session(state.engine) as s, s.begin():
        admin.delete_receiver(s, tenant, name)
    return Response(status_code=204)


@router.post(
    "/alerts/receivers/{name}/rotate-secret",
    summary="New signing secret (returned once); the old one signs too for grace_s",
)
def rotate_secret(
    name: str,
    state: State,
    tenant: AdminTenant,
    body: Annotated[RotateBody | None, Body()] = None,
) -> dict[str, Any]:
    _not_file(state, tenant, name)
    grace = (body or RotateBody()).grace_s
    now = time.time()
    with Session(state.engine) as s, s.begin():
        secret = admin.rotate_secret(s, tenant, name, now=now, grace_s=grace)
    return {"name": name, "secret": secret, "previous_secret_until": iso(now + grace)}
