"""The receive room: both receivers hand requests to the one sink the app chose at start-up, and
answer alike whichever sink it is (a real uvicorn server and a real gRPC server, real stores)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.collector.test_otlp_http import pb_request
from tests.conftest import LiveCollector, make_settings
from tests.support import free_port, wait_for

PB = {"content-type": "application/x-protobuf"}


@pytest.fixture(params=["spool", "store"])
def collector(
    request: pytest.FixtureRequest, sqlite_url: str, tmp_path: Path
) -> Iterator[LiveCollector]:
    spool = request.param == "spool"
    settings = make_settings(
        sqlite_url,
        http_port=free_port(),
        grpc_port=0,
        spool_enabled=spool,
        spool_dir=tmp_path / "spool",
        spool_processor="thread",
    )
    lc = LiveCollector(settings).start()
    try:
        yield lc
    finally:
        lc.stop()


def _grpc_export(lc: LiveCollector, body: bytes) -> trace_service_pb2.ExportTraceServiceResponse:
    req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    with grpc.insecure_channel(lc.grpc_endpoint) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        resp: trace_service_pb2.ExportTraceServiceResponse = stub.Export(req, timeout=30)
        return resp


def test_http_and_grpc_answer_alike_and_store_through_the_one_sink(
    collector: LiveCollector,
) -> None:
    state = collector.app.state.driftline
    assert state.sink.name == ("spool" if collector.settings.spool_enabled else "store")
    r = httpx.post(
        f"{collector.http_url}/v1/traces", content=pb_request(3, bad=1, trace_byte=1), headers=PB
    )
    assert r.status_code == 200, r.text
    http_resp = trace_service_pb2.ExportTraceServiceResponse.FromString(r.content)
    grpc_resp = _grpc_export(collector, pb_request(3, bad=1, trace_byte=2))
    assert http_resp.partial_success.rejected_spans == 1
    assert grpc_resp.partial_success == http_resp.partial_success
    assert wait_for(lambda: len(collector.calls()) == 6, timeout_s=30)


def test_a_request_of_invalid_spans_only_adds_nothing_to_the_spool(
    collector: LiveCollector,
) -> None:
    """Neither receiver lets spans that will never be stored take spool space."""
    spool = collector.app.state.driftline.spool
    if spool is None:
        pytest.skip("the spool is off")
    before = spool.unprocessed_bytes
    r = httpx.post(f"{collector.http_url}/v1/traces", content=pb_request(0, bad=2), headers=PB)
    assert r.status_code == 200
    resp = trace_service_pb2.ExportTraceServiceResponse.FromString(r.content)
    assert resp.partial_success.rejected_spans == 2
    assert _grpc_export(collector, pb_request(0, bad=2)).partial_success.rejected_spans == 2
    assert spool.unprocessed_bytes == before
