"""kill -9 of the collector under load loses no acknowledged span and duplicates none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from collector.store import engine as store_engine
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import free_port, wait_for


def start_collector(db_url: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": db_url}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "collector.cli",
            "collector",
            "--dev",
            "--port",
            str(port),
            "--grpc-port",
            "0",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            return False

    wait_for(up, timeout_s=60)
    return proc


@pytest.mark.slow
def test_kill9_loses_no_acknowledged_span(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path}/d.db"
    port = free_port()
    proc = start_collector(db_url, port)
    acked: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    spans_per_request = 50

    def sender(worker: int) -> None:
        n = 0
        with httpx.Client(timeout=10) as http:
            while not stop.is_set() and n < 400:
                batch_id = worker * 1000 + n  # each request: its own trace id
                body = pb_request(spans_per_request, trace_byte=0, model="gpt-4o")
                body = body.replace(bytes(16), batch_id.to_bytes(16, "big"))
                try:
                    r = http.post(f"http://127.0.0.1:{port}/v1/traces", content=body, headers=PB)
                except httpx.HTTPError:
                    return  # the collector is gone
                if r.status_code == 200:
                    with lock:
                        acked.append(batch_id)
                n += 1

    threads = [threading.Thread(target=sender, args=(w + 1,)) for w in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: len(acked) >= 40, timeout_s=120)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    stop.set()
    for t in threads:
        t.join(30)
    assert acked, "no request was acknowledged before the kill"

    proc = start_collector(db_url, port)  # restart on the same file
    try:
        eng = store_engine.make_engine(db_url)
        with eng.connect() as conn:
            rows = conn.execute(
                text("SELECT trace_id, COUNT(*) FROM spans GROUP BY trace_id")
            ).all()
            calls = conn.execute(
                text("SELECT COUNT(*), COUNT(DISTINCT trace_id || span_id) FROM llm_calls")
            ).one()
        eng.dispose()
        per_trace = {int(t, 16): n for t, n in rows}
        for batch_id in acked:
            assert per_trace.get(batch_id) == spans_per_request, batch_id
        assert calls[0] == calls[1]  # no duplicate call rows
        assert calls[0] >= len(acked) * spans_per_request
    finally:
        proc.terminate()
        proc.wait(20)
        time.sleep(0.1)
