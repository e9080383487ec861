"""The gateway role: which tenant a span is filed under (pure) and how keys store it."""

from __future__ import annotations

import pytest

from collector.auth import KeyStore, Principal, create_key, span_tenant
from collector.store import engine as store_engine

GATEWAY = Principal("platform", "gateway", "k1", frozenset({"acme", "bob"}))


@pytest.mark.parametrize(
    ("principal", "attrs", "expected"),
    [
        (GATEWAY, {"driftline.tenant": "acme"}, "acme"),
        (GATEWAY, {"driftline.tenant": "bob"}, "bob"),
        (GATEWAY, {"driftline.tenant": "eve"}, "platform"),  # not a tenant it speaks for
        (GATEWAY, {"driftline.tenant": ["acme"]}, "platform"),  # not a string
        (GATEWAY, {}, "platform"),
        # any other role: the key's tenant whatever the span claims
        (Principal("mallory", "ingest", "k2"), {"driftline.tenant": "acme"}, "mallory"),
        (Principal("acme", "admin", "k3"), {"driftline.tenant": "bob"}, "acme"),
        (
            Principal("mallory", "ingest", "k4", frozenset({"acme"})),
            {"driftline.tenant": "acme"},
            "mallory",
        ),
        (Principal("platform", "gateway", "k5"), {"driftline.tenant": "acme"}, "platform"),
    ],
)
def test_span_tenant(principal: Principal, attrs: dict[str, object], expected: str) -> None:
    assert span_tenant(principal, attrs) == expected


def test_gateway_keys_store_their_tenants(sqlite_url: str) -> None:
    store_engine.upgrade(sqlite_url)
    eng = store_engine.make_engine(sqlite_url)
    try:
        key = create_key(eng, "platform", "gateway", "gw", ["bob", "acme", "bob"])
        p = KeyStore(eng).verify(f"Bearer {key}")
        assert (p.tenant, p.role, p.tenants) == ("platform", "gateway", frozenset({"acme", "bob"}))
        assert p.allows("ingest") and not p.allows("read")
        plain = KeyStore(eng).verify(f"Bearer {create_key(eng, 'acme', 'ingest')}")
        assert plain.tenants == frozenset()
        with pytest.raises(ValueError, match="tenants: only a gateway key"):
            create_key(eng, "acme", "ingest", tenants=["bob"])
    finally:
        eng.dispose()
