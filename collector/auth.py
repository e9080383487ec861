"""API keys and tenants.

A key reads ``dl_<key_id>_<secret>``: ``key_id`` (12 hex) finds the row, the SHA-256 of the
secret is compared in constant time. The secret has 192 random bits, so a plain hash suffices
(no password-stretching needed). Keys are printed once at creation and never stored.

Roles: ``ingest`` (send telemetry and feedback), ``read``, ``reviewer`` (read + label review
samples), ``admin`` (tenant admin: everything within its own tenant: alerts, receivers,
silences, rollouts; it reads only its tenant), ``platform-admin`` (a tenant admin that also reads
across tenants: ``/metrics`` series of every tenant, ``/api/v1/stats?group_by=tenant``; the
operator's key), and ``gateway``: an ingest key of a
trusted gateway that serves several tenants. Spans are filed under the key's tenant, whatever
their attributes say, except that a ``gateway`` key's span carrying :data:`TENANT_ATTRIBUTE`
(``driftline.tenant``) is filed under that tenant when it is one the key was created for
(:func:`span_tenant`). Threat model: whoever holds a gateway key can write into each tenant it
lists (not read), so a gateway key is an admin-issued credential of the serving tier.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import logging
import secrets
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from collector.errors import CollectorError
from collector.store.models import Tenant
from collector.store.models.api import ApiKey

#: the role that reads across tenants (the operator's); ``admin`` manages its own tenant only
PLATFORM_ROLE = "platform-admin"
ROLES = ("ingest", "read", "reviewer", "admin", PLATFORM_ROLE, "gateway")
#: what each role may do
PERMISSIONS: dict[str, frozenset[str]] = {
    "ingest": frozenset({"ingest"}),
    "gateway": frozenset({"ingest"}),
    "read": frozenset({"read"}),
    "reviewer": frozenset({"read", "review"}),
    "admin": frozenset({"ingest", "read", "review", "admin"}),
    #: ``platform``: read every tenant's series and statistics
    PLATFORM_ROLE: frozenset({"ingest", "read", "review", "admin", "platform"}),
}
log = logging.getLogger(__name__)
#: longest a verified key is trusted without a full store lookup (seconds)
CACHE_TTL_S = 30.0
#: longest a key revoked by another process keeps working here (seconds): a cache hit older
#: than this since the last revocation sweep goes to :meth:`KeyStore.verify`, which asks the
#: store (one query for every cached key id) which of them were revoked
REVALIDATE_S = 2.0
#: span attribute naming the tenant a gateway served the call for (trusted only as above)
TENANT_ATTRIBUTE = "driftline.tenant"


class AuthError(CollectorError):
    """Missing or invalid credentials (HTTP 401)."""


class ForbiddenError(CollectorError):
    """Valid key without the needed permission (HTTP 403)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the key's tenant and role; ``tenants``: the tenants a ``gateway`` key may
    file spans under (empty for every other role)."""

    tenant: str
    role: str
    key_id: str | None
    tenants: frozenset[str] = frozenset()

    def allows(self, permission: str) -> bool:
        return permission in PERMISSIONS.get(self.role, frozenset())


def span_tenant(principal: Principal, attributes: Mapping[str, Any]) -> str:
    """The tenant a span sent by ``principal`` is stored under.

    The key's own tenant, unless the key has role ``gateway`` and the span's
    ``driftline.tenant`` attribute names one of the tenants the key was created for. Any other
    key's spans stay in the key's tenant whatever their attributes say; a gateway span naming a
    tenant outside its list also stays in the key's tenant (it is not dropped: it is the
    gateway's own traffic then, and its owner can see it). Pure; never raises.
    """
    if principal.role != "gateway" or not principal.tenants:
        return principal.tenant
    claimed = attributes.get(TENANT_ATTRIBUTE)
    if isinstance(claimed, str) and claimed in principal.tenants:
        return claimed
    return principal.tenant


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


def create_key(
    engine: Engine,
    tenant: str,
    role: str = "ingest",
    name: str | None = None,
    tenants: Iterable[str] | None = None,
) -> str:
    """Create a key for ``tenant`` (created if needed) and return it; only its hash is stored.

    ``tenants``: role ``gateway`` only, the tenants the key may file spans under through
    ``driftline.tenant`` (each created if needed; see :func:`span_tenant`).

    Raises:
        ValueError: unknown role, bad tenant name, or ``tenants`` given for another role.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    allowed = sorted(set(tenants or ()))
    if allowed and role != "gateway":
        raise ValueError(f"tenants: only a gateway key speaks for other tenants, not {role!r}")
    ensure_tenant(engine, tenant)
    for t in allowed:
        ensure_tenant(engine, t)
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
                tenants=allowed or None,
            )
        )
    return f"dl_{key_id}_{secret}"


def revoke_key(engine: Engine, key_id: str) -> bool:
    """Revoke a key by id; False if there is no such active key.

    Takes effect at once in this process (every :class:`KeyStore` here forgets the key) and
    within :data:`REVALIDATE_S` seconds in every other process.
    """
    with engine.begin() as conn:
        res = conn.execute(
            update(ApiKey)
            .where(ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=dt.datetime.now(dt.UTC))
        )
    for store in list(_STORES):
        store.forget(key_id)
    return bool(res.rowcount)


def key_active(engine: Engine, key_id: str) -> bool:
    """True while key ``key_id`` exists and is not revoked (one primary-key lookup): what a
    long-lived session (the dashboard's) checks before it acts on a key verified earlier."""
    with engine.connect() as conn:
        row = conn.execute(
            select(ApiKey.key_id).where(ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None))
        ).first()
    return row is not None


#: every KeyStore of this process, so that :func:`revoke_key` reaches their caches
_STORES: weakref.WeakSet[KeyStore] = weakref.WeakSet()


class KeyStore:
    """Verifies bearer keys against the store, caching positive lookups.

    A cached key is trusted for at most :data:`CACHE_TTL_S` seconds, and only while the last
    revocation sweep is younger than :data:`REVALIDATE_S`: a revocation in this process
    (:func:`revoke_key`) takes effect at once, one elsewhere within :data:`REVALIDATE_S`.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()
        self._swept_at = time.monotonic()
        _STORES.add(self)

    def forget(self, key_id: str) -> None:
        """Drop every cached token of ``key_id`` (it was revoked)."""
        with self._lock:
            for token in [t for t, (_, p) in self._cache.items() if p.key_id == key_id]:
                del self._cache[token]

    def _sweep_revoked(self, now: float) -> None:
        """Forget cached keys the store says are revoked (one query for all cached ids). A
        store that does not answer leaves the cache as it is (keys verified earlier keep
        working up to :data:`CACHE_TTL_S`, so a spooled collector still accepts telemetry
        during a store outage); the next sweep is :data:`REVALIDATE_S` later."""
        with self._lock:
            due = now - self._swept_at >= REVALIDATE_S
            ids = sorted({p.key_id for _, p in self._cache.values() if p.key_id})
        if not due:
            return
        revoked: set[str] = set()
        try:
            with self._engine.connect() as conn:
                for i in range(0, len(ids), 500):
                    revoked.update(
                        conn.execute(
                            select(ApiKey.key_id).where(
                                ApiKey.key_id.in_(ids[i : i + 500]),
                                ApiKey.revoked_at.is_not(None),
                            )
                        ).scalars()
                    )
        except SQLAlchemyError as exc:
            log.warning("API key revocation check failed (store unavailable?): %s", exc)
        with self._lock:
            for token in [t for t, (_, p) in self._cache.items() if p.key_id in revoked]:
                del self._cache[token]
            self._swept_at = max(self._swept_at, now)

    def cached(self, authorization: str | None) -> Principal | None:
        """The principal of ``authorization`` if a lookup of the last few seconds verified it,
        else None (not verified, or not well formed: :meth:`verify` says why). Never touches
        the store, so an async route may call it on the event loop."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(token.strip())
            fresh = now - self._swept_at < REVALIDATE_S
        return hit[1] if hit and fresh and hit[0] > now else None

    def verify(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer dl_...`` header value (a store lookup
        unless :meth:`cached` knows it).

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
        self._sweep_revoked(now)
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
                select(ApiKey.tenant, ApiKey.role, ApiKey.secret_sha256, ApiKey.tenants).where(
                    ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None)
                )
            ).first()
        if row is None or not hmac.compare_digest(row.secret_sha256, _sha256(secret)):
            raise AuthError("invalid or revoked API key")
        principal = Principal(
            tenant=row.tenant,
            role=row.role,
            key_id=key_id,
            tenants=frozenset(row.tenants or ()) if row.role == "gateway" else frozenset(),
        )
        with self._lock:
            self._cache[token] = (now + CACHE_TTL_S, principal)
        return principal
