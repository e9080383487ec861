"""kill -9 of the collector under load loses no acknowledged span and duplicates none: raw
httpx senders, and the real OpenTelemetry SDK exporter (which retries) across two restarts;
with the spool's processor in a process of its own, kill -9 of the receiver alone and of the
processor alone (restarted by the collector while the receiver keeps acknowledging)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from collector.store import engine as store_engine
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import free_port, wait_for
from tests.reliability.support import (
    ExportLoad,
    assert_exactly_once,
    poll,
    sdk_batches,
    start_collector,
)


def spool_env(tmp_path: Path, mode: str) -> dict[str, str]:
    return {
        "DRIFTLINE_SPOOL_ENABLED": "true",
        "DRIFTLINE_SPOOL_DIR": str(tmp_path / "spool"),
        "DRIFTLINE_SPOOL_PROCESSOR": mode,
    }


def processor_pid(port: int) -> int | None:
    """The spool processor child's pid as the collector's /healthz reports it."""
    return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["spool_processor"]["pid"]


def gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie not yet reaped by init counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


@pytest.mark.slow
@pytest.mark.parametrize(
    "spool", [None, "thread", "process"], ids=["direct", "spool-thread", "spool-process"]
)
def test_kill9_loses_no_acknowledged_span(tmp_path: Path, spool: str | None) -> None:
    """With the spool in thread mode, SIGKILL hits the receiver (requests being appended and
    fsynced) and the processor (batches between store commit and offset commit) of the same
    process at once. In process mode it hits the receiver alone: the orphaned processor stops
    by itself (its parent is gone) and the restarted collector's processor takes the spool
    over. Either way every acknowledged span is stored exactly once."""
    db_url = f"sqlite:///{tmp_path}/d.db"
    port = free_port()
    # "direct": no spool, the acknowledgement follows the store commit (the spool is on by
    # default, so it is switched off explicitly; otherwise acknowledged spans could still be
    # in the spool when the store is read below)
    env = spool_env(tmp_path, spool) if spool else {"DRIFTLINE_SPOOL_ENABLED": "false"}
    proc = start_collector(db_url, port, env)
    child = processor_pid(port) if spool == "process" else None
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

    proc = start_collector(db_url, port, env)  # restart on the same file (and spool)
    try:
        if child is not None:
            poll(lambda: gone(child), timeout_s=60)  # the orphan noticed and stopped
        if spool:
            poll(
                lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").json()["spool_bytes"] == 0,
                timeout_s=120,
            )
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


@pytest.mark.slow
def test_kill9_under_sdk_exporter_load_stores_acked_spans_exactly_once(tmp_path: Path) -> None:
    """Four ``OTLPSpanExporter`` workers export SDK span batches while the collector is killed
    with SIGKILL twice and restarted on the same SQLite file. The exporters retry refused and
    reset connections (6 attempts, ~30 s of back-off); a batch they give up on is simply not
    acknowledged. Every acknowledged span is stored exactly once."""
    db_url = f"sqlite:///{tmp_path}/d.db"
    port = free_port()
    workers, batches, per_batch = 4, 20, 50
    load = ExportLoad(
        endpoint=f"http://127.0.0.1:{port}/v1/traces",
        batches_per_worker=[sdk_batches(batches, per_batch, f"svc-{w}") for w in range(workers)],
        timeout_s=90,
    )
    proc = start_collector(db_url, port)
    load.start()
    acked_at_kill: list[int] = []
    try:
        for kill_at in (6 * per_batch, 30 * per_batch):  # spans acknowledged before each kill
            poll(lambda: load.acked_spans >= kill_at, timeout_s=120)  # noqa: B023
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            acked_at_kill.append(load.acked_spans)
            proc = start_collector(db_url, port)
        load.join(timeout_s=150)
        # the spool is on by default: an acknowledged span is durable in the spool, and stored
        # once the processor reaches it (on a slow machine the last batches are still queued
        # when the load ends; a collector stopped before that stores them at its next start)
        poll(
            lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").json().get("spool_bytes", 0) == 0,
            timeout_s=120,
        )
    finally:
        proc.terminate()
        proc.wait(20)
    print(
        f"acked spans at the kills: {acked_at_kill}; acked {load.acked_spans}, "
        f"failed batches {load.failed_batches}"
    )
    assert load.acked_spans > acked_at_kill[-1], "nothing was acknowledged after the restart"
    assert load.acked_spans + load.failed_batches * per_batch == workers * batches * per_batch
    assert_exactly_once(db_url, load.acked)


@pytest.mark.slow
def test_kill9_of_the_spool_processor_alone_while_the_receiver_acknowledges(
    tmp_path: Path,
) -> None:
    """Spool in process mode under SDK exporter load: the processor child is killed with
    SIGKILL twice (between store commits and offset commits); the receiver never stops
    acknowledging, the collector restarts the processor, and once the spool is drained every
    acknowledged span is stored exactly once."""
    db_url = f"sqlite:///{tmp_path}/d.db"
    port = free_port()
    workers, batches, per_batch = 4, 20, 50
    load = ExportLoad(
        endpoint=f"http://127.0.0.1:{port}/v1/traces",
        batches_per_worker=[sdk_batches(batches, per_batch, f"svc-{w}") for w in range(workers)],
        timeout_s=90,
        interval_s=0.05,
    )
    proc = start_collector(db_url, port, spool_env(tmp_path, "process"))
    killed: list[int] = []
    try:
        poll(lambda: processor_pid(port) is not None, timeout_s=120)
        load.start()
        for kill_at in (6 * per_batch, 30 * per_batch):
            poll(lambda: load.acked_spans >= kill_at, timeout_s=120)  # noqa: B023
            pid = processor_pid(port)
            assert pid is not None and pid not in killed
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            poll(lambda: processor_pid(port) not in (None, *killed), timeout_s=120)
        load.join(timeout_s=150)
        poll(
            lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").json()["spool_bytes"] == 0,
            timeout_s=120,
        )
        health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
        assert proc.poll() is None, "the receiver died"
    finally:
        proc.terminate()
        proc.wait(30)
    assert health["spool_processor"]["restarts"] >= 2
    assert load.failed_batches == 0, "the receiver refused batches while the processor was down"
    assert load.acked_spans == workers * batches * per_batch
    assert_exactly_once(db_url, load.acked)
