"""``driftline alerts`` commands (loaded lazily by ``driftline.cli``)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import click
from pydantic import ValidationError

from alerts.delivery import send_once
from alerts.grouping import Notification, group_of
from alerts.payloads import render
from alerts.receivers import AlertSettings, load_receivers
from alerts.state import AlertStatus, new_alert
from collector import egress
from collector.egress import EgressPolicy
from collector.errors import ConfigError
from collector.retry import Outcome
from collector.settings import describe_validation_error, load_settings


def _settings(receivers_file: Path | None) -> AlertSettings:
    try:
        if receivers_file is not None:
            return AlertSettings(receivers_file=receivers_file)
        return AlertSettings()
    except ValidationError as exc:
        raise ConfigError(
            describe_validation_error(exc).replace("DRIFTLINE_", "DRIFTLINE_ALERT_")
        ) from None


def test_notification(tenant: str, receiver: str, now: float) -> Notification:
    """A firing notification about a synthetic ``driftline_test`` alert (unique id per call)."""
    alert = new_alert("driftline_test", {"severity": "info"})
    alert = replace(
        alert,
        status=AlertStatus.FIRING,
        active_since=now,
        fired_at=now,
        annotations={"summary": "driftline test notification; no action needed"},
    )
    g = group_of(receiver, alert.labels, ("alertname",))
    return Notification(
        id=f"msg_test_{int(now * 1000)}",
        tenant=tenant,
        receiver=receiver,
        group_id=g.group_id,
        group_key=g.group_key,
        group_labels=dict(g.group_labels),
        status="firing",
        reason="first notification",
        alerts=(alert,),
        created_at=now,
    )


@click.group()
def alerts() -> None:
    """Alert rules, receivers and webhook delivery."""


@alerts.command("test")
@click.argument("receiver")
@click.option("--tenant", default="default", show_default=True, help="Tenant of the receiver.")
@click.option(
    "--receivers-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML/YAML receivers file (default: $DRIFTLINE_ALERT_RECEIVERS_FILE).",
)
@click.option("--external-url", default="http://127.0.0.1:4318", show_default=True)
def test_cmd(receiver: str, tenant: str, receivers_file: Path | None, external_url: str) -> None:
    """Send one signed test notification to RECEIVER and report the response."""
    settings = _settings(receivers_file)
    if settings.receivers_file is None:
        raise ConfigError("DRIFTLINE_ALERT_RECEIVERS_FILE is not set (or pass --receivers-file)")
    directory = load_receivers(settings.receivers_file)
    rcv = directory.get(tenant, receiver)
    if rcv is None:
        known = ", ".join(f"{r.tenant}/{r.name}" for r in directory.all()) or "none"
        raise click.ClickException(
            f"no receiver {receiver!r} for tenant {tenant!r} (known: {known})"
        )
    now = time.time()
    note = test_notification(tenant, receiver, now)
    body = render(note, rcv, external_url)
    # the collector's egress policy: public addresses plus DRIFTLINE_EGRESS_ALLOW
    with egress.client(EgressPolicy.parse(load_settings().egress_allow)) as client:
        res = send_once(
            client, rcv, msg_id=note.id, body=body, now=now, timeout_s=settings.timeout_s
        )
    status = "no response" if res.status_code is None else f"HTTP {res.status_code}"
    if res.outcome is Outcome.DELIVERED:
        click.echo(f"delivered to {rcv.name} ({rcv.kind}, {rcv.url}): {status}, id {note.id}")
        return
    raise click.ClickException(f"not delivered to {rcv.name} ({rcv.url}): {res.error or status}")
