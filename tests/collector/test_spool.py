"""The durable spool: append/fsync/read/commit, torn tails, bounds, replay, retention; and the
collector with the spool on (acknowledged on fsync, processed into the store)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc
import psutil
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from sqlalchemy import text

from collector.cost.prices import PriceTable
from collector.errors import ConfigError
from collector.ingest.writer import BatchWriter
from collector.settings import load_settings
from collector.spool.log import (
    TRACES_JSON,
    TRACES_PROTOBUF,
    Spool,
    SpoolFullError,
    read_offset,
    segments_of,
)
from collector.spool.processor import SpoolProcessor, process
from collector.spool.reader import SpoolLockedError, SpoolReader, acquire_processor_lock
from collector.spool.replay import replay
from collector.spool.worker import IdleIo, run_processor, set_io_class
from collector.store import engine as store_engine
from driftline.app import create_app
from driftline.commands import spool as spool_cli
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import PRICE_FIXTURE, LiveCollector, free_port, make_settings, wait_for


def test_append_read_commit_and_reopen(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=100)
    ends = [sp.append(TRACES_PROTOBUF, "t1", bytes([i]) * 60, 1000 + i).result(5) for i in range(5)]
    assert len(sp.segments()) >= 3  # rolled past segment_bytes
    recs = sp.read(0)
    assert [r.body for r in recs][:1] == [bytes([0]) * 60]
    got = []
    offset = 0
    while recs := sp.read(offset, 1):
        got.extend(recs)
        offset = recs[-1].end
    assert [r.end for r in got] == ends and [r.received_unix_nano for r in got][-1] == 1004
    assert {r.tenant for r in got} == {"t1"}
    sp.commit(ends[1])
    sp.close()
    again = Spool(tmp_path, segment_bytes=100)
    assert again.committed == ends[1]
    assert [r.end for r in again.read(again.committed, 10_000)][:1] == [ends[2]]
    assert [r.received_unix_nano for r in again.replay(1003)] == [1003, 1004]
    again.close()


def test_torn_tail_is_cut_and_appends_continue(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    end = sp.append(TRACES_JSON, "t", b"{}", 1).result(5)
    sp.close()
    (_base, path), *_ = segments_of(tmp_path)[-1:]
    with open(path, "ab") as f:  # a crash mid-append: half a record
        f.write(b"\x00\x00\x01\x00garbage")
    sp = Spool(tmp_path)
    assert os.path.getsize(path) == end and sp.durable_end == end
    end2 = sp.append(TRACES_JSON, "t", b"[]", 2).result(5)
    assert [r.body for r in sp.read(0)] == [b"{}", b"[]"] and end2 > end
    sp.close()


def test_reader_in_another_process_follows_the_appender_and_commits_for_it(
    tmp_path: Path,
) -> None:
    """A SpoolReader (the processor process's view) sees complete records only, a record
    still being written ends its read, and its commit frees the appender's bound."""
    sp = Spool(tmp_path, max_bytes=400, external_commits=True)
    reader = SpoolReader(tmp_path)
    ends = [sp.append(TRACES_PROTOBUF, "t", b"z" * 100, i).result(5) for i in range(3)]
    assert reader.wait(0, 5) and [r.end for r in reader.read(0)] == ends
    (_base, path) = segments_of(tmp_path)[-1]
    with open(path, "ab") as f:  # the receiver mid-write: a header and half a body
        f.write(b"\x00\x00\x01\x00\x00\x00\x00\x00half")
    assert [r.end for r in reader.read(0)] == ends
    with pytest.raises(SpoolFullError):
        sp.append(TRACES_PROTOBUF, "t", b"z" * 200, 9)
    assert reader.lag_seconds() > 0
    reader.commit(ends[-1])
    assert sp.sync_committed(0.0) == ends[-1] and sp.lag_seconds() == 0.0
    reader.close()
    sp.close()


def test_a_short_read_takes_the_head_record_only(tmp_path: Path) -> None:
    """``read(offset, 1)`` (the head record, e.g. for the lag) reads one record, not the
    backlog behind it, whichever side reads; the lag is the head record's age."""
    sp = Spool(tmp_path, external_commits=True)
    now = time.time_ns()
    ends = [
        sp.append(TRACES_PROTOBUF, "t", bytes([i]) * 5000, now - (9 - i) * 10**9).result(5)
        for i in range(4)
    ]
    reader = SpoolReader(tmp_path)
    for side in (sp, reader):
        assert [r.end for r in side.read(0, 1)] == ends[:1]
        assert [r.end for r in side.read(ends[0], 1)] == ends[1:2]
        assert [r.end for r in side.read(0, ends[1])] == ends[:2]
        assert 8.5 < side.lag_seconds() < 60
    (_base, path) = segments_of(tmp_path)[-1]
    with open(path, "ab") as f:  # a record still being written: its header, half its body
        f.write(b"\x00\x00\x20\x00\x00\x00\x00\x00half")
    assert reader.read(ends[-1], 1) == []
    reader.close()
    sp.close()


def test_one_appender_and_one_processor_per_directory(tmp_path: Path) -> None:
    """A second collector on the same spool fails at start-up naming the variable; a second
    processor (``driftline spool process``) refuses, naming the holder."""
    sp = Spool(tmp_path)
    with pytest.raises(ConfigError, match="DRIFTLINE_SPOOL_DIR"):
        Spool(tmp_path)
    fd = acquire_processor_lock(tmp_path, wait=False)
    assert fd is not None
    with pytest.raises(SpoolLockedError, match=f"pid {os.getpid()}"):
        acquire_processor_lock(tmp_path, wait=False)
    result = CliRunner().invoke(spool_cli, ["process", "--spool-dir", str(tmp_path), "--no-wait"])
    assert result.exit_code == 1 and "consumed by another processor" in result.output
    os.close(fd)
    again = acquire_processor_lock(tmp_path, wait=False)
    assert again is not None
    os.close(again)
    sp.close()


def test_concurrent_appends_are_acknowledged_only_once_fsynced(tmp_path: Path) -> None:
    """Appends from many threads (group commit): every acknowledgement comes after an fsync
    that covers its record (durable_end past it), across segment rolls, and every
    acknowledged record reads back intact, once, in offset order."""
    sp = Spool(tmp_path, segment_bytes=20_000)
    acked: list[tuple[int, int]] = []  # (record end, durable end when acknowledged)
    lock = threading.Lock()

    def on_done(fut: Future[int]) -> None:
        with lock:
            acked.append((fut.result(), sp.durable_end))

    def client(k: int) -> None:
        for i in range(40):
            body = f"{k}:{i}:".encode() + b"x" * 900
            sp.append(TRACES_PROTOBUF, "t", body, k * 1000 + i).add_done_callback(on_done)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wait_for(lambda: len(acked) == 320, 30)
    assert all(end <= durable for end, durable in acked)
    assert len(sp.segments()) > 2  # rolled between groups
    got, offset = [], 0
    while recs := sp.read(offset):
        got.extend(recs)
        offset = recs[-1].end
    assert sorted(end for end, _ in acked) == [r.end for r in got]
    assert {r.received_unix_nano for r in got} == {
        k * 1000 + i for k in range(8) for i in range(40)
    }
    assert all(r.body.split(b":")[0] == str(r.received_unix_nano // 1000).encode() for r in got)
    sp.close()


def test_failed_fsync_fails_its_records_and_later_appends_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync error (the disk, injected at the OS call) answers the records it covered with
    SpoolFullError (503, retry) and never acknowledges them; the next append is acknowledged."""
    sp = Spool(tmp_path)
    real_fsync = os.fsync
    calls = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(SpoolFullError) as err:
        sp.append(TRACES_JSON, "t", b"{}", 1).result(5)
    assert err.value.retry_after_s == 5 and sp.durable_end == 0
    end = sp.append(TRACES_JSON, "t", b"[]", 2).result(5)
    assert sp.durable_end == end
    sp.close()


def test_full_spool_refuses_until_processed(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=200)
    end = sp.append(TRACES_PROTOBUF, "t", b"x" * 150, 1).result(5)
    with pytest.raises(SpoolFullError) as err:
        sp.append(TRACES_PROTOBUF, "t", b"x" * 150, 2)
    assert err.value.retry_after_s == 1
    sp.commit(end)
    sp.append(TRACES_PROTOBUF, "t", b"x" * 150, 3).result(5)
    sp.close()


def test_prune_keeps_unprocessed_and_recent_segments(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=10)
    ends = [sp.append(TRACES_PROTOBUF, "t", b"y" * 20, i).result(5) for i in range(4)]
    sp.commit(ends[1])
    assert sp.prune(keep_s=3600) == 0  # processed but recent
    old = time.time() - 7200
    for _b, p in sp.segments():
        os.utime(p, (old, old))
    assert sp.prune(keep_s=3600) == 2  # the two processed segments only
    assert [r.end for r in sp.read(sp.committed)][:1] == [ends[2]]
    sp.close()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_collector_with_spool_acks_then_processes(tmp_path: Path, mode: str) -> None:
    """Process mode: the processor is a child process of lower priority; bytes, lag and
    spans/s reach the collector's /healthz and /metrics through the spool's files, the KPIs
    through its exposition file."""
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "sp",
        spool_processor=mode,
    )
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/traces", content=pb_request(5, bad=1), headers=PB)
        assert r.status_code == 200
        calls = wait_for(lambda: len(client.get("/api/v1/calls").json()["items"]) == 5, 120)
        assert calls
        wait_for(lambda: client.get("/healthz").json()["spool_bytes"] == 0)
        health = client.get("/healthz").json()
        assert health["spool_lag_s"] == 0.0
        assert health["spool_processor"]["mode"] == mode
        if mode == "process":
            pid = health["spool_processor"]["pid"]
            assert pid not in (None, os.getpid())
            # the processor yields the CPU to the receiver (acknowledgements wait on it)
            mine = os.getpriority(os.PRIO_PROCESS, 0)
            expected = min(mine + settings.spool_processor_nice, 19)
            assert settings.spool_processor_nice > 0
            assert os.getpriority(os.PRIO_PROCESS, pid) == expected
            # and its disk I/O queues behind the receiver's spool fsync (Linux I/O classes);
            # the prepare worker it started inherits both
            assert settings.spool_processor_io_class == "idle"
            processor = psutil.Process(pid)
            assert processor.ionice().ioclass == psutil.IOPRIO_CLASS_IDLE
            assert psutil.Process().ionice().ioclass != psutil.IOPRIO_CLASS_IDLE
            workers = processor.children()
            assert workers
            for child in workers:
                assert child.ionice().ioclass == psutil.IOPRIO_CLASS_IDLE, child.cmdline()
                assert os.getpriority(os.PRIO_PROCESS, child.pid) == expected
        wait_for(lambda: 'driftline_tokens_total{direction="input"' in client.get("/metrics").text)
        metrics = client.get("/metrics").text
        assert "driftline_spool_bytes 0.0" in metrics
        # from the processor's status file (process mode), polled by the supervisor
        wait_for(lambda: "spool_spans_processed_total 5.0" in client.get("/metrics").text)
        # the same request again: upserted, not duplicated
        assert client.post("/v1/traces", content=pb_request(5), headers=PB).status_code == 200
        wait_for(lambda: client.get("/healthz").json()["spool_bytes"] == 0)
        assert len(client.get("/api/v1/calls").json()["items"]) == 5


def test_external_processor_drains_a_collectors_spool(tmp_path: Path) -> None:
    """``DRIFTLINE_SPOOL_PROCESSOR=external``: the collector runs no processor; the one of
    ``driftline spool process`` (:func:`run_processor`, here on a thread) drains the spool and
    the collector reports its progress from the status file."""
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "sp",
        spool_processor="external",
    )
    stop = threading.Event()
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/traces", content=pb_request(4), headers=PB).status_code == 200
        time.sleep(0.3)
        assert client.get("/healthz").json()["spool_bytes"] > 0  # nobody processes yet
        worker = threading.Thread(
            target=run_processor, args=(settings, [settings.spool_dir], stop.is_set)
        )
        worker.start()
        try:
            wait_for(lambda: len(client.get("/api/v1/calls").json()["items"]) == 4)
            wait_for(lambda: client.get("/healthz").json()["spool_bytes"] == 0)
            wait_for(lambda: "spool_spans_processed_total 4.0" in client.get("/metrics").text)
            info = client.get("/healthz").json()["spool_processor"]
            assert info["mode"] == "external" and info["pid"] == os.getpid()
        finally:
            stop.set()
            worker.join(30)


@pytest.mark.parametrize(("batch_bytes", "transactions"), [(None, 1), (64 << 10, 3)])
def test_the_processor_writes_batches_of_spool_batch_bytes(
    tmp_path: Path, batch_bytes: int | None, transactions: int
) -> None:
    """``DRIFTLINE_SPOOL_BATCH_BYTES`` sizes the processor's store transactions (every span of
    one transaction carries its receive time): 24 records of ~8 KB are one transaction at the
    default 4 MiB, at least three at 64 KiB; a value under 64 KiB fails naming the variable."""
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        spool_dir=tmp_path / "sp",
        **({} if batch_bytes is None else {"spool_batch_bytes": batch_bytes}),
    )
    store_engine.upgrade(settings.database_url)
    sp = Spool(settings.spool_dir)
    end = 0
    for tb in range(1, 25):
        end = sp.append(TRACES_PROTOBUF, "t", pb_request(50, trace_byte=tb), time.time_ns()).result(
            5
        )
    sp.close()
    stop = threading.Event()
    worker = threading.Thread(
        target=run_processor, args=(settings, [settings.spool_dir], stop.is_set)
    )
    worker.start()
    try:
        wait_for(lambda: read_offset(settings.spool_dir) == end, timeout_s=60)
    finally:
        stop.set()
        worker.join(30)
    engine = store_engine.make_engine(settings.database_url)
    with engine.connect() as conn:
        n, distinct = conn.execute(
            text("SELECT count(*), count(DISTINCT received_unix_nano) FROM spans")
        ).one()
    engine.dispose()
    assert n == 24 * 50
    assert distinct == 1 if transactions == 1 else distinct >= transactions
    with pytest.raises(ConfigError, match="DRIFTLINE_SPOOL_BATCH_BYTES"):
        load_settings(database_url=settings.database_url, spool_batch_bytes=1000)


def test_full_spool_answers_503_with_retry_after(tmp_path: Path) -> None:
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "sp",
        spool_max_bytes=100,
    )
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/traces", content=pb_request(20), headers=PB)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"


def test_processor_crash_before_offset_commit_duplicates_nothing_and_replay_is_idempotent(
    tmp_path: Path,
) -> None:
    """The processor writes a batch and dies before recording its offset: the next processor
    writes it again (upsert), and ``driftline spool replay`` re-derives the same rows."""
    db = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(db)
    engine = store_engine.make_engine(db)
    prices = PriceTable.load(PRICE_FIXTURE)
    sp = Spool(tmp_path / "sp")
    for tb in (1, 2):
        sp.append(TRACES_PROTOBUF, "t", pb_request(3, trace_byte=tb), time.time_ns()).result(5)
    writer = BatchWriter(engine, prices)
    writer.start()
    futures, spans = process(
        sp.read(0), writer=writer, joiner=None, capture_mode=lambda _t: "full", max_text_chars=100
    )
    assert spans == 6 and all(f.result(10) for f in futures)
    assert sp.committed == 0  # "crashed" before sp.commit
    proc = SpoolProcessor(sp, writer, joiner=None, capture_mode=lambda _t: "full")
    proc.start()
    wait_for(lambda: sp.unprocessed_bytes == 0)
    proc.close()
    writer.close()
    sp.close()
    count = "SELECT count(*), count(DISTINCT trace_id || span_id) FROM llm_calls"
    with engine.connect() as conn:
        assert tuple(conn.execute(text(count)).one()) == (6, 6)
    assert replay(tmp_path / "sp", engine, prices, 0) == (2, 6)
    with engine.connect() as conn:
        assert tuple(conn.execute(text(count)).one()) == (6, 6)
    engine.dispose()


def test_grpc_with_spool_acks_processes_and_refuses_when_full(tmp_path: Path) -> None:
    """gRPC: accepted spans reach the store; a full spool answers RESOURCE_EXHAUSTED with a
    ``google.rpc.RetryInfo`` in ``grpc-status-details-bin`` (OTLP: retryable only then)."""
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        http_port=free_port(),
        spool_enabled=True,
        spool_dir=tmp_path / "sp",
        spool_max_bytes=4000,
    )
    lc = LiveCollector(settings).start()
    try:
        with grpc.insecure_channel(lc.grpc_endpoint) as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            req = ExportTraceServiceRequest.FromString(pb_request(3, bad=1))
            resp = stub.Export(req, timeout=30)
            assert resp.partial_success.rejected_spans == 1
            wait_for(lambda: len(lc.calls()) == 3)
            big = ExportTraceServiceRequest.FromString(pb_request(60, trace_byte=9))
            with pytest.raises(grpc.RpcError) as err:
                stub.Export(big, timeout=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        details = dict(err.value.trailing_metadata() or ())["grpc-status-details-bin"]
        status = status_pb2.Status.FromString(details)
        info = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(info) and info.retry_delay.seconds == 1
    finally:
        lc.stop()


def spawned_children() -> set[str]:
    """Pids of this process's multiprocessing spawn children (not the resource tracker)."""
    out = set()
    for t in Path(f"/proc/{os.getpid()}/task").iterdir():
        for c in (t / "children").read_text().split():
            try:
                if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes():
                    out.add(c)
            except OSError:  # exited meanwhile
                pass
    return out


@pytest.mark.parametrize("workers", [0, 1], ids=["inline", "prepare-worker"])
def test_processor_batches_pipelined_and_prepared_in_a_worker_store_the_same_rows(
    tmp_path: Path, workers: int
) -> None:
    """Batches written one transaction per tenant while the next is prepared (here, or in a
    prepare worker process) store every span and call of every tenant exactly once, a record
    that cannot be decoded is skipped, and the worker process ends with the processor."""
    db = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(db)
    engine = store_engine.make_engine(db)
    sp = Spool(tmp_path / "sp")
    for tb in range(1, 13):
        tenant = "a" if tb % 3 else "b"
        sp.append(TRACES_PROTOBUF, tenant, pb_request(5, trace_byte=tb), time.time_ns()).result(5)
        if tb == 6:
            sp.append(TRACES_PROTOBUF, "a", b"\xff not protobuf", time.time_ns()).result(5)
    writer = BatchWriter(engine, PriceTable.load(PRICE_FIXTURE))
    writer.start()
    proc = SpoolProcessor(
        sp,
        writer,
        joiner=None,
        capture_mode=lambda _t: "full",
        batch_bytes=2_000,  # a few records per batch: several batches in the pipeline
        prepare_workers=workers,
    )
    before = spawned_children()
    proc.start()
    wait_for(lambda: sp.unprocessed_bytes == 0, timeout_s=60)
    kids = spawned_children() - before  # the prepare worker
    assert len(kids) == workers
    proc.close()
    writer.close()
    sp.close()
    assert proc.spans_processed == 60
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT tenant, count(*), count(DISTINCT trace_id || span_id) FROM llm_calls "
                "GROUP BY tenant ORDER BY tenant"
            )
        ).all()
        spans = conn.execute(text("SELECT count(*) FROM spans")).scalar_one()
    engine.dispose()
    assert [tuple(r) for r in rows] == [("a", 40, 40), ("b", 20, 20)]
    assert spans == 60
    for pid in kids:  # the prepare worker (if any) exited with the processor
        wait_for(
            lambda pid=pid: (
                not Path(f"/proc/{pid}").exists()
                or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
            )
        )


def test_a_refused_record_in_a_batch_loses_only_its_own_spans(tmp_path: Path) -> None:
    """The records of a batch are written as one job; when the store refuses it, each record
    is written on its own again: only the refused record's spans are skipped (as when every
    record was a job) and the offset moves on."""
    db = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(db)
    engine = store_engine.make_engine(db)
    sp = Spool(tmp_path / "sp")
    for tb in (1, 2, 3, 4):
        sp.append(TRACES_PROTOBUF, "t", pb_request(4, trace_byte=tb), time.time_ns()).result(5)
    bad = f"{3:02x}" * 16

    def refuse_trace_3(conn: Any, _tenant: str, items: list[Any]) -> list[Any]:
        if any(it.span.trace_id == bad for it in items):  # a NOT NULL violation: IntegrityError
            conn.exec_driver_sql("INSERT INTO spans (tenant) VALUES (NULL)")
        return items

    writer = BatchWriter(engine, PriceTable.load(PRICE_FIXTURE))
    writer.before_write.append(refuse_trace_3)
    writer.start()
    proc = SpoolProcessor(sp, writer, joiner=None, capture_mode=lambda _t: "full")
    proc.start()
    wait_for(lambda: sp.unprocessed_bytes == 0, timeout_s=30)
    proc.close()
    writer.close()
    sp.close()
    with engine.connect() as conn:
        traces = conn.execute(
            text("SELECT trace_id, count(*) FROM spans GROUP BY trace_id ORDER BY trace_id")
        ).all()
    engine.dispose()
    assert [(t[:2], n) for t, n in traces] == [("01", 4), ("02", 4), ("04", 4)]


def test_an_idle_io_processor_competes_for_the_disk_once_the_spool_fills() -> None:
    """:class:`IdleIo`: idle I/O class below half the spool's bound, best-effort from half
    full, idle again under a quarter; every thread of the process, including one started
    before the change."""
    if not hasattr(psutil, "IOPRIO_CLASS_IDLE"):
        pytest.skip("no I/O scheduling classes on this platform")
    stop = threading.Event()
    early = threading.Thread(target=stop.wait)
    early.start()
    late = threading.Thread(target=stop.wait)  # started below: inherits its creator's class

    def classes() -> set[int]:
        """The I/O class of each thread of this process still running when it is read: a
        thread listed by ``threads()`` may end before its class is read (the last test's
        threads, this test's own after ``stop``), and a thread that ended has no class."""
        found: set[int] = set()
        for t in psutil.Process().threads():
            with contextlib.suppress(psutil.NoSuchProcess):
                found.add(psutil.Process(t.id).ionice().ioclass)
        return found

    try:
        io = IdleIo(max_bytes=1000)
        assert io.idle and classes() == {psutil.IOPRIO_CLASS_IDLE}
        late.start()
        for unprocessed, idle in [(499, True), (500, False), (300, False), (250, False)]:
            io.update(unprocessed)
            assert io.idle is idle, unprocessed
            expected = psutil.IOPRIO_CLASS_IDLE if idle else psutil.IOPRIO_CLASS_NONE
            assert classes() == {expected}, unprocessed
        io.update(249)
        assert io.idle and classes() == {psutil.IOPRIO_CLASS_IDLE}
        with pytest.raises(ValueError, match="max_bytes"):
            IdleIo(max_bytes=0)
    finally:
        set_io_class(False)
        stop.set()
        for thread in (early, late):
            if thread.is_alive():
                thread.join(10)
    assert classes() == {psutil.IOPRIO_CLASS_NONE}
