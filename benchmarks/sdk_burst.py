"""SDK burst: what an OpenTelemetry SDK with its DEFAULT BatchSpanProcessor delivers in a burst.

The SDK's queue is bounded (2,048 spans, batches of 512, one export at a time): while an export
waits for its answer, new spans beyond the queue are dropped in the application. So the
collector's acknowledgement latency decides how much of a burst survives. One run sends the
same burst of gen_ai spans (default 20,000) from a fresh TracerProvider to

* a null sink: an HTTP server that parses each OTLP request and answers at once (the best any
  collector can do on this machine), and
* driftline (``driftline collector --dev``, its own process, SQLite, spool on unless
  ``--no-spool``), counting the spans durably stored.

    python benchmarks/sdk_burst.py [--spans 20000] [--no-spool]

Prints ``RESULT sdk_burst_null_sink_spans``, ``RESULT sdk_burst_stored_spans`` and
``RESULT sdk_burst_stored_vs_null_sink=<ratio>``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ingest import stored_spans, wait_healthy


class NullSink(BaseHTTPRequestHandler):
    """Parses the OTLP request, counts its spans, answers 200 at once."""

    spans = 0
    lock = threading.Lock()

    def log_message(self, *_args: object) -> None:
        pass

    def do_POST(self) -> None:
        req = ExportTraceServiceRequest.FromString(
            self.rfile.read(int(self.headers["content-length"]))
        )
        n = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
        with NullSink.lock:
            NullSink.spans += n
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def burst(endpoint: str, n: int) -> float:
    """Emit ``n`` gen_ai chat spans as fast as possible through a default BatchSpanProcessor,
    then shut the provider down (flushing what is queued); returns the emission seconds."""
    provider = TracerProvider(resource=Resource.create({"service.name": "burst"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("sdk-burst")
    t0 = time.perf_counter()
    for i in range(n):
        with tracer.start_as_current_span("chat gpt-4o-mini") as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                    "gen_ai.response.id": f"chatcmpl-{i}",
                    "gen_ai.usage.input_tokens": 120 + i % 50,
                    "gen_ai.usage.output_tokens": 30 + i % 20,
                    "gen_ai.response.finish_reasons": ["stop"],
                }
            )
    emitted = time.perf_counter() - t0
    provider.shutdown()
    return emitted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--spans", type=int, default=20_000)
    ap.add_argument("--port", type=int, default=14328)
    ap.add_argument("--no-spool", dest="spool", action="store_false")
    args = ap.parse_args()

    sink = ThreadingHTTPServer(("127.0.0.1", 0), NullSink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    secs = burst(f"http://127.0.0.1:{sink.server_address[1]}/v1/traces", args.spans)
    sink.shutdown()
    null_n = NullSink.spans
    print(f"null sink: {null_n} of {args.spans} spans received (burst emitted in {secs:.2f} s)")

    tmp = tempfile.mkdtemp(prefix="driftline-burst-")
    db_url = f"sqlite:///{tmp}/burst.db"
    url = f"http://127.0.0.1:{args.port}"
    env = {
        **os.environ,
        "DRIFTLINE_DATABASE_URL": db_url,
        "DRIFTLINE_SPOOL_ENABLED": "true" if args.spool else "false",
        "DRIFTLINE_SPOOL_DIR": f"{tmp}/spool",
    }
    cmd = [sys.executable, "-m", "driftline.cli", "collector", "--dev", "--port", str(args.port)]
    proc = subprocess.Popen([*cmd, "--grpc-port", "0", "--log-level", "warning"], env=env)
    try:
        wait_healthy(url, proc)
        secs = burst(f"{url}/v1/traces", args.spans)
        while args.spool and httpx.get(f"{url}/healthz").json().get("spool_bytes", 0) > 0:
            time.sleep(0.2)
        stored = stored_spans(db_url)
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"driftline: {stored} of {args.spans} spans stored (burst emitted in {secs:.2f} s)")
    print(f"RESULT sdk_burst_null_sink_spans={null_n} spans")
    print(f"RESULT sdk_burst_stored_spans={stored} spans")
    print(f"RESULT sdk_burst_stored_vs_null_sink={stored / max(null_n, 1):.3f} ratio")


if __name__ == "__main__":
    main()
