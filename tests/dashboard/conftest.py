"""A demo store seeded once per module: calls + feedback POSTed to the real collector app
(FastAPI TestClient, prices from case 00), then engine samples, alerts and a rollout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from collector.app import create_app
from dashboard.seed_demo import DemoSeed, seed_demo
from tests.conftest import make_settings, pg_admin_url

N_CALLS = 400


def seed_store(url: str) -> DemoSeed:
    """Seed ``url`` through the collector app (scheduler off so only the seed writes)."""
    settings = make_settings(url, grpc_enabled=False, scheduler_enabled=False)
    with TestClient(create_app(settings)) as client:
        # a TestClient is an httpx.Client subclass at runtime
        return seed_demo(client, url, np.random.default_rng(7), n_calls=N_CALLS, hours=6.0)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def seeded_sqlite(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, DemoSeed]:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash')}/driftline.db"
    return url, seed_store(url)


@pytest.fixture(scope="module")
def seeded_pg() -> Iterator[tuple[str, DemoSeed]]:
    name = f"driftline_dash_{uuid.uuid4().hex[:10]}"
    admin = pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{base}/{name}"
    try:
        yield url, seed_store(url)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
