"""A revoked key stops working at once in the process that revoked it and within
``REVALIDATE_S`` seconds in any other (it used to work for ``CACHE_TTL_S`` = 30 s everywhere, and
forever in an open dashboard session: tests/dashboard/test_session_revocation.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from collector.auth import CACHE_TTL_S, REVALIDATE_S, KeyStore, create_key, key_active, revoke_key
from collector.store import engine as store_engine
from driftline.app import create_app
from tests.conftest import make_settings


@pytest.fixture
def app(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Engine]]:
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        yield c, c.app.state.driftline.engine  # type: ignore[attr-defined]


def _key_id(key: str) -> str:
    return key.split("_")[1]


def test_revocation_is_immediate_in_the_revoking_process(
    app: tuple[TestClient, Engine],
) -> None:
    client, engine = app
    key = create_key(engine, "acme", "read")
    auth = {"authorization": f"Bearer {key}"}
    assert client.get("/api/v1/alerts/rules", headers=auth).status_code == 200  # now cached
    assert revoke_key(engine, _key_id(key))
    r = client.get("/api/v1/alerts/rules", headers=auth)
    assert r.status_code == 401, r.text
    assert not key_active(engine, _key_id(key))


def test_revocation_by_another_process_takes_effect_within_the_bound(
    app: tuple[TestClient, Engine], db_url: str
) -> None:
    assert REVALIDATE_S * 5 <= CACHE_TTL_S  # the bound is well under the positive cache
    client, engine = app
    key = create_key(engine, "acme", "admin")
    auth = {"authorization": f"Bearer {key}"}
    assert client.get("/api/v1/alerts/rules", headers=auth).status_code == 200
    cli = [sys.executable, "-m", "driftline.cli", "keys", "revoke", _key_id(key)]
    out = subprocess.run(
        [*cli, "--database-url", db_url], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    time.sleep(REVALIDATE_S + 0.5)
    assert client.get("/api/v1/alerts/rules", headers=auth).status_code == 401


def test_a_store_outage_keeps_verified_keys_working(tmp_path: Path) -> None:
    """The revocation check needs the store; when it does not answer, keys verified earlier
    keep working (a spooled collector still takes telemetry) until ``CACHE_TTL_S``."""
    db = tmp_path / "keys.db"
    store_engine.upgrade(f"sqlite:///{db}")
    eng = store_engine.make_engine(f"sqlite:///{db}")
    try:
        key = create_key(eng, "acme", "ingest")
        keys = KeyStore(eng)
        assert keys.verify(f"Bearer {key}").tenant == "acme"
        eng.dispose()
        db.rename(tmp_path / "gone.db")  # the store is gone: queries fail (no such table)
        time.sleep(REVALIDATE_S + 0.1)
        assert keys.cached(f"Bearer {key}") is None  # a sweep is due: the caller must verify
        assert keys.verify(f"Bearer {key}").tenant == "acme"  # sweep failed: still trusted
        assert keys.cached(f"Bearer {key}") is not None
    finally:
        eng.dispose()
