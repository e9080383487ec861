"""Issue 35, item 1: no spooled record stops the processor.

Each poison record is spooled by tenant ``a`` ahead of a valid span of tenant ``b``; the
processor must store what can be stored, reject or quarantine the rest, and reach the span of
``b``. On the code before the fix each of these stopped ingestion for good (the processor
retried the same offset every second).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest as LogsRequest,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from sqlalchemy import Engine, text

from collector.cost.prices import PriceTable
from collector.ingest.log_join import joined_writer
from collector.ingest.values import EVALUATION_TEXT_LIMITS
from collector.ingest.writer import BatchWriter
from collector.spool.log import LOGS_PROTOBUF, TRACES_PROTOBUF, Spool
from collector.spool.processor import SpoolProcessor
from collector.store import engine as store_engine
from collector.store.models.scores import ExternalScore
from driftline.app import create_app
from tests.collector.test_otlp_http import PB, pb_request
from tests.collector.test_otlp_logs import logs_request, record
from tests.conftest import PRICE_FIXTURE, make_settings, wait_for

EVAL = "gen_ai.evaluation.result"
#: trace byte of tenant b's span: its trace id is "0b0b...", span id 1
B_TRACE = f"{0x0B:02x}" * 16


@dataclass
class Rig:
    """A spool, its processor (thread mode) and the store, as the collector wires them."""

    spool: Spool
    engine: Engine
    writer: BatchWriter
    processor: SpoolProcessor

    def append_logs(self, tenant: str, *records: LogRecord) -> int:
        return self.spool.append(
            LOGS_PROTOBUF, tenant, logs_request(*records), time.time_ns()
        ).result(5)

    def append_span_of_b(self) -> int:
        body = pb_request(1, trace_byte=0x0B)
        return self.spool.append(TRACES_PROTOBUF, "b", body, time.time_ns()).result(5)

    def drained(self, timeout_s: float = 20.0) -> None:
        """Wait until the processor committed everything spooled (AssertionError if not)."""
        wait_for(lambda: self.spool.unprocessed_bytes == 0, timeout_s=timeout_s)

    def rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]

    def b_span_stored(self) -> bool:
        return bool(
            self.rows("SELECT 1 FROM spans WHERE tenant = 'b' AND trace_id = :t", t=B_TRACE)
        )


@pytest.fixture
def rig(db_url: str, tmp_path: Path) -> Iterator[Rig]:
    engine = store_engine.make_engine(db_url)
    writer, joiner = joined_writer(engine, PriceTable.load(PRICE_FIXTURE), make_settings(db_url))
    writer.start()
    spool = Spool(tmp_path / "spool")
    proc = SpoolProcessor(spool, writer, joiner=joiner, capture_mode=lambda _t: "full")
    proc.start()
    try:
        yield Rig(spool, engine, writer, proc)
    finally:
        proc.close(10)
        writer.close(10)
        spool.close()
        engine.dispose()


def _eval(
    name: str = "relevance", *, at: int | None = None, attrs: dict[str, Any] | None = None
) -> LogRecord:
    rec = record(EVAL, span=None, attrs={"gen_ai.evaluation.name": name, **(attrs or {})})
    if at is not None:
        rec.time_unix_nano = at
    return rec


def test_an_evaluation_only_export_is_stored_and_the_next_tenant_goes_on(rig: Rig) -> None:
    """An OTel GenAI evaluator's export: evaluation records, no content record (the joiner
    ran an INSERT with no rows: ``DEFAULT VALUES``, NOT NULL failed, retried for ever)."""
    rig.append_logs("a", _eval(attrs={"gen_ai.evaluation.score.value": 0.75}))
    rig.append_span_of_b()
    rig.drained()
    assert rig.b_span_stored()
    assert rig.rows("SELECT tenant, name, value FROM external_scores") == [("a", "relevance", 0.75)]


def test_an_evaluation_time_past_int64_is_rejected_alone(rig: Rig) -> None:
    """A record time >= 2**63 (OTLP's fixed64) raised a raw OverflowError in the joiner: the
    record is rejected with its reason, the valid one beside it is stored."""
    rig.append_logs(
        "a", _eval("late", at=2**63), _eval("ok", at=2**63 - 1), _eval("max", at=2**64 - 1)
    )
    rig.append_span_of_b()
    rig.drained()
    assert rig.b_span_stored()
    assert rig.rows("SELECT name FROM external_scores") == [("ok",)]


def test_non_finite_scores_are_stored_as_unknown(rig: Rig) -> None:
    rig.append_logs(
        "a",
        _eval("nan", attrs={"gen_ai.evaluation.score.value": float("nan")}),
        _eval("inf", attrs={"gen_ai.evaluation.score.value": float("inf")}),
    )
    rig.append_span_of_b()
    rig.drained()
    assert rig.b_span_stored()
    assert sorted(rig.rows("SELECT name, value FROM external_scores")) == [
        ("inf", None),
        ("nan", None),
    ]


def test_nul_characters_and_over_long_names_do_not_stop_the_store(rig: Rig) -> None:
    """PostgreSQL refuses U+0000 in text and jsonb, and a score name over its 128 characters:
    NUL is stored as U+FFFD (as spans' text is); an over-long name, label or response id
    rejects that evaluation only (on every store, so SQLite and PostgreSQL keep the same)."""
    rig.append_logs(
        "a",
        _eval(
            "nul\x00name",
            attrs={"gen_ai.evaluation.explanation": "why\x00not", "x.attr": "v\x00"},
        ),
        _eval("n" * 129),
        _eval("label", attrs={"gen_ai.evaluation.score.label": "l" * 129}),
        _eval("n" * 128),
        record("gen_ai.user.message", span=7, body={"content": "hi\x00there"}),
    )
    rig.append_span_of_b()
    rig.drained()
    assert rig.b_span_stored()
    names = sorted(r[0] for r in rig.rows("SELECT name FROM external_scores"))
    nul = "\x00" if rig.engine.dialect.name == "sqlite" else "\ufffd"
    assert names == ["n" * 128, f"nul{nul}name"]
    (event,) = rig.rows("SELECT event FROM gen_ai_log_events WHERE tenant = 'a'")
    assert "hi" in str(event)


def test_the_evaluation_limits_are_the_score_columns() -> None:
    cols = ExternalScore.__table__.c
    lengths = {f: getattr(cols[c].type, "length", None) for f, c in _SCORE_COLUMNS.items()}
    assert lengths == EVALUATION_TEXT_LIMITS


_SCORE_COLUMNS = {"name": "name", "score_label": "label", "response_id": "response_id"}


def test_the_receivers_reject_unstorable_log_records_in_partial_success(tmp_path: Path) -> None:
    """Rejected on receipt, so that the client is told (``partialSuccess``) even when the
    spool acknowledges before the processor sees the records."""
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "spool",
        spool_processor="thread",
    )
    body = logs_request(
        _eval("late", at=2**63),
        _eval("n" * 129),
        record("gen_ai.user.message", span=3, body={"content": "x"}, at=0),
        _eval("ok"),
    )
    late = logs_request(record("gen_ai.user.message", span=4, body={"content": "y"}))
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/logs", content=body, headers=PB)
        assert r.status_code == 200
        resp = ExportLogsServiceResponse.FromString(r.content)
        assert resp.partial_success.rejected_log_records == 2
        assert "past 2262" in resp.partial_success.error_message
        assert "name is longer than 128 characters" in resp.partial_success.error_message
        bad_time = LogsRequest.FromString(late)
        bad_time.resource_logs[0].scope_logs[0].log_records[0].time_unix_nano = 2**64 - 1
        r = c.post("/v1/logs", content=bad_time.SerializeToString(), headers=PB)
        assert (
            ExportLogsServiceResponse.FromString(r.content).partial_success.rejected_log_records
            == 1
        )


def test_an_over_long_call_field_does_not_lose_the_request(rig: Rig) -> None:
    """A ``user.id`` of 300 characters (``llm_calls.user_id`` is varchar(256)): PostgreSQL
    refused the whole COPY, and with it the request's other spans; it is cut to 256 there."""
    req = ExportTraceServiceRequest.FromString(pb_request(2, trace_byte=0x0C))
    kv = req.resource_spans[0].scope_spans[0].spans[0].attributes.add()
    kv.key, kv.value.string_value = "user.id", "u" * 300
    rig.spool.append(TRACES_PROTOBUF, "a", req.SerializeToString(), time.time_ns()).result(5)
    rig.append_span_of_b()
    rig.drained()
    assert rig.b_span_stored()
    (user,) = rig.rows("SELECT user_id FROM llm_calls WHERE user_id IS NOT NULL")
    assert user[0] == "u" * (300 if rig.engine.dialect.name == "sqlite" else 256)
    assert len(rig.rows("SELECT 1 FROM spans WHERE tenant = 'a'")) == 2
