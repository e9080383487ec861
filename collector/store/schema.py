"""The one column schema: the decoded span record and the column order of ``spans`` and
``llm_calls``.

Ingest (decode, normalise, write) and the store's readers (queries, analytics, bulk SQL) take the
column lists from here, derived from the SQLAlchemy models, so no module spells them out again.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from collector.store.models import LLMCall, Span

#: ``spans`` columns in table order (the bulk writers' row tuples follow it).
SPAN_COLUMNS: tuple[str, ...] = tuple(c.name for c in Span.__table__.columns)
#: ``spans`` columns the REST API returns for a span (no tenant, links or receive time)
SPAN_API_COLUMNS: tuple[str, ...] = tuple(
    c for c in SPAN_COLUMNS if c not in ("tenant", "links", "scope_version", "received_unix_nano")
)
#: the lighter span shape of trace trees (no resource attributes or events)
SPAN_TREE_COLUMNS: tuple[str, ...] = tuple(
    c for c in SPAN_API_COLUMNS if c not in ("resource_attributes", "events")
)
#: ``llm_calls`` columns in table order; the fields of ``CallRecord`` are the same set.
CALL_COLUMNS: tuple[str, ...] = tuple(c.name for c in LLMCall.__table__.columns)


@dataclass(frozen=True, slots=True)
class CallFacts:
    """The facts of one LLM call that a span states and the stored record keeps as read: the
    one field list of :class:`collector.ingest.normalize.Extract` (what a span says) and
    :class:`collector.ingest.normalize.CallRecord` (one ``llm_calls`` row), which both
    subclass it, so a new per-call fact is declared once here (and as an ``llm_calls`` column).

    Units: token counts, seconds (``*_s``), unix nanoseconds (``*_unix_nano``); None is
    unknown, never 0. The subclasses add only what differs: ``Extract`` the span's role,
    reported cost and its immutable ``finish_reasons`` / ``flags``; ``CallRecord`` the derived
    columns (tenant, call id, model, TPOT, cost, the row's list-valued columns). No field has
    a default, so a subclass's own fields follow in declaration order and ``Extract(*fields)``
    (the spool's compact form, :mod:`collector.spool.prepared`) keeps working.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    engine_span_id: str | None
    dialect: str
    service_name: str | None
    operation: str | None
    provider: str | None
    request_model: str | None
    response_model: str | None
    response_id: str | None
    server_request_id: str | None
    rollout: str | None
    variant: str | None
    user_id: str | None
    session_id: str | None
    start_unix_nano: int | None
    end_unix_nano: int | None
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    cache_write_input_tokens: int | None
    reasoning_output_tokens: int | None
    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None
    inference_s: float | None
    ttft_s: float | None
    e2e_s: float | None
    itl_p50_s: float | None
    itl_p95_s: float | None
    itl_max_s: float | None
    status: str
    error_type: str | None
    input_text: str | None
    output_text: str | None
    #: PII redactions applied to the captured content (None: not scanned)
    redactions: int | None
    #: the engine's own TTFT / e2e (seconds) when a caller's span merged with its engine span
    server_ttft_s: float | None
    server_e2e_s: float | None
    #: seconds the gateway held the request before an engine slot (``driftline.gateway.queue_s``)
    gateway_queue_s: float | None


#: the names of :class:`CallFacts`' fields, in declaration order
CALL_FACTS: tuple[str, ...] = tuple(f.name for f in fields(CallFacts))


@dataclass(frozen=True, slots=True)
class SpanData:
    """One decoded span. Ids are lowercase hex; times are unix nanoseconds (0 = unset)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_unix_nano: int
    end_unix_nano: int
    status_code: int
    status_message: str | None
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    links: list[dict[str, Any]]
    resource_attributes: dict[str, Any]
    scope_name: str | None
    scope_version: str | None

    @property
    def service_name(self) -> str | None:
        value = self.resource_attributes.get("service.name")
        return str(value) if value is not None else None
