"""The redaction CPU budget of a whole record (attack report on issue 35, item 2): all spans of
one spooled record or direct request share ``DRIFTLINE_REDACTION_CPU_S_PER_RECORD``, so one
tenant's adversarial request cannot hold the spool processor (and every tenant behind it) for
tens of seconds; text past the budget is replaced by the marker, never stored in clear."""

from __future__ import annotations

import json
import time

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from collector.ingest import decode as codec
from collector.ingest.prepare import Item, prepare, prepare_by_tenant
from collector.ingest.redaction_budget import DEFAULT_CPU_S, DEFAULT_RECORD_CPU_S
from collector.settings import Settings
from collector.spool.log import TRACES_PROTOBUF
from collector.spool.prepared import Prepared, expand, prepare_traces, prepare_traces_compact
from collector.store.schema import SpanData

#: the report's adversarial prompt and completion: 125,000 characters, a phone candidate each 3
DENSE = "12 " * 41666
MARKER = "[not stored by driftline: redaction CPU budget exceeded"
#: what prepare may spend besides redaction (decode-free: extract, JSON) plus one clock gap
SLACK_S = 1.0


def encode_chat_request(prompts: list[str]) -> bytes:
    """An OTLP/protobuf request of one chat span per prompt (prompt and completion both
    ``prompt``), exported by the OTel SDK."""
    mem = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    for i, prompt in enumerate(prompts):
        with tracer.start_as_current_span("chat gpt-4o", kind=trace.SpanKind.CLIENT) as s:
            s.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o",
                    "tenant.index": i,
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": prompt}]}]
                    ),
                }
            )
    return bytes(encode_spans(mem.get_finished_spans()).SerializeToString())


def chat_spans(prompts: list[str]) -> list[SpanData]:
    """:func:`encode_chat_request`'s spans decoded by the collector."""
    return codec.decode(encode_chat_request(prompts), codec.PROTOBUF).spans


def _in_clear(stored: str) -> bool:
    return "12 12 12" in stored


def test_a_record_of_40_adversarial_spans_takes_at_most_its_budget() -> None:
    spans = chat_spans([DENSE] * 40)
    t0 = time.thread_time()
    items, errors = prepare(spans, 1_000_000, "redacted")
    spent = time.thread_time() - t0
    assert not errors and len(items) == 40
    assert spent <= DEFAULT_RECORD_CPU_S + DEFAULT_CPU_S + SLACK_S, spent
    dropped = 0
    for item in items:
        attrs = json.dumps(item.span.attributes)
        if MARKER in item.span.attributes["gen_ai.output.messages"]:
            dropped += 1
            assert not _in_clear(attrs)
            assert item.extract is not None
            assert not _in_clear(item.extract.input_text or "")
            assert not _in_clear(item.extract.output_text or "")
    # ~0.5 CPU s a span: a 2 s budget redacts a handful, the rest is dropped whole
    assert dropped >= 30


def test_the_budget_is_per_record_not_per_process() -> None:
    spent = chat_spans([DENSE] * 3)
    prepare(spent, 1_000_000, "redacted", redaction_cpu_s_per_record=1e-9)
    (item,), _ = prepare(chat_spans(["mail jane@example.com"]), 1_000_000, "redacted")
    assert "[EMAIL]" in item.span.attributes["gen_ai.input.messages"]


def test_every_text_after_the_budget_is_spent_is_dropped_even_short_ones() -> None:
    items, errors = prepare(
        chat_spans([DENSE, "mail jane@example.com", "call bob@example.org"]),
        1_000_000,
        "redacted",
        redaction_cpu_s_per_record=1e-9,
    )
    assert not errors
    for item in items:
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            assert item.span.attributes[key].startswith(MARKER)
    assert "jane" not in json.dumps([i.span.attributes for i in items])


def test_a_gateway_request_shares_one_budget_across_its_tenants() -> None:
    spans = chat_spans([DENSE] * 8)
    t0 = time.thread_time()
    items, errors = prepare_by_tenant(
        spans,
        1_000_000,
        tenant="a",
        tenant_of=lambda s: "a" if int(s.attributes["tenant.index"]) % 2 else "b",
        capture_mode_of=lambda _t: "redacted",
        redaction_cpu_s_per_record=0.3,
    )
    spent = time.thread_time() - t0
    assert not errors and len(items) == 8
    assert spent <= 0.3 + DEFAULT_CPU_S + SLACK_S, spent
    dropped = [i for i in items if MARKER in i.span.attributes["gen_ai.input.messages"]]
    assert len(dropped) >= 6


def _items(prepared: Prepared) -> list[Item]:
    (one,) = prepared
    assert not isinstance(one, str), one
    items, errors = one
    assert not errors
    return items


def test_the_spool_path_passes_the_setting_down() -> None:
    body = encode_chat_request([DENSE, "mail jane@example.com"])
    jobs = [(TRACES_PROTOBUF, 0, body, "redacted")]
    for prepared in (
        prepare_traces(jobs, 10**6, 1e-9),
        expand(prepare_traces_compact(jobs, 10**6, 1e-9)),
    ):
        assert all(MARKER in i.span.attributes["gen_ai.input.messages"] for i in _items(prepared))
    items = _items(prepare_traces(jobs, 10**6))
    assert "[EMAIL]" in items[1].span.attributes["gen_ai.input.messages"]


def test_a_budget_that_is_not_positive_fails_at_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for bad in ("0", "-1.0", "nan"):
        monkeypatch.setenv("DRIFTLINE_REDACTION_CPU_S_PER_RECORD", bad)
        with pytest.raises(ValidationError, match="redaction_cpu_s_per_record"):
            Settings()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="total_cpu_s"):
        prepare([], 10, redaction_cpu_s_per_record=0)
