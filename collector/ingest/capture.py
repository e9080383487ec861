"""Content capture policy applied before storage: ``none`` | ``redacted`` | ``full`` per tenant.

Prompt/answer attributes of every dialect (and content events) are dropped (``none``) or
passed through :func:`collector.ingest.redaction.redact` (``redacted``) before the span, its raw
attributes and the call record are stored, so no copy of the original text is kept.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError

from collector.errors import StoreUnavailableError
from collector.ingest.redaction import redact_count
from collector.store.models import Tenant
from collector.store.schema import SpanData

MODES = ("none", "redacted", "full")
CONTENT_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.prompt",
        "gen_ai.completion",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.retrieval.query.text",
        "gen_ai.retrieval.documents",
        "input.value",
        "output.value",
        "traceloop.entity.input",
        "traceloop.entity.output",
        "llm.invocation_parameters",
    }
)
CONTENT_PREFIXES = (
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.prompts",
    "llm.choices",
    "retrieval.documents.",
)
CONTENT_EVENTS = frozenset(
    {
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.tools.message",
        "gen_ai.choice",
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
        "gen_ai.client.inference.operation.details",
    }
)
CACHE_TTL_S = 30.0


def is_content_key(key: str) -> bool:
    return key in CONTENT_KEYS or key.startswith(CONTENT_PREFIXES)


#: the content keys of an attribute-key shape (keys in order): an instrumentation sends the
#: same keys span after span, so :func:`is_content_key` runs once per shape
_CONTENT_KEYS_BY_SHAPE: dict[tuple[str, ...], tuple[str, ...]] = {}
#: shapes remembered at most (flattened ``prefix.{i}.field`` keys make a shape per length)
MAX_CACHED_SHAPES = 1024


def content_keys(attrs: dict[str, Any]) -> tuple[str, ...]:
    """The keys of ``attrs`` that hold content (:func:`is_content_key`), in order."""
    shape = tuple(attrs)
    keys = _CONTENT_KEYS_BY_SHAPE.get(shape)
    if keys is None:
        keys = tuple(k for k in shape if is_content_key(k))
        if len(_CONTENT_KEYS_BY_SHAPE) < MAX_CACHED_SHAPES:
            _CONTENT_KEYS_BY_SHAPE[shape] = keys
    return keys


def _redact_value(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        if not value:
            return value, 0
        return redact_count(value)
    if isinstance(value, list):
        out, n = [], 0
        for v in value:
            rv, c = _redact_value(v)
            out.append(rv)
            n += c
        return out, n
    if isinstance(value, dict):
        outd, n = {}, 0
        for k, v in value.items():
            rv, c = _redact_value(v)
            outd[k] = rv
            n += c
        return outd, n
    return value, 0


def _apply(attrs: dict[str, Any], mode: str, everything: bool) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    count = 0
    for key, value in attrs.items():
        if everything or is_content_key(key):
            if mode == "none":
                continue
            value, n = _redact_value(value)
            count += n
        out[key] = value
    return out, count


def apply_policy(span: SpanData, mode: str) -> tuple[SpanData, int | None]:
    """The span as it may be stored under ``mode``, and the number of redactions made
    (None when nothing was scanned: ``full`` or ``none``)."""
    if mode == "full":
        return span, None
    attrs = span.attributes
    keys = content_keys(attrs)
    content_events = False
    for e in span.events:
        if e.get("name") in CONTENT_EVENTS:
            content_events = True
            break
    if not keys and not content_events:
        return span, (0 if mode == "redacted" else None)
    count = 0
    # only the content keys are visited (a span has a dozen other attributes)
    if mode == "none":
        drop = set(keys)
        stored = {k: v for k, v in attrs.items() if k not in drop}
    else:
        stored = dict(attrs)
        for key in keys:
            stored[key], n = _redact_value(attrs[key])
            count += n
    events = span.events
    if content_events:
        events = []
        for e in span.events:
            if e.get("name") in CONTENT_EVENTS:
                ev_attrs, n = _apply(e.get("attributes") or {}, mode, everything=True)
                count += n
                events.append({**e, "attributes": ev_attrs})
            else:
                events.append(e)
    else:
        events = list(events)
    out = SpanData(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        name=span.name,
        kind=span.kind,
        start_unix_nano=span.start_unix_nano,
        end_unix_nano=span.end_unix_nano,
        status_code=span.status_code,
        status_message=span.status_message,
        attributes=stored,
        events=events,
        links=span.links,
        resource_attributes=span.resource_attributes,
        scope_name=span.scope_name,
        scope_version=span.scope_version,
    )
    return out, (count if mode == "redacted" else None)


class CapturePolicies:
    """Per-tenant ``capture_content`` from the ``tenants`` table, cached a few seconds."""

    def __init__(self, engine: Engine, default: str = "redacted") -> None:
        if default not in MODES:
            raise ValueError(f"default must be one of {MODES}")
        self._engine = engine
        self._default = default
        self._cache: dict[str, str] = {}
        self._loaded = 0.0
        self._lock = threading.Lock()

    def mode(self, tenant: str) -> str:
        now = time.monotonic()
        if now - self._loaded > CACHE_TTL_S:
            try:
                with self._engine.connect() as conn:
                    rows = conn.execute(select(Tenant.name, Tenant.capture_content)).all()
            except OperationalError as exc:  # store down: refuse (503), never guess a policy
                raise StoreUnavailableError(f"the store is unavailable: {exc.orig}") from exc
            with self._lock:
                self._cache = {r[0]: r[1] for r in rows}
                self._loaded = now
        return self._cache.get(tenant, self._default)

    def invalidate(self) -> None:
        self._loaded = 0.0
