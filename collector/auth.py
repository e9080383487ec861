"""API keys and tenants.

A key reads ``dl_<key_id>_<secret>``: ``key_id`` (12 hex) finds the row, the SHA-256 of the
secret is compared in constant time. The secret has 192 random bits, so a plain hash suffices
(no password-stretching needed). Keys are printed once at creation and never stored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine, insert, select, update

from collector.errors import CollectorError
from collector.store.models import Tenant
from collector.store.models.api import ApiKey

ROLES = ("ingest", "read", "reviewer", "admin")
#: what each role may do
PERMISSIONS: dict[str, frozenset[str]] = {
    "ingest": frozenset({"ingest"}),
    "read": frozenset({"read"}),
    "reviewer": frozenset({"read", "review"}),
    "admin": frozenset({"ingest", "read", "review", "admin"}),
}
CACHE_TTL_S = 30.0


class AuthError(CollectorError):
    """Missing or invalid credentials (HTTP 401)."""


class ForbiddenError(CollectorError):
    """Valid key without the needed permission (HTTP 403)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the key's tenant and role."""

    tenant: str
    role: str
    key_id: str | None

    def allows(self, permission: str) -> bool:
        return permission in PERMISSIONS.get(self.role, frozenset())


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def ensure_tenant(engine: Engine, name: str) -> None:
    """Create tenant ``name`` if it does not exist."""
    if not name or len(name) > 64:
        raise ValueError("tenant must be 1..64 characters")
    with engine.begin() as conn:
        exists = conn.execute(select(Tenant.name).where(Tenant.name == name)).first()
        if not exists:
            conn.execute(insert(Tenant).values(name=name, created_at=dt.datetime.now(dt.UTC)))


def create_key(engine: Engine, tenant: str, role: str = "ingest", name: str | None = None) -> str:
    """Create a key for ``tenant`` (created if needed) and return it; only its hash is stored.

    Raises:
        ValueError: unknown role or bad tenant name.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    ensure_tenant(engine, tenant)
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(24)
    with engine.begin() as conn:
        conn.execute(
            insert(ApiKey).values(
                key_id=key_id,
                tenant=tenant,
                role=role,
                secret_sha256=_sha256(secret),
                name=name,
                created_at=dt.datetime.now(dt.UTC),
            )
        )
    return f"dl_{key_id}_{secret}"


def revoke_key(engine: Engine, key_id: str) -> bool:
    """Revoke a key by id; False if there is no such active key."""
    with engine.begin() as conn:
        res = conn.execute(
            update(ApiKey)
            .where(ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=dt.datetime.now(dt.UTC))
        )
        return bool(res.rowcount)


class KeyStore:
    """Verifies bearer keys against the store, caching positive lookups for a few seconds."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def verify(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer dl_...`` header value.

        Raises:
            AuthError: missing, malformed, unknown or revoked key.
        """
        if not authorization:
            raise AuthError("missing Authorization: Bearer <api key>")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise AuthError("Authorization must be `Bearer <api key>`")
        token = token.strip()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(token)
        if hit and hit[0] > now:
            return hit[1]
        parts = token.split("_", 2)
        if len(parts) != 3 or parts[0] != "dl":
            raise AuthError("malformed API key")
        _, key_id, secret = parts
        with self._engine.connect() as conn:
            row = conn.execute(
                select(ApiKey.tenant, ApiKey.role, ApiKey.secret_sha256).where(
                    ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None)
                )
            ).first()
        if row is None or not hmac.compare_digest(row.secret_sha256, _sha256(secret)):
            raise AuthError("invalid or revoked API key")
        principal = Principal(tenant=row.tenant, role=row.role, key_id=key_id)
        with self._lock:
            self._cache[token] = (now + CACHE_TTL_S, principal)
        return principal
