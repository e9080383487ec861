"""Helpers of the reliability suite: a collector in its own process, span batches made with
the real OpenTelemetry SDK, exporter load that records which batches were acknowledged, and
the exactly-once check against the store."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import httpx
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text

from collector.store import engine as store_engine
from tests.conftest import wait_for

Key = tuple[str, str]


def start_collector(
    db_url: str, port: int, env_extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``python -m driftline.cli collector --dev`` on ``db_url`` (plus ``env_extra``
    settings, e.g. the spool) and wait for /healthz.

    Raises:
        AssertionError: the process exited, or was not healthy within 60 s.
    """
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": db_url, **(env_extra or {})}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "driftline.cli",
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

    wait_for(up, timeout_s=180)  # start-up imports take ~45 s on a busy shared 2-core machine
    return proc


def sdk_batches(n_batches: int, spans_per_batch: int, service: str) -> list[list[ReadableSpan]]:
    """``n_batches`` lists of finished gen_ai client spans made by the real SDK tracer.

    Each span is one chat call (tokens, model, response id) with its own trace id.
    """
    mem = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("driftline.reliability")
    for i in range(n_batches * spans_per_batch):
        with tracer.start_as_current_span(
            "chat gpt-4o", kind=trace.SpanKind.CLIENT, context=None
        ) as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.response.id": f"{service}-{i}",
                    "gen_ai.usage.input_tokens": 100 + i % 7,
                    "gen_ai.usage.output_tokens": 10 + i % 5,
                }
            )
    provider.shutdown()
    spans = list(mem.get_finished_spans())
    return [spans[i : i + spans_per_batch] for i in range(0, len(spans), spans_per_batch)]


def span_key(span: ReadableSpan) -> Key:
    """(trace_id, span_id) of an SDK span as the store writes them (lowercase hex)."""
    ctx = span.get_span_context()
    assert ctx is not None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


@dataclass
class ExportLoad:
    """Threads that each export their batches in order with their own ``OTLPSpanExporter``
    (``timeout_s`` per batch, retries included; ``interval_s`` of sleep between batches) and
    record every batch the exporter reported as SUCCESS."""

    endpoint: str
    batches_per_worker: list[list[list[ReadableSpan]]]
    timeout_s: float
    interval_s: float = 0.0
    acked: list[Key] = field(default_factory=list)
    failed_batches: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def acked_spans(self) -> int:
        with self.lock:
            return len(self.acked)

    def _worker(self, batches: Sequence[Sequence[ReadableSpan]]) -> None:
        exporter = OTLPSpanExporter(endpoint=self.endpoint, timeout=self.timeout_s)
        try:
            for batch in batches:
                result = exporter.export(batch)
                with self.lock:
                    if result is SpanExportResult.SUCCESS:
                        self.acked.extend(span_key(s) for s in batch)
                    else:
                        self.failed_batches += 1
                time.sleep(self.interval_s)
        finally:
            exporter.shutdown()

    def start(self) -> ExportLoad:
        for batches in self.batches_per_worker:
            t = threading.Thread(target=self._worker, args=(batches,), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def join(self, timeout_s: float) -> None:
        """Wait for every worker; AssertionError when one is still running after the wait."""
        for t in self.threads:
            t.join(timeout_s)
            assert not t.is_alive(), "an exporter thread is still running"


def stored_counts(db_url: str, table: str, keys: Iterable[Key]) -> dict[Key, int]:
    """Rows per (trace_id, span_id) of ``table`` (``spans`` or ``llm_calls``) for ``keys``;
    a key with no row is absent."""
    wanted = set(keys)
    eng = store_engine.make_engine(db_url)
    try:
        with eng.connect() as conn:
            rows = conn.execute(
                text(f"SELECT trace_id, span_id, COUNT(*) FROM {table} GROUP BY trace_id, span_id")
            ).all()
    finally:
        eng.dispose()
    return {(t, s): n for t, s, n in rows if (t, s) in wanted}


def assert_exactly_once(db_url: str, acked: Sequence[Key]) -> None:
    """Every acknowledged span has exactly one ``spans`` row and one ``llm_calls`` row."""
    assert acked, "no batch was acknowledged"
    assert len(set(acked)) == len(acked), "the test sent a span twice"
    for table in ("spans", "llm_calls"):
        counts = stored_counts(db_url, table, acked)
        missing = [k for k in acked if k not in counts]
        doubled = {k: n for k, n in counts.items() if n != 1}
        assert not missing, f"{len(missing)} acknowledged spans missing from {table}: {missing[:3]}"
        assert not doubled, f"{table} rows stored more than once: {list(doubled.items())[:3]}"


def poll(predicate: Callable[[], bool], timeout_s: float) -> None:
    """:func:`tests.conftest.wait_for` for a boolean predicate, polling every 50 ms."""
    wait_for(predicate, timeout_s=timeout_s, interval_s=0.05)
