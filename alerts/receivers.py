"""Receivers (where notifications go) and the settings that locate them.

Receivers come from the ``alert_receivers`` table (REST API ``/api/v1/alerts/receivers``) and
from a TOML or YAML file named by ``DRIFTLINE_ALERT_RECEIVERS_FILE`` (read-only, wins on a
name clash)::

    [[receivers]]
    name = "oncall"
    tenant = "default"          # optional, default "default"
    kind = "alertmanager"       # alertmanager | slack | pagerduty | generic
    url = "https://hooks.example.com/driftline"
    secret = "whsec_..."        # optional Standard Webhooks signing secret
    # routing_key = "..."       # pagerduty only (32 characters)

Rows of the ``alert_receivers`` table map to the same :class:`Receiver` (see
:func:`alerts.store.load_db_receivers`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from alerts.errors import ReceiverConfigError
from alerts.signing import secret_key
from collector.retry import RetryPolicy

ReceiverKind = Literal["alertmanager", "slack", "pagerduty", "generic"]
#: headers a receiver may not set: where the request goes (``Host``), how it is framed, and
#: what the worker sets itself (the Standard Webhooks signature)
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    }
)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def allowed_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` without the :data:`FORBIDDEN_HEADERS` (for rows stored before the rule)."""
    return {k: v for k, v in headers.items() if k.lower() not in FORBIDDEN_HEADERS}


#: the longest per-attempt deadline a receiver may set (seconds; connect, send and the whole
#: answer together): a worker thread and the notification's lease are held that long
RECEIVER_MAX_TIMEOUT_S = 60.0


class Receiver(BaseModel):
    """One notification endpoint of a tenant.

    ``timeout_s``: per-attempt total deadline (seconds, 0 < t <= :data:`RECEIVER_MAX_TIMEOUT_S`;
    None = the worker's default).
    ``max_alerts``: alerts per message (0 = unlimited). ``headers``: extra HTTP headers.
    ``previous_secret`` is still signed with until ``previous_secret_until`` (unix seconds)
    after a rotation, so receivers can switch keys without dropping deliveries (Standard
    Webhooks allows several space-separated signatures).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    tenant: str = Field(default="default", min_length=1, max_length=64)
    kind: ReceiverKind = "generic"
    url: str = Field(max_length=2048)
    secret: SecretStr | None = None
    previous_secret: SecretStr | None = None
    previous_secret_until: float | None = None
    routing_key: SecretStr | None = None
    send_resolved: bool = True
    max_alerts: int = Field(default=0, ge=0)
    timeout_s: float | None = Field(default=None, gt=0, le=RECEIVER_MAX_TIMEOUT_S)
    headers: dict[str, str] = Field(default_factory=dict, max_length=32)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not (v.startswith("http://") or v.startswith("https://")):
            raise ValueError("url must start with http:// or https://")
        return v

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if name.lower() in FORBIDDEN_HEADERS:
                raise ValueError(
                    f"header {name!r} may not be set on a receiver (the URL decides the host; "
                    "framing and signature headers are the worker's)"
                )
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"header name {name!r} is not an HTTP token")
            if any(c in value for c in "\r\n\x00"):
                raise ValueError(f"header {name!r}: value holds CR, LF or NUL")
        return v

    @field_validator("secret", "previous_secret")
    @classmethod
    def _whsec(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            secret_key(v.get_secret_value())
        return v

    def signing_secrets(self, now: float) -> list[str]:
        """Secrets to sign with at ``now`` (unix seconds): the current one, plus the previous
        one during its rotation grace period."""
        out = [self.secret.get_secret_value()] if self.secret else []
        if (
            self.previous_secret is not None
            and self.previous_secret_until is not None
            and now < self.previous_secret_until
        ):
            out.append(self.previous_secret.get_secret_value())
        return out

    def check_kind(self) -> Receiver:
        """Raise ValueError when a format-specific field is missing (PagerDuty routing key)."""
        if self.kind == "pagerduty" and self.routing_key is None:
            raise ValueError(f"receiver {self.name!r}: pagerduty needs routing_key")
        return self


class ReceiverDirectory(Protocol):
    """Where the delivery worker looks receivers up (file today, database / REST later)."""

    def get(self, tenant: str, name: str) -> Receiver | None:
        """The receiver ``name`` of ``tenant``, or None when it does not exist."""
        ...


class StaticReceivers:
    """An in-memory :class:`ReceiverDirectory` built from a list of receivers."""

    def __init__(self, receivers: Iterable[Receiver]) -> None:
        self._by_key: dict[tuple[str, str], Receiver] = {}
        for r in receivers:
            key = (r.tenant, r.name)
            if key in self._by_key:
                raise ValueError(f"receivers: duplicate receiver {r.name!r} of tenant {r.tenant!r}")
            self._by_key[key] = r.check_kind()

    def get(self, tenant: str, name: str) -> Receiver | None:
        """The receiver ``name`` of ``tenant``, or None."""
        return self._by_key.get((tenant, name))

    def all(self) -> list[Receiver]:
        """Every receiver, sorted by (tenant, name)."""
        return [self._by_key[k] for k in sorted(self._by_key)]


class AlertSettings(BaseSettings):
    """Alerting configuration (env prefix ``DRIFTLINE_ALERT_``); durations in seconds."""

    model_config = SettingsConfigDict(env_prefix="DRIFTLINE_ALERT_", extra="ignore")

    receivers_file: Path | None = Field(
        default=None, description="TOML or YAML file with [[receivers]] (see module docs)."
    )
    max_attempts: int = Field(default=8, ge=1, description="Delivery attempts before failing.")
    max_age_s: float = Field(default=900.0, gt=0, description="Give up this long after enqueue.")
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=RECEIVER_MAX_TIMEOUT_S,
        description="Per-attempt total deadline (connect, send, whole answer), at most 60 s.",
    )
    base_delay_s: float = Field(default=1.0, gt=0, description="First retry delay.")
    max_delay_s: float = Field(default=300.0, gt=0, description="Longest backoff delay.")
    enabled: bool = Field(default=True, description="Run the evaluation and delivery jobs.")
    eval_interval_s: float = Field(default=15.0, gt=0, description="Rule evaluation period.")
    delivery_poll_s: float = Field(default=1.0, gt=0, description="Outbox polling period.")
    external_url: str | None = Field(
        default=None, description="Link put in payloads (default: the collector's own URL)."
    )
    queue_saturation: float = Field(
        default=0.9, gt=0, le=1, description="Write-queue fill ratio that is unhealthy."
    )

    def retry_policy(self) -> RetryPolicy:
        """The delivery :class:`RetryPolicy` these settings describe."""
        return RetryPolicy(
            max_attempts=self.max_attempts,
            max_age_s=self.max_age_s,
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
            request_timeout_s=self.timeout_s,
        )


def parse_receivers(data: Mapping[str, Any], source: str = "<data>") -> StaticReceivers:
    """Build receivers from ``{"receivers": [{...}, ...]}``.

    Raises:
        ReceiverConfigError: the structure or a receiver is invalid; names ``source``.
    """
    items = data.get("receivers", [])
    if not isinstance(items, list):
        raise ReceiverConfigError(f"{source}: 'receivers' must be a list")
    try:
        return StaticReceivers(Receiver.model_validate(i) for i in items)
    except (ValidationError, ValueError) as exc:
        raise ReceiverConfigError(f"{source}: {exc}") from None


def load_receivers(path: Path) -> StaticReceivers:
    """Read a receivers file (``.toml``, ``.yaml`` or ``.yml``).

    Raises:
        ReceiverConfigError: the file is missing, unparsable or invalid (names
            ``DRIFTLINE_ALERT_RECEIVERS_FILE`` and the path).
    """
    where = f"DRIFTLINE_ALERT_RECEIVERS_FILE={path}"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ReceiverConfigError(f"{where}: cannot read: {exc.strerror}") from None
    try:
        if path.suffix == ".toml":
            data: Any = tomllib.loads(raw.decode())
        elif path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(raw) or {}
        else:
            raise ReceiverConfigError(f"{where}: file must end in .toml, .yaml or .yml")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ReceiverConfigError(f"{where}: cannot parse: {exc}") from None
    if not isinstance(data, dict):
        raise ReceiverConfigError(f"{where}: top level must be a table/mapping")
    return parse_receivers(data, where)
