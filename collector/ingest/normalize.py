"""Normalisation of one span of any gen_ai dialect into the canonical LLM-call record.

Pure functions from :class:`~collector.ingest.decode.SpanData` to frozen dataclasses:

* :func:`extract` reads one span (``None`` when the span is not an LLM call);
* :func:`collector.ingest.merge.merge` joins a caller's span (gateway / SDK) with its vLLM
  ``llm_request`` child;
* :func:`finalize` derives TPOT, cost, model, call id and data-quality flags.

Key priorities follow the normalisation table of ``otel-genai-otlp-webhooks.md`` §3.5
(semconv v1.41 current → deprecated → OpenInference → OpenLLMetry → OpenLIT); a value present
under two names counts once. Unknown stays ``None``: never 0.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from collector.cost.calls import call_cost
from collector.cost.prices import PriceTable
from collector.ingest import content
from collector.ingest.dialects import (
    CACHE_READ_KEYS,
    CACHE_WRITE_KEYS,
    INPUT_TOKEN_KEYS,
    OUTPUT_TOKEN_KEYS,
    REASONING_KEYS,
    SESSION_KEYS,
    STATUS_NAMES,
    TTFT_KEYS,
    USER_KEYS,
    as_str,
    classify_operation,
    detect_dialect,
    detect_provider,
    detect_request_model,
    detect_response_id,
    detect_response_model,
    is_engine_span,
    ttft_from_events,
)
from collector.ingest.values import (
    finish_reasons,
    first,
    seconds,
    to_float,
    tokens,
)
from collector.store.schema import CALL_COLUMNS, CALL_FACTS, CallFacts, SpanData


@dataclass(frozen=True, slots=True)
class Extract(CallFacts):
    """What one span says about an LLM call, before derivation: the shared
    :class:`~collector.store.schema.CallFacts` plus the fields below. Durations in seconds."""

    role: str  # "client" or "engine"
    finish_reasons: tuple[str, ...] | None
    reported_cost_usd: float | None
    flags: frozenset[str]


@dataclass(frozen=True, slots=True)
class CallRecord(CallFacts):
    """One row of ``llm_calls`` (DESIGN.md, "The canonical LLM call record"): the shared
    :class:`~collector.store.schema.CallFacts` plus the derived columns below."""

    tenant: str
    call_id: str
    model: str | None
    tpot_s: float | None
    finish_reasons: list[str] | None
    finish_reason: str | None
    flags: list[str]
    cost_usd: float | None
    gpu_cost_usd: float | None


#: the record's fields are the ``llm_calls`` columns (the writers take them in table order)
assert sorted(f.name for f in fields(CallRecord)) == sorted(CALL_COLUMNS), "CallRecord != llm_calls"
_facts: Callable[[Extract], tuple[Any, ...]] = operator.attrgetter(*CALL_FACTS)


def _truncate(text: str | None, limit: int, flags: set[str]) -> str | None:
    if text is None or len(text) <= limit:
        return text
    flags.add("text_truncated")
    return f"{text[:limit]}…[truncated by driftline: original length {len(text)} chars]"


def _span_times(span: SpanData, flags: set[str]) -> tuple[int | None, int | None, float | None]:
    """``(start, end, e2e_s)``: unix ns (None when unset or, for the end, before the start)
    and seconds (``gen_ai.latency.e2e``, else the span's duration when end >= start > 0);
    adds ``invalid_timing`` to ``flags`` for an end before the start."""
    start = span.start_unix_nano or None
    end = span.end_unix_nano or None
    e2e = seconds(span.attributes.get("gen_ai.latency.e2e"), flags)
    if e2e is None:
        if start is None or end is None or end < start:
            if start is not None:
                flags.add("invalid_timing")
        else:
            e2e = (end - start) / 1e9
    if end is not None and start is not None and end < start:
        end = None
        flags.add("invalid_timing")
    return start, end, e2e


def _status(span: SpanData) -> tuple[str, str | None]:
    """``(status, error_type)``: the span status's name, and ``error.type`` or the first
    exception event's type (``"error"`` for an error status that names none)."""
    error_type = as_str(span.attributes.get("error.type"))
    if error_type is None:
        for ev in span.events:
            if ev.get("name") == "exception":
                error_type = as_str((ev.get("attributes") or {}).get("exception.type"))
                break
    status = STATUS_NAMES.get(span.status_code, "unset")
    if status == "error" and error_type is None:
        error_type = "error"
    return status, error_type


def extract(
    span: SpanData, *, max_text_chars: int = 1_000_000, redactions: int | None = None
) -> Extract | None:
    """Read the LLM-call facts of one span; None when the span is not an LLM call.

    ``redactions`` is carried into :attr:`Extract.redactions` (the count made by the capture
    policy before this span was read; None when its text was not scanned).

    Latency attributes equal to -1 are vLLM's "missing" sentinel (→ None); other negative or
    non-finite durations → None and the flag ``invalid_timing``. The span duration is used for
    ``e2e_s`` when no ``gen_ai.latency.e2e`` is present, and only if end >= start > 0.
    ``ttft_s`` comes from an attribute (:data:`~collector.ingest.dialects.TTFT_KEYS`) or, when
    none is present, from the first-token span event with the flag ``ttft_from_event``.
    """
    attrs = span.attributes
    engine = is_engine_span(span)
    operation, is_call = classify_operation(span, attrs)
    if not engine and not is_call:
        return None
    if engine and operation is None:
        operation = "chat"  # vLLM does not say; §3.5: span `llm_request` ⇒ chat
    flags: set[str] = set()

    start, end, e2e = _span_times(span, flags)
    out_text, msg_reasons = content.output_text_and_reasons(attrs, span.events)
    reasons = finish_reasons(
        first(
            attrs,
            ("gen_ai.response.finish_reasons", "llm.finish_reason", "llm.response.finish_reason"),
        )
    ) or finish_reasons(msg_reasons)

    status, error_type = _status(span)
    cost = to_float(first(attrs, ("gen_ai.usage.cost", "llm.cost.total")))
    ttft_raw = first(attrs, TTFT_KEYS)
    ttft = seconds(ttft_raw, flags) if ttft_raw is not None else ttft_from_events(span)
    if ttft_raw is None and ttft is not None:
        flags.add("ttft_from_event")
    return Extract(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        role="engine" if engine else "client",
        dialect=detect_dialect(span, attrs, engine),
        service_name=span.service_name,
        operation=operation,
        provider=detect_provider(attrs, engine),
        request_model=detect_request_model(span, attrs, operation),
        response_model=detect_response_model(attrs),
        response_id=detect_response_id(attrs),
        server_request_id=as_str(attrs.get("gen_ai.request.id")),
        rollout=as_str(attrs.get("driftline.rollout")),
        variant=as_str(attrs.get("driftline.variant")),
        user_id=as_str(first(attrs, USER_KEYS)),
        session_id=as_str(first(attrs, SESSION_KEYS)),
        start_unix_nano=start,
        end_unix_nano=end,
        input_tokens=tokens(attrs, INPUT_TOKEN_KEYS, flags),
        output_tokens=tokens(attrs, OUTPUT_TOKEN_KEYS, flags),
        cached_input_tokens=tokens(attrs, CACHE_READ_KEYS, flags),
        cache_write_input_tokens=tokens(attrs, CACHE_WRITE_KEYS, flags),
        reasoning_output_tokens=tokens(attrs, REASONING_KEYS, flags),
        queue_s=seconds(attrs.get("gen_ai.latency.time_in_queue"), flags),
        prefill_s=seconds(attrs.get("gen_ai.latency.time_in_model_prefill"), flags),
        decode_s=seconds(attrs.get("gen_ai.latency.time_in_model_decode"), flags),
        inference_s=seconds(attrs.get("gen_ai.latency.time_in_model_inference"), flags),
        ttft_s=ttft,
        e2e_s=e2e,
        itl_p50_s=seconds(attrs.get("driftline.itl.p50_s"), flags),
        itl_p95_s=seconds(attrs.get("driftline.itl.p95_s"), flags),
        itl_max_s=seconds(attrs.get("driftline.itl.max_s"), flags),
        finish_reasons=tuple(reasons) if reasons else None,
        status=status,
        error_type=error_type,
        input_text=_truncate(content.input_text(attrs, span.events), max_text_chars, flags),
        output_text=_truncate(out_text, max_text_chars, flags),
        reported_cost_usd=cost if cost is not None and cost >= 0 else None,
        flags=frozenset(flags),
        redactions=redactions,
        gateway_queue_s=seconds(attrs.get("driftline.gateway.queue_s"), flags),
        engine_span_id=None,
        server_ttft_s=None,
        server_e2e_s=None,
    )


def finalize(ex: Extract, *, tenant: str, prices: PriceTable) -> CallRecord:
    """Derive the stored record: TPOT, model, cost, call id, first finish reason, flags.

    ``tpot_s = (e2e_s - ttft_s) / (output_tokens - 1)`` (DESIGN.md; mean time per output token
    after the first), None when fewer than 2 output tokens or a term is unknown.
    Cost and its flags: :func:`collector.cost.calls.call_cost`.
    Server-side latencies: the engine's values after :func:`~collector.ingest.merge.merge`;
    for an engine span that stands alone (no caller span), its own TTFT / e2e are server-side.
    """
    flags = set(ex.flags)
    tpot = None
    known = ex.e2e_s is not None and ex.ttft_s is not None and ex.output_tokens is not None
    if known and ex.output_tokens is not None and ex.output_tokens >= 2:
        tpot = (ex.e2e_s - ex.ttft_s) / (ex.output_tokens - 1)  # type: ignore[operator]
        if tpot < 0 or not math.isfinite(tpot):
            tpot = None
            flags.add("invalid_timing")
    model, price = prices.lookup(ex.response_model, ex.request_model)
    cost, cost_flags = call_cost(
        price,
        operation=ex.operation,
        input_tokens=ex.input_tokens,
        output_tokens=ex.output_tokens,
        cached_input_tokens=ex.cached_input_tokens,
        cache_write_input_tokens=ex.cache_write_input_tokens,
        reasoning_output_tokens=ex.reasoning_output_tokens,
        reported_cost_usd=ex.reported_cost_usd,
    )
    flags |= cost_flags
    reasons = list(ex.finish_reasons) if ex.finish_reasons else None
    facts = dict(zip(CALL_FACTS, _facts(ex), strict=True))
    if ex.role == "engine":  # an engine span standing alone: its own latencies are server-side
        facts["server_ttft_s"], facts["server_e2e_s"] = ex.ttft_s, ex.e2e_s
    return CallRecord(
        **facts,
        tenant=tenant,
        call_id=ex.response_id or ex.server_request_id or f"{ex.trace_id}:{ex.span_id}",
        model=model,
        tpot_s=tpot,
        finish_reasons=reasons,
        finish_reason=reasons[0] if reasons else None,
        flags=sorted(flags),
        cost_usd=cost,
        gpu_cost_usd=None,
    )


def normalize_span(
    span: SpanData, *, tenant: str, prices: PriceTable, max_text_chars: int = 1_000_000
) -> CallRecord | None:
    """:func:`extract` then :func:`finalize` for a span that stands alone."""
    ex = extract(span, max_text_chars=max_text_chars)
    return None if ex is None else finalize(ex, tenant=tenant, prices=prices)
