"""Shared fixtures: real SQLite and real PostgreSQL stores, the collector app, a live server.

PostgreSQL: the test machine runs it on 127.0.0.1:5432 (trust auth). Each test that asks for
it gets a fresh database, dropped afterwards. Set DRIFTLINE_TEST_PG_ADMIN_URL to point
elsewhere. Stores are copies of one migrated template per session (SQLite file, PostgreSQL
``CREATE DATABASE ... TEMPLATE``): migrating each test's store cost ~1 s a test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from fastapi.testclient import TestClient

from collector.settings import Settings
from collector.store.engine import upgrade
from driftline.app import create_app
from tests.support import free_port, wait_for  # noqa: F401 (re-exported to tests)
from tests.support.fixtures import CASES, PRICE_FIXTURE  # noqa: F401 (re-exported to tests)

REPO = Path(__file__).resolve().parents[1]
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
#: where make_settings puts a PostgreSQL store's lake (outside the checkout; removed with it)
_TEST_LAKES = Path(tempfile.gettempdir()) / "driftline-test-lakes"


#: the serving tier's venv (``make serving``): the ``vllm``-marked tests need it
VLLM_VENV_PY = REPO / ".driftline" / "vllm-venv" / "bin" / "python"


def missing_requirement(marker: str) -> str | None:
    """Why a ``browser`` or ``vllm``-marked test cannot run here, with the command that
    enables it; None when it can."""
    if marker == "browser":
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if not (browser and shutil.which("chromedriver")):
            return (
                "Chromium/ChromeDriver not installed: `sudo apt-get install chromium "
                "chromium-driver` (or `make test` as root installs them)"
            )
    if marker == "vllm" and not VLLM_VENV_PY.exists():
        return "vLLM CPU venv not built: run `make serving` (~4 min, ~6 GB once)"
    return None


_WIDE_SCOPES = frozenset({"class", "module", "package"})


def _shares_a_fixture(item: pytest.Item) -> bool:
    """True when ``item`` uses a class/module/package-scoped fixture (its file's tests then
    run on one worker, so the fixture starts once)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True
    return any(d.scope in _WIDE_SCOPES for defs in info.name2fixturedefs.values() for d in defs)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group tests for ``pytest -n 2 --dist loadgroup`` (``make test`` runs two workers).

    Every ``vllm`` test is in one group, scheduled first (the longest chain: two vLLM CPU
    engines never compete for the cores, and the other worker takes everything else); the
    tests of a file that shares a module fixture (a Streamlit app, a Spark session) stay on
    one worker; any other test goes wherever a worker is free. Without xdist the markers do
    nothing and only the order changes (vLLM tests first)."""
    for item in items:
        if item.get_closest_marker("vllm"):
            group = "vllm"
        elif _shares_a_fixture(item):
            group = item.nodeid.split("::", 1)[0]
        else:
            group = item.nodeid
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda it: it.get_closest_marker("vllm") is None)  # stable


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip ``browser``/``vllm`` tests whose requirement is absent, saying why and how to
    enable them; under CI (``CI`` set) a missing requirement fails the test instead."""
    for marker in ("browser", "vllm"):
        if item.get_closest_marker(marker) is None:
            continue
        reason = missing_requirement(marker)
        if reason is None:
            continue
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {reason}", pytrace=False)
        pytest.skip(reason)


def pg_admin_url() -> str:
    return os.environ.get("DRIFTLINE_TEST_PG_ADMIN_URL", PG_ADMIN_URL)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite URL in the test's folder; no file yet (the code under test creates it)."""
    return f"sqlite:///{tmp_path}/driftline.db"


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite file migrated to every head, copied for each test that needs a store
    (running the migrations takes ~1 s per test; a copy takes a millisecond)."""
    path = tmp_path_factory.mktemp("template") / "driftline.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def _pg_template() -> Iterator[str]:
    """One PostgreSQL database migrated to every head, the template of each test's database."""
    name = f"driftline_tmpl_{uuid.uuid4().hex[:12]}"
    admin = pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        upgrade(_pg_url_of(name))
        yield name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_url_of(name: str) -> str:
    base = pg_admin_url().rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return f"{base}/{name}"


@pytest.fixture
def pg_url(_pg_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database for one test, already migrated to every head (a copy of
    the session's template; tests/collector/test_migrations.py runs base -> head itself)."""
    name = f"driftline_t_{uuid.uuid4().hex[:12]}"
    admin = pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{_pg_template}"')
    try:
        yield _pg_url_of(name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(_TEST_LAKES / name, ignore_errors=True)  # make_settings' lake


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Parametrised: the same test on SQLite and on PostgreSQL, each a fresh store migrated to
    every head."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("_sqlite_template")
        shutil.copyfile(template, tmp_path / "driftline.db")
        return f"sqlite:///{tmp_path}/driftline.db"
    url: str = request.getfixturevalue("pg_url")
    return url


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "dev": True,
        "grpc_port": 0,
        "prices": PRICE_FIXTURE,
        # in-process collectors answer once stored, so a test reads what it sent at once; the
        # spool (the default) is tested in tests/collector/test_spool.py, tests/reliability and
        # by every test that starts `driftline collector` / the demo as a process
        "spool_enabled": False,
    }
    if not database_url.startswith("sqlite"):  # a lake of its own, outside the checkout
        name = database_url.rsplit("/", 1)[-1].split("?", 1)[0]
        values["lake_url"] = str(_TEST_LAKES / name)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    """The collector app (lifespan running) on the parametrised store, prices from case 00."""
    with TestClient(create_app(make_settings(db_url, grpc_enabled=False))) as c:
        yield c


class LiveCollector:
    """A real uvicorn server (HTTP) plus the gRPC receiver, in this process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = create_app(settings)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=settings.http_port,
                log_level="warning",
                access_log=False,
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.app.state.driftline.grpc_port}"

    def start(self) -> LiveCollector:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("collector did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def calls(self, **params: Any) -> list[dict[str, Any]]:
        r = httpx.get(f"{self.http_url}/api/v1/calls", params={"limit": 1000, **params})
        r.raise_for_status()
        items: list[dict[str, Any]] = r.json()["items"]
        return items


@pytest.fixture
def live_collector(db_url: str) -> Iterator[LiveCollector]:
    lc = LiveCollector(make_settings(db_url, http_port=free_port(), grpc_port=0)).start()
    try:
        yield lc
    finally:
        lc.stop()
