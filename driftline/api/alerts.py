"""``/api/v1/alerts``: alerts (firing, history, acknowledgement), rules, silences and the
delivery outbox; receivers (with signing-secret rotation) in
:mod:`driftline.api.alert_receivers`, whose routes this router includes.

Reads need the ``read`` permission (:data:`ReadTenant`), changes ``admin``
(:data:`AdminTenant`); the tenant always comes from the API key. Secrets are write-only: a
receiver's ``whsec_`` secret is returned once, when it is generated (create or rotate), and
never by a GET; PagerDuty routing keys and extra header values are never returned.
Times in responses are ISO 8601 UTC; inputs accept unix seconds or ISO 8601.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Response
from pydantic import ValidationError
from sqlalchemy.orm import Session

from alerts import admin, outbox, store
from alerts.apishapes import (
    AckBody,
    SilenceBody,
    alert_to_dict,
    delivery_to_dict,
    iso,
    silence_to_dict,
)
from alerts.grouping import Matcher
from alerts.rules import EventRule, ThresholdRule, parse_rule
from alerts.series import check_rule_labels
from alerts.state import AlertStatus
from collector.errors import BadRequestError, ConflictError
from driftline.api import alert_receivers
from driftline.api.alert_receivers import invalid_request as _invalid
from driftline.api.calls import parse_time
from driftline.api.deps import AdminTenant, CurrentPrincipal, ReadTenant, State

router = APIRouter(prefix="/api/v1", tags=["alerts"])
MAX_PAGE = 1000


def _seconds(value: str | None, name: str) -> float | None:
    ns = parse_time(value, name)
    return None if ns is None else ns / 1e9


# --- alerts: list, acknowledge -------------------------------------------------------------


@router.get("/alerts", summary="Alerts: firing, pending and resolved (history)")
def list_alerts(
    state: State,
    tenant: ReadTenant,
    status: Annotated[
        list[Literal["pending", "firing", "resolved", "inactive"]] | None,
        Query(description="repeatable; default pending, firing and resolved"),
    ] = None,
    rule: str | None = None,
    label: Annotated[list[str] | None, Query(description="name=value, repeatable")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: str | None = None,
) -> dict[str, Any]:
    wanted = (
        tuple(AlertStatus(s) for s in status)
        if status
        else (
            AlertStatus.PENDING,
            AlertStatus.FIRING,
            AlertStatus.RESOLVED,
        )
    )
    labels: dict[str, str] = {}
    for item in label or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise BadRequestError(f"label must be name=value, got {item!r}")
        labels[name] = value
    with Session(state.engine) as s:
        items, nxt = admin.list_alerts(
            s, tenant, statuses=wanted, rule=rule, labels=labels, after=cursor, limit=limit
        )
    return {"items": [alert_to_dict(a) for a in items], "next_cursor": nxt}


@router.post("/alerts/{fingerprint}/ack", summary="Acknowledge a firing alert")
def ack_alert(
    fingerprint: str,
    state: State,
    tenant: AdminTenant,
    body: Annotated[AckBody | None, Body()] = None,
) -> dict[str, Any]:
    by = (body or AckBody()).by
    try:
        with Session(state.engine) as s, s.begin():
            a = store.acknowledge_alert(s, tenant, fingerprint, by=by, now=time.time())
    except ValueError as exc:
        raise _invalid(exc) from None
    return alert_to_dict(a)


# --- rules ---------------------------------------------------------------------------------


def _rule_dict(r: admin.StoredRule) -> dict[str, Any]:
    return {
        **r.rule.model_dump(mode="json"),
        "enabled": r.enabled,
        "created_at": iso(r.created_at),
        "updated_at": iso(r.updated_at),
    }


def _parse_rule_body(body: dict[str, Any]) -> tuple[ThresholdRule | EventRule, bool]:
    spec = {k: v for k, v in body.items() if k not in ("enabled", "created_at", "updated_at")}
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise BadRequestError("enabled must be true or false")
    try:
        rule = parse_rule(spec)
        if isinstance(rule, ThresholdRule):
            check_rule_labels(rule)
    except (ValidationError, ValueError) as exc:
        raise _invalid(exc) from None
    return rule, enabled


@router.get("/alerts/rules", summary="Alert rules of the tenant")
def list_rules(state: State, tenant: ReadTenant) -> dict[str, Any]:
    with Session(state.engine) as s:
        return {"items": [_rule_dict(r) for r in admin.list_rules(s, tenant)], "next_cursor": None}


@router.post("/alerts/rules", status_code=201, summary="Create an alert rule")
def create_rule(
    state: State, tenant: AdminTenant, body: Annotated[dict[str, Any], Body()]
) -> dict[str, Any]:
    rule, enabled = _parse_rule_body(body)
    with Session(state.engine) as s, s.begin():
        if admin.rule_exists(s, tenant, rule.name):
            raise ConflictError(f"rule {rule.name!r} already exists; use PUT to replace it")
        store.save_rule(s, tenant, rule, enabled=enabled, now=time.time())
    with Session(state.engine) as s:
        return _rule_dict(admin.get_rule(s, tenant, rule.name))


@router.get("/alerts/rules/{name}", summary="One alert rule")
def get_rule(name: str, state: State, tenant: ReadTenant) -> dict[str, Any]:
    with Session(state.engine) as s:
        return _rule_dict(admin.get_rule(s, tenant, name))


@router.put("/alerts/rules/{name}", summary="Replace an alert rule")
def put_rule(
    name: str, state: State, tenant: AdminTenant, body: Annotated[dict[str, Any], Body()]
) -> dict[str, Any]:
    rule, enabled = _parse_rule_body({"name": name, **body})
    if rule.name != name:
        raise BadRequestError(f"name in the body ({rule.name!r}) differs from the path")
    with Session(state.engine) as s, s.begin():
        admin.get_rule(s, tenant, name)  # 404 when absent
        store.save_rule(s, tenant, rule, enabled=enabled, now=time.time())
    with Session(state.engine) as s:
        return _rule_dict(admin.get_rule(s, tenant, name))


@router.delete("/alerts/rules/{name}", status_code=204, summary="Delete an alert rule")
def delete_rule(name: str, state: State, tenant: AdminTenant) -> Response:
    with Session(state.engine) as s, s.begin():
        admin.delete_rule(s, tenant, name)
    return Response(status_code=204)


# --- receivers: driftline.api.alert_receivers (included here, before /alerts/{fingerprint}) --


router.include_router(alert_receivers.router)


# --- silences ------------------------------------------------------------------------------


@router.post("/alerts/silences", status_code=201, summary="Create a silence")
def create_silence(state: State, tenant: AdminTenant, body: SilenceBody) -> dict[str, Any]:
    now = time.time()
    starts = _seconds(body.starts_at, "starts_at") or now
    ends = _seconds(body.ends_at, "ends_at")
    if (ends is None) == (body.duration_s is None):
        raise BadRequestError("give exactly one of ends_at and duration_s")
    if ends is None:
        ends = starts + (body.duration_s or 0.0)
    try:
        matchers = [Matcher(m.name, m.value, m.op) for m in body.matchers]
        with Session(state.engine) as s, s.begin():
            sil = store.create_silence(
                s,
                tenant,
                matchers,
                starts_at=starts,
                ends_at=ends,
                now=now,
                created_by=body.created_by,
                comment=body.comment,
            )
    except ValueError as exc:
        raise _invalid(exc) from None
    except OverflowError:
        raise BadRequestError("starts_at / ends_at / duration_s is out of range") from None
    return silence_to_dict(sil, now)


@router.get("/alerts/silences", summary="Silences (default: active and pending)")
def list_silences(
    state: State,
    tenant: ReadTenant,
    state_: Annotated[
        Literal["active", "pending", "expired", "all", "current"], Query(alias="state")
    ] = "current",
) -> dict[str, Any]:
    now = time.time()
    with Session(state.engine) as s:
        if state_ == "current":
            sils = admin.list_silences(s, tenant, state="active", now=now)
            sils += admin.list_silences(s, tenant, state="pending", now=now)
        else:
            sils = admin.list_silences(s, tenant, state=state_, now=now)
    return {"items": [silence_to_dict(x, now) for x in sils], "next_cursor": None}


@router.delete("/alerts/silences/{silence_id}", summary="Expire a silence now (kept as history)")
def expire_silence(silence_id: str, state: State, tenant: AdminTenant) -> dict[str, Any]:
    now = time.time()
    with Session(state.engine) as s, s.begin():
        store.expire_silence(s, tenant, silence_id, now=now)
    with Session(state.engine) as s:
        sil = admin.get_silence(s, tenant, silence_id)
    # Seen from its stored end (microsecond precision), the silence is over.
    return silence_to_dict(sil, max(now, sil.ends_at))


# --- deliveries (outbox) -------------------------------------------------------------------


@router.get(
    "/alerts/deliveries",
    summary="Webhook notifications and their delivery status (errors in full for admins)",
)
def list_deliveries(
    state: State,
    tenant: ReadTenant,
    principal: CurrentPrincipal,
    status: Literal["pending", "delivered", "failed"] | None = None,
    receiver: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    # bounded: int() of a 5,000-digit string raises (a 500); 12 digits page past any outbox
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]+$", max_length=12)] = None,
) -> dict[str, Any]:
    items = outbox.list_items(state.engine, tenant, status)
    if receiver is not None:
        items = [i for i in items if i.receiver == receiver]
    start = int(cursor or 0)
    newest = list(reversed(items))[start : start + limit]
    more = len(items) > start + limit
    admin = principal.allows("admin")  # a failed answer's body: admins only
    return {
        "items": [delivery_to_dict(i, admin=admin) for i in newest],
        "next_cursor": str(start + limit) if more else None,
    }


@router.post(
    "/alerts/deliveries/{notification_id}/redeliver",
    summary="Queue a failed notification again (same id and body)",
)
def redeliver(notification_id: str, state: State, tenant: AdminTenant) -> dict[str, Any]:
    item = outbox.get(state.engine, tenant, notification_id)
    if item.status != outbox.FAILED:
        raise BadRequestError(f"notification {notification_id!r} is {item.status}, not failed")
    outbox.redeliver(state.engine, tenant, notification_id, time.time())
    return delivery_to_dict(outbox.get(state.engine, tenant, notification_id), admin=True)


# --- one alert (after the static /alerts/... paths) ----------------------------------------


@router.get("/alerts/{fingerprint}", summary="One alert")
def get_alert(fingerprint: str, state: State, tenant: ReadTenant) -> dict[str, Any]:
    with Session(state.engine) as s:
        return alert_to_dict(admin.get_alert(s, tenant, fingerprint))
