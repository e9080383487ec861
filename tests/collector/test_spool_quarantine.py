"""Issue 35, item 1: a record that fails for its data is narrowed down, quarantined with its
reason, counted and reported, and the processor goes on; ``driftline spool quarantine
list | show | replay`` after a fix. A store outage is retried, never quarantined, and shows as
a stall on ``/healthz``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import text

from collector.cost.prices import PriceTable
from collector.ingest.log_join import joined_writer
from collector.spool.log import LOGS_PROTOBUF, TRACES_PROTOBUF, Spool
from collector.spool.processor import SpoolProcessor
from collector.spool.quarantine import Quarantine
from collector.store import engine as store_engine
from driftline.app import create_app
from driftline.commands import spool as spool_cli
from tests.collector.test_otlp_http import pb_request
from tests.collector.test_otlp_logs import logs_request, record
from tests.conftest import PRICE_FIXTURE, make_settings, wait_for
from tests.reliability.test_store_outage import connections_refused

GARBAGE = b"\xff\x01 not a protobuf message \x00\xfe"


def _trace(byte: int) -> str:
    return f"{byte:02x}" * 16


def test_a_refused_record_is_narrowed_down_quarantined_and_replayed_after_a_fix(
    tmp_path: Path,
) -> None:
    """Six records in one batch: tenant a's traces 1-4 (the store refuses trace 3: a NOT NULL
    violation, IntegrityError), a record that cannot be decoded, a log record, and tenant b's
    span. Only the two bad records are set aside, the rest is stored in one go; the replay
    after the fix (a writer without the fault) stores trace 3 and keeps the undecodable one."""
    db = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(db)
    engine = store_engine.make_engine(db)
    writer, joiner = joined_writer(engine, PriceTable.load(PRICE_FIXTURE), make_settings(db))

    def refuse_trace_3(conn: Any, _tenant: str, items: list[Any]) -> list[Any]:
        if any(it.span.trace_id == _trace(3) for it in items):
            conn.exec_driver_sql("INSERT INTO spans (tenant) VALUES (NULL)")
        return items

    writer.before_write.append(refuse_trace_3)
    writer.start()
    sp = Spool(tmp_path / "sp")
    now = time.time_ns()
    ends = [
        sp.append(TRACES_PROTOBUF, "a", pb_request(2, trace_byte=b), now).result(5)
        for b in (1, 2, 3, 4)
    ]
    ends.append(sp.append(TRACES_PROTOBUF, "a", GARBAGE, now).result(5))
    sp.append(
        LOGS_PROTOBUF, "a", logs_request(record("gen_ai.user.message", body={"content": "hi"})), now
    ).result(5)
    sp.append(TRACES_PROTOBUF, "b", pb_request(1, trace_byte=0x0B), now).result(5)
    proc = SpoolProcessor(sp, writer, joiner=joiner, capture_mode=lambda _t: "full")
    reasons: list[str] = []
    proc.on_quarantined = reasons.append
    proc.start()
    try:
        wait_for(lambda: sp.unprocessed_bytes == 0, timeout_s=30)
        assert proc.problems(stall_s=60, window_s=60) == [
            "2 spool records quarantined in the last 60 s (driftline spool quarantine list)"
        ]
    finally:
        proc.close(10)
        writer.close(10)
        sp.close()
    with engine.connect() as conn:
        traces = conn.execute(text("SELECT tenant, trace_id FROM spans ORDER BY 1, 2")).all()
    assert [(t, tr[:2]) for t, tr in traces] == [("a", "01")] * 2 + [("a", "02")] * 2 + [
        ("a", "04")
    ] * 2 + [("b", "0b")]
    assert sorted(reasons) == ["decode", "integrity"] and proc.quarantined == 2
    entries = Quarantine(tmp_path / "sp").entries()
    assert [(e.id, e.tenant, e.kind, e.reason) for e in entries] == [
        (f"{ends[2]:020d}", "a", "traces/protobuf", "integrity"),
        (f"{ends[4]:020d}", "a", "traces/protobuf", "decode"),
    ]
    assert entries[0].offset == ends[1] and "NOT NULL" in entries[0].error

    runner = CliRunner()
    listed = runner.invoke(spool_cli, ["quarantine", "list", "--spool-dir", str(tmp_path / "sp")])
    assert listed.exit_code == 0 and "2 records in quarantine" in listed.output
    shown = runner.invoke(
        spool_cli, ["quarantine", "show", entries[0].id, "--spool-dir", str(tmp_path / "sp")]
    )
    assert shown.exit_code == 0 and json.loads(shown.output)["reason"] == "integrity"
    missing = runner.invoke(
        spool_cli, ["quarantine", "show", "42", "--spool-dir", str(tmp_path / "sp")]
    )
    assert missing.exit_code == 1 and "no quarantined record '42'" in missing.output
    (tmp_path / "secret.json").write_text(json.dumps({"id": "x"}))
    for rid in ("../../secret", "/etc/passwd", "１２"):  # a path, never read; non-ASCII digits
        outside = runner.invoke(
            spool_cli, ["quarantine", "show", rid, "--spool-dir", str(tmp_path / "sp")]
        )
        assert outside.exit_code == 1 and "an id is the record's digits" in outside.output
    replayed = runner.invoke(
        spool_cli,
        ["quarantine", "replay", "--spool-dir", str(tmp_path / "sp"), "--database-url", db],
        env={"DRIFTLINE_PRICES": str(PRICE_FIXTURE)},
    )
    assert replayed.exit_code == 1, replayed.output
    assert "1 records stored and removed, 1 left in quarantine" in replayed.output
    assert [e.reason for e in Quarantine(tmp_path / "sp").entries()] == ["decode"]
    with engine.connect() as conn:
        n3 = conn.execute(
            text(f"SELECT count(*) FROM spans WHERE trace_id = '{_trace(3)}'")
        ).scalar()
    assert n3 == 2
    engine.dispose()


def _seed_garbage(spool_dir: Path) -> None:
    """A spooled record that cannot be decoded (a corrupt disk, a receiver of another
    version): there before the collector starts."""
    sp = Spool(spool_dir)
    sp.append(TRACES_PROTOBUF, "dev", GARBAGE, time.time_ns()).result(5)
    sp.close()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_quarantined_records_are_counted_on_metrics_and_degrade_healthz(
    tmp_path: Path, sqlite_url: str, mode: str
) -> None:
    _seed_garbage(tmp_path / "spool")
    settings = make_settings(
        sqlite_url,
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "spool",
        spool_processor=mode,
    )
    with TestClient(create_app(settings)) as c:

        def quarantined() -> bool:
            body = c.get("/metrics").text
            return 'driftline_spool_quarantined_records_total{reason="decode"} 1.0' in body

        wait_for(quarantined, timeout_s=60)
        health = c.get("/healthz")
        assert health.status_code == 200
        assert health.json()["status"] == "degraded"
        assert "1 spool records quarantined" in health.json()["problems"][0]
        r = c.post(
            "/v1/traces", content=pb_request(1), headers={"Content-Type": "application/x-protobuf"}
        )
        assert r.status_code == 200
        wait_for(lambda: c.get("/api/v1/calls").json()["items"], timeout_s=30)


@pytest.mark.postgres
def test_a_store_outage_is_retried_not_quarantined_and_healthz_says_stalled(
    tmp_path: Path, pg_url: str
) -> None:
    settings = make_settings(
        pg_url,
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "spool",
        spool_processor="thread",
        spool_stall_s=1.0,
    )
    with TestClient(create_app(settings)) as c:
        with connections_refused(pg_url):
            r = c.post(
                "/v1/traces",
                content=pb_request(2),
                headers={"Content-Type": "application/x-protobuf"},
            )
            assert r.status_code == 200  # fsynced to the spool

            def stalled() -> bool:
                problems = c.get("/healthz").json().get("problems", [])
                return any("has not advanced" in p for p in problems)

            wait_for(stalled, timeout_s=30)
        wait_for(lambda: len(c.get("/api/v1/calls").json()["items"]) == 2, timeout_s=30)
        health = c.get("/healthz").json()
        assert health["status"] == "ok" and "problems" not in health
    assert Quarantine(tmp_path / "spool").entries() == []


def test_a_failing_offset_commit_does_not_end_the_processor(tmp_path: Path) -> None:
    """The offset file cannot be written (here: ``offset.tmp`` is a directory; a full disk
    does the same): the processor retries instead of its thread dying with processing stopped
    for good (before the fix the exception ended the thread)."""
    db = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(db)
    engine = store_engine.make_engine(db)
    writer, joiner = joined_writer(engine, PriceTable.load(PRICE_FIXTURE), make_settings(db))
    writer.start()
    sp = Spool(tmp_path / "sp")
    (tmp_path / "sp" / "offset.tmp").mkdir()
    sp.append(TRACES_PROTOBUF, "a", pb_request(2), time.time_ns()).result(5)
    proc = SpoolProcessor(sp, writer, joiner=joiner, capture_mode=lambda _t: "full")
    proc.start()
    try:
        time.sleep(2.5)
        assert proc.is_alive() and sp.unprocessed_bytes > 0
        (tmp_path / "sp" / "offset.tmp").rmdir()
        wait_for(lambda: sp.unprocessed_bytes == 0, timeout_s=10)
    finally:
        proc.close(10)
        writer.close(10)
        sp.close()
        engine.dispose()
