"""Issue 35, item 1: the spool processor never outlives its collector, and every wait of it
honours its stop event.

SIGKILL of a collector whose store is down: PostgreSQL refusing connections (the processor
retries every second), or a SQLite store locked by another writer (``BEGIN IMMEDIATE`` held: a
write waits up to ``busy_timeout``, 30 s). The processor process and its prepare worker exit
within seconds, and a new collector's processor takes the spool's lock and drains what was
acknowledged. Before the fix the locked case kept the orphan for ~30 s (its threads waited on
the store without looking at the stop event; the refused case already exited).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy import text

from collector.cost.prices import PriceTable
from collector.ingest.log_join import joined_writer
from collector.spool.log import TRACES_PROTOBUF, Spool
from collector.spool.processor import SpoolProcessor
from collector.store import engine as store_engine
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import PRICE_FIXTURE, free_port, make_settings
from tests.reliability.support import poll, start_collector
from tests.reliability.test_kill9 import gone, processor_pid, spool_env
from tests.reliability.test_store_outage import connections_refused

#: what "within seconds" means here: the orphan notices in 0.2 s and ends within 5 s
EXIT_WITHIN_S = 10.0


def _stored_spans(db_url: str) -> int:
    eng = store_engine.make_engine(db_url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM spans")).scalar_one())
    finally:
        eng.dispose()


@contextmanager
def sqlite_locked(db_url: str) -> Iterator[None]:
    """Another connection holds SQLite's write lock (``BEGIN IMMEDIATE``) until the end."""
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "outage", [pytest.param("pg-refused", marks=pytest.mark.postgres), "sqlite-locked"]
)
def test_processor_and_its_worker_exit_when_the_collector_is_killed_during_an_outage(
    tmp_path: Path, request: pytest.FixtureRequest, outage: str
) -> None:
    if outage == "pg-refused":
        db_url: str = request.getfixturevalue("pg_url")
        down = connections_refused
    else:
        db_url = f"sqlite:///{tmp_path}/d.db"
        store_engine.upgrade(db_url)
        down = sqlite_locked
    port = free_port()
    env = {**spool_env(tmp_path, "process"), "DRIFTLINE_SPOOL_PREPARE_WORKERS": "1"}
    collector = start_collector(db_url, port, env)
    try:
        child = processor_pid(port)
        assert child is not None
        poll(lambda: bool(psutil.Process(child).children()), timeout_s=60)  # prepare worker
        workers = [p.pid for p in psutil.Process(child).children(recursive=True)]
        with down(db_url):
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/traces", content=pb_request(3), headers=PB, timeout=10
            )
            assert r.status_code == 200  # fsynced to the spool; the processor retries
            time.sleep(2.0)  # a few failed attempts
            assert not gone(child)
            os.kill(collector.pid, signal.SIGKILL)
            collector.wait(10)
            t0 = time.monotonic()
            poll(lambda: all(gone(pid) for pid in [child, *workers]), timeout_s=EXIT_WITHIN_S)
            assert time.monotonic() - t0 < EXIT_WITHIN_S
        collector = start_collector(db_url, port, env)  # the same spool, the store back
        poll(lambda: _stored_spans(db_url) == 3, timeout_s=120)
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
        assert health["spool_processor"]["pid"] not in (None, child)
    finally:
        if collector.poll() is None:
            collector.send_signal(signal.SIGTERM)
            collector.wait(60)


def test_every_wait_of_the_processor_honours_its_stop_event(tmp_path: Path) -> None:
    """The store hangs (SQLite locked by another writer: a write waits up to 30 s): the
    processor thread waits for the writer's commit. ``close`` must stop it within a second or
    so, not when the store answers (before the fix it waited on the commit without looking at
    the stop event, and ``close`` returned with the thread still running)."""
    db_url = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(db_url)
    engine = store_engine.make_engine(db_url)
    writer, joiner = joined_writer(engine, PriceTable.load(PRICE_FIXTURE), make_settings(db_url))
    writer.start()
    sp = Spool(tmp_path / "sp")
    proc = SpoolProcessor(sp, writer, joiner=joiner, capture_mode=lambda _t: "full")
    try:
        with sqlite_locked(db_url):
            sp.append(TRACES_PROTOBUF, "t", pb_request(2), time.time_ns()).result(5)
            proc.start()
            time.sleep(2.0)  # read, prepared, queued: the writer waits on the lock
            assert sp.unprocessed_bytes > 0
            t0 = time.monotonic()
            proc.close(timeout_s=10)
            stopped_after = time.monotonic() - t0
            assert not proc.is_alive(), "the processor thread still waits on the store"
            assert stopped_after < 3.0
        proc = SpoolProcessor(sp, writer, joiner=joiner, capture_mode=lambda _t: "full")
        proc.start()  # the store is back: the record is stored by the next processor
        poll(lambda: sp.unprocessed_bytes == 0, timeout_s=30)
        assert _stored_spans(db_url) == 2
    finally:
        proc.close(10)
        writer.close(10)
        sp.close()
        engine.dispose()
