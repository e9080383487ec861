"""ADBC (its own SQLite copy) and the writer (Python's sqlite3) in ONE process on one WAL file:
reads see new commits and never break the writer (no WAL deletion, no "disk I/O error")."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from collector.store import analytics
from driftline.app import create_app
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import make_settings


def test_reads_between_writes_keep_the_writer_working(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/d.db"
    with TestClient(create_app(make_settings(url, grpc_enabled=False))) as c:
        for i in range(1, 6):
            body = pb_request(3, trace_byte=i)
            assert c.post("/v1/traces", content=body, headers=PB).status_code == 200
            (row,) = analytics.call_stats(url, "default")
            assert row["count"] == 3 * i  # the read sees every commit so far
            assert (tmp_path / "d.db-wal").exists()
        assert c.get("/healthz").json()["database"] == "ok"
