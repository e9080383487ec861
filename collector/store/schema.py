"""The one column schema: the decoded span record and the column order of ``spans`` and
``llm_calls``.

Ingest (decode, normalise, write) and the store's readers (queries, analytics, bulk SQL) take the
column lists from here, derived from the SQLAlchemy models, so no module spells them out again.
"""

from __future__ import annotations

from dataclasses import dataclass
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
#: ``llm_calls`` columns in table order; equal to the fields of ``CallRecord``.
CALL_COLUMNS: tuple[str, ...] = tuple(c.name for c in LLMCall.__table__.columns)


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
