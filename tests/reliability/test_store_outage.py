"""The PostgreSQL store unavailable for 30 s under exporter load: while it is down the collector
answers ``/v1/traces`` with 503 + Retry-After (never a 500, never slower than the exporter's
10 s timeout); once it is back, every acknowledged span is stored exactly once.

Two outages: the ``spans`` table locked ``ACCESS EXCLUSIVE`` by another session (writes block),
and the database refusing connections with the collector's sessions terminated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import psycopg
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from sqlalchemy.engine import make_url

from tests.conftest import LiveCollector, free_port, make_settings, pg_admin_url
from tests.reliability.support import (
    ExportLoad,
    Key,
    assert_exactly_once,
    poll,
    sdk_batches,
    span_key,
)

OUTAGE_S = 30.0
#: the OpenTelemetry exporters' default per-export timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s)
EXPORTER_TIMEOUT_S = 10.0
PB = {"Content-Type": "application/x-protobuf"}
WORKERS, BATCHES, PER_BATCH = 2, 25, 20  # exporter load: 1,000 spans, a batch every 0.5 s


@dataclass(frozen=True)
class Probe:
    """One raw POST of a small batch: when it was sent and answered (monotonic seconds),
    the status (None when the request failed) and the Retry-After header."""

    sent: float
    answered: float
    status: int | None
    retry_after: str | None
    error: str | None
    keys: tuple[Key, ...]


def libpq_url(sqlalchemy_url: str) -> str:
    return make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(False)


@contextmanager
def table_locked(db_url: str) -> Iterator[None]:
    """Hold ``LOCK TABLE spans IN ACCESS EXCLUSIVE MODE`` in another session."""
    with psycopg.connect(libpq_url(db_url)) as conn:
        conn.execute("LOCK TABLE spans IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


@contextmanager
def connections_refused(db_url: str) -> Iterator[None]:
    """``ALLOW_CONNECTIONS false`` on the test database and its open sessions terminated."""
    name = make_url(db_url).database
    with psycopg.connect(pg_admin_url(), autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


OUTAGES = {"table_locked": table_locked, "connections_refused": connections_refused}


def probe_loop(url: str, stop: threading.Event, out: list[Probe]) -> None:
    """POST a fresh 5-span SDK batch every 0.5 s with the exporter's timeout; record each."""
    with httpx.Client(timeout=EXPORTER_TIMEOUT_S) as http:
        n = 0
        while not stop.is_set():
            batch = sdk_batches(1, 5, f"probe-{n}")[0]
            body = encode_spans(batch).SerializeToString()
            sent = time.monotonic()
            status, retry, error = None, None, None
            try:
                r = http.post(url, content=body, headers=PB)
                status, retry = r.status_code, r.headers.get("retry-after")
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            out.append(
                Probe(sent, time.monotonic(), status, retry, error, tuple(map(span_key, batch)))
            )
            n += 1
            stop.wait(0.5)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("outage", sorted(OUTAGES))
def test_store_outage_answers_503_then_loses_nothing(pg_url: str, outage: str) -> None:
    lc = LiveCollector(
        make_settings(pg_url, http_port=free_port(), grpc_port=0, scheduler_enabled=False)
    ).start()
    url = f"{lc.http_url}/v1/traces"
    # exporters that outlast the outage: 90 s per batch, retries honour Retry-After
    load = ExportLoad(
        endpoint=url,
        batches_per_worker=[sdk_batches(BATCHES, PER_BATCH, f"svc-{w}") for w in range(WORKERS)],
        timeout_s=90,
        interval_s=0.5,
    )
    probes: list[Probe] = []
    stop = threading.Event()
    prober = threading.Thread(target=probe_loop, args=(url, stop, probes), daemon=True)
    try:
        load.start()
        prober.start()
        poll(lambda: load.acked_spans >= 100, timeout_s=60)
        with OUTAGES[outage](pg_url):
            down = time.monotonic()
            time.sleep(OUTAGE_S)
            up = time.monotonic()
        poll(lambda: any(p.status == 200 and p.sent > up for p in probes), timeout_s=30)
        stop.set()
        prober.join(EXPORTER_TIMEOUT_S + 5)
        load.join(timeout_s=180)
    finally:
        stop.set()
        lc.stop()

    # requests sent once the outage had begun (1 s of grace) and answered before it ended
    during = [p for p in probes if p.sent > down + 1.0 and p.answered < up]
    outcomes = sorted({(p.status, p.error) for p in during}, key=str)
    slowest = max((p.answered - p.sent for p in probes), default=0.0)
    print(
        f"{outage}: {len(during)} probes during the outage, outcomes {outcomes}, slowest "
        f"answer {slowest:.1f} s; acked spans {load.acked_spans}, exporter batches given up "
        f"{load.failed_batches}"
    )
    assert all(p.error is None for p in probes), [p for p in probes if p.error][:3]
    assert slowest < EXPORTER_TIMEOUT_S
    assert len(during) >= 5, f"only {len(during)} probes were answered during the outage"
    assert {p.status for p in during} == {503}, outcomes
    assert all(p.retry_after and p.retry_after.isdigit() for p in during)
    # The SDK makes 6 attempts; at Retry-After 5 s it may give up on a batch inside a 30 s
    # outage. Such a batch was never acknowledged; everything else must have got through.
    assert load.acked_spans + PER_BATCH * load.failed_batches == WORKERS * BATCHES * PER_BATCH
    assert any(p.status == 200 and p.sent > up for p in probes)
    acked = load.acked + [k for p in probes if p.status == 200 for k in p.keys]
    assert_exactly_once(pg_url, acked)
