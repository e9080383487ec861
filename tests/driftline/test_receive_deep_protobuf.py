"""Both OTLP receivers on protobuf that upb refuses as a whole (attack report on issue 35, item
6): a value nested past upb's depth limit (100: each array level uses two) loses only its own
span; a malformed gRPC message is INVALID_ARGUMENT, and only after the key is checked. Real
uvicorn and gRPC servers, both sinks (spool, store), real SQLite."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from collector.auth import create_key
from collector.store import engine as store_engine
from tests.collector.test_otlp_http import pb_request
from tests.conftest import LiveCollector, make_settings
from tests.support import free_port, wait_for

PB = {"content-type": "application/x-protobuf"}
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
Response = trace_service_pb2.ExportTraceServiceResponse


def deep_value(levels: int) -> AnyValue:
    """A string inside ``levels`` nested arrays."""
    value = AnyValue(string_value="x")
    for _ in range(levels):
        outer = AnyValue()
        outer.array_value.values.add().CopyFrom(value)
        value = outer
    return value


def with_deep_span(n: int, levels: int, trace_byte: int) -> bytes:
    """``pb_request(n)`` whose last span carries one attribute nested ``levels`` arrays deep."""
    req = trace_service_pb2.ExportTraceServiceRequest.FromString(
        pb_request(n, trace_byte=trace_byte)
    )
    kv = req.resource_spans[0].scope_spans[0].spans[n - 1].attributes.add()
    kv.key = "deep"
    kv.value.CopyFrom(deep_value(levels))
    return req.SerializeToString()


def grpc_raw(endpoint: str, body: bytes, key: str | None = None) -> Response:
    """One trace Export of raw bytes (not necessarily a valid message)."""
    meta = () if key is None else (("authorization", f"Bearer {key}"),)
    with grpc.insecure_channel(endpoint) as channel:
        export = channel.unary_unary(
            EXPORT, request_serializer=None, response_deserializer=Response.FromString
        )
        resp: Response = export(body, metadata=meta, timeout=30)
        return resp


@pytest.fixture(params=["spool", "store"])
def collector(
    request: pytest.FixtureRequest, sqlite_url: str, tmp_path: Path
) -> Iterator[LiveCollector]:
    settings = make_settings(
        sqlite_url,
        http_port=free_port(),
        grpc_port=0,
        spool_enabled=request.param == "spool",
        spool_dir=tmp_path / "spool",
        spool_processor="thread",
    )
    lc = LiveCollector(settings).start()
    try:
        yield lc
    finally:
        lc.stop()


def test_a_span_past_upbs_depth_loses_only_itself_over_http_and_grpc(
    collector: LiveCollector,
) -> None:
    """60 array levels: the span cannot be parsed even alone; 3 + 3 others are stored and the
    reject is reported in partialSuccess. Before: HTTP 400 and gRPC INTERNAL, nothing stored."""
    r = httpx.post(f"{collector.http_url}/v1/traces", content=with_deep_span(4, 60, 1), headers=PB)
    assert r.status_code == 200, r.text
    http_resp = Response.FromString(r.content)
    grpc_resp = grpc_raw(collector.grpc_endpoint, with_deep_span(4, 60, 2))
    for resp in (http_resp, grpc_resp):
        assert resp.partial_success.rejected_spans == 1
        assert "spans[3]" in resp.partial_success.error_message
        assert "MaxDepth" in resp.partial_success.error_message
    assert wait_for(lambda: len(collector.calls()) == 6, timeout_s=30)


def test_a_span_upb_parses_alone_is_kept_with_its_siblings(collector: LiveCollector) -> None:
    """48 array levels: the request is refused whole by upb but each span parses alone; all are
    stored, nothing rejected. Before: HTTP 400 and gRPC INTERNAL."""
    r = httpx.post(f"{collector.http_url}/v1/traces", content=with_deep_span(2, 48, 1), headers=PB)
    assert r.status_code == 200, r.text
    assert not Response.FromString(r.content).HasField("partial_success")
    assert not grpc_raw(collector.grpc_endpoint, with_deep_span(2, 48, 2)).HasField(
        "partial_success"
    )
    assert wait_for(lambda: len(collector.calls()) == 4, timeout_s=30)


def test_malformed_grpc_bytes_are_invalid_argument(collector: LiveCollector) -> None:
    """Before: INTERNAL ("Exception deserializing request!")."""
    for body in (b"\xff\xff\xff", b"\x0a\x05ab", b"\x0a\x02\x12\x05abc"):
        with pytest.raises(grpc.RpcError) as err:
            grpc_raw(collector.grpc_endpoint, body)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, body
        assert "not a valid OTLP protobuf message" in (err.value.details() or "")


@pytest.fixture(scope="module")
def keyed(
    tmp_path_factory: pytest.TempPathFactory, _sqlite_template: Path
) -> Iterator[tuple[LiveCollector, str]]:
    folder = tmp_path_factory.mktemp("grpckeys")
    shutil.copyfile(_sqlite_template, folder / "driftline.db")
    url = f"sqlite:///{folder}/driftline.db"
    settings = make_settings(
        url, dev=False, http_port=free_port(), auto_migrate=False, scheduler_enabled=False
    )
    engine = store_engine.make_engine(url)
    key = create_key(engine, "acme", "ingest")
    engine.dispose()
    lc = LiveCollector(settings).start()
    try:
        yield lc, key
    finally:
        lc.stop()


@pytest.mark.parametrize("key", [None, "dl_not_a_key"])
def test_the_key_is_checked_before_the_message_is_parsed(
    keyed: tuple[LiveCollector, str], key: str | None
) -> None:
    """Malformed bytes with no or a bad key: UNAUTHENTICATED (before: INTERNAL, parsed first)."""
    lc, _good = keyed
    with pytest.raises(grpc.RpcError) as err:
        grpc_raw(lc.grpc_endpoint, b"\xff\xff\xff", key)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_with_a_good_key_malformed_bytes_are_invalid_argument_and_valid_ones_stored(
    keyed: tuple[LiveCollector, str],
) -> None:
    lc, key = keyed
    with pytest.raises(grpc.RpcError) as err:
        grpc_raw(lc.grpc_endpoint, b"\xff\xff\xff", key)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    resp = grpc_raw(lc.grpc_endpoint, pb_request(2, bad=1, trace_byte=7), key)
    assert resp.partial_success.rejected_spans == 1


def test_grpc_logs_malformed_is_invalid_argument_and_a_deep_record_rejected_alone(
    collector: LiveCollector,
) -> None:
    """Before: INTERNAL for both (the generated servicer parsed the whole message first)."""
    method = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
    answer = logs_service_pb2.ExportLogsServiceResponse
    req = logs_service_pb2.ExportLogsServiceRequest()
    records = req.resource_logs.add().scope_logs.add().log_records
    for levels in (0, 60):
        rec = records.add(event_name="other.event", time_unix_nano=1_714_000_000 * 10**9)
        rec.attributes.add(key="deep").value.CopyFrom(deep_value(levels))
    with grpc.insecure_channel(collector.grpc_endpoint) as channel:
        export = channel.unary_unary(
            method, request_serializer=None, response_deserializer=answer.FromString
        )
        with pytest.raises(grpc.RpcError) as err:
            export(b"\xff\xff\xff", timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        resp = export(req.SerializeToString(), timeout=30)
    assert resp.partial_success.rejected_log_records == 1
    assert "logRecords[1]" in resp.partial_success.error_message
