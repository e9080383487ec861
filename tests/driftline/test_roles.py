"""Tenant admin and platform admin are separate roles.

A tenant's ``admin`` key manages its own tenant's alerts, receivers, silences and rollouts and
reads only its tenant; ``platform-admin`` (the operator's) also reads across tenants
(``/api/v1/stats?group_by=tenant``, ``/metrics`` of every tenant; see
tests/driftline/test_metrics_scope.py and tests/collector/test_stats.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from collector.auth import PLATFORM_ROLE, ROLES, KeyStore, create_key
from collector.store import engine as store_engine
from driftline.api.deps import DEV_PRINCIPAL
from driftline.app import create_app
from driftline.cli import cli
from tests.conftest import make_settings

RULE = {
    "kind": "threshold",
    "name": "ttft_high",
    "stat": "ttft_s",
    "quantile": 0.99,
    "threshold": 2.0,
    "window_s": 300,
    "receivers": ["oncall"],
}


@pytest.fixture
def client(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        yield c


def _auth(c: TestClient, tenant: str, role: str) -> dict[str, str]:
    engine = c.app.state.driftline.engine  # type: ignore[attr-defined]
    return {"authorization": f"Bearer {create_key(engine, tenant, role)}"}


def test_tenant_admin_manages_only_its_own_tenant(client: TestClient) -> None:
    a, b = _auth(client, "team-a", "admin"), _auth(client, "team-b", "admin")
    assert client.post("/api/v1/alerts/rules", json=RULE, headers=a).status_code == 201
    assert client.get("/api/v1/alerts/rules", headers=b).json()["items"] == []
    assert client.delete("/api/v1/alerts/rules/ttft_high", headers=b).status_code == 404
    r = client.get("/api/v1/stats", params={"group_by": "tenant"}, headers=a)
    assert r.status_code == 403 and "platform-admin" in r.json()["error"]["message"]


def test_platform_admin_reads_across_tenants_and_manages_its_own(client: TestClient) -> None:
    p = _auth(client, "ops", PLATFORM_ROLE)
    assert client.get("/api/v1/stats", params={"group_by": "tenant"}, headers=p).status_code == 200
    assert client.post("/api/v1/alerts/rules", json=RULE, headers=p).status_code == 201
    a = _auth(client, "team-a", "admin")
    assert client.get("/api/v1/alerts/rules", headers=a).json()["items"] == []  # ops' own


def test_keys_cli_creates_every_role_and_dev_acts_as_platform(db_url: str) -> None:
    assert PLATFORM_ROLE in ROLES and DEV_PRINCIPAL.allows("platform")
    env = {"DRIFTLINE_DATABASE_URL": db_url}
    out = CliRunner().invoke(
        cli, ["keys", "create", "--tenant", "ops", "--role", PLATFORM_ROLE], env=env
    )
    assert out.exit_code == 0, out.output
    eng = store_engine.make_engine(db_url)
    try:
        principal = KeyStore(eng).verify(f"Bearer {out.stdout.splitlines()[0].strip()}")
    finally:
        eng.dispose()
    assert principal.role == PLATFORM_ROLE and principal.allows("platform")
