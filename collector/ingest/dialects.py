"""Which dialect a span speaks and what kind of call it is: operation, provider, request model.

The dialect table (key priorities per dialect) is documented in ``docs/dialects.md`` and follows
``otel-genai-otlp-webhooks.md`` §3.5: semconv current -> deprecated -> OpenInference ->
OpenLLMetry -> OpenLIT; vLLM's ``llm_request`` span is the engine dialect. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collector.ingest import content
from collector.ingest.values import first
from collector.store.schema import SpanData

CALL_OPERATIONS = {
    "chat": "chat",
    "text_completion": "text_completion",
    "completion": "text_completion",
    "generate_content": "generate_content",
    "embeddings": "embeddings",
    "embedding": "embeddings",
}
#: operations that wrap LLM calls (their token totals would double count)
NON_CALL_OPERATIONS = {
    "execute_tool",
    "invoke_agent",
    "create_agent",
    "invoke_workflow",
    "retrieval",
    "plan",
    "create_memory",
    "create_memory_store",
    "delete_memory",
    "delete_memory_store",
    "search_memory",
    "update_memory",
    "upsert_memory",
    "vectordb",
    "framework",
    "agent",
    "execute_task",
    "workflow",
    "task",
    "tool",
    "unknown",
    "rerank",
}
_OPENINFERENCE_KIND = {"LLM": "chat", "EMBEDDING": "embeddings"}
_PROVIDER_MAP = {
    "az.ai.openai": "azure.ai.openai",
    "az.ai.inference": "azure.ai.inference",
    "azure_openai": "azure.ai.openai",
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "xai": "x_ai",
    "ibm.watson.ai": "ibm.watsonx.ai",
    "mistralai": "mistral_ai",
}

INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
)
OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
)
CACHE_READ_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    "gen_ai.usage.cached_tokens",
)
CACHE_WRITE_KEYS = (
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
)
REASONING_KEYS = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
)
TTFT_KEYS = (
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.server.time_to_first_token",
)
USER_KEYS = (
    "user.id",
    "enduser.id",
    "llm.user",
    "gen_ai.request.user",
    "traceloop.association.properties.user_id",
)
SESSION_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "traceloop.association.properties.session_id",
)
STATUS_NAMES = {0: "unset", 1: "ok", 2: "error"}
#: span events whose time is the arrival of the first streamed token: OpenLLMetry adds one
#: ``gen_ai.content.completion.chunk`` (older: ``llm.content.completion.chunk``) per chunk,
#: OpenInference one "First Token Stream Event" (docs/dialects.md, "TTFT")
FIRST_TOKEN_EVENTS = frozenset(
    {
        "gen_ai.content.completion.chunk",
        "llm.content.completion.chunk",
        "First Token Stream Event",
    }
)


def is_engine_span(span: SpanData) -> bool:
    if span.name != "llm_request":
        return False
    if (span.scope_name or "").startswith("vllm"):
        return True
    return any(k.startswith("gen_ai.latency.") for k in span.attributes)


def classify_operation(span: SpanData, attrs: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(canonical operation, is an LLM call)."""
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        low = op.lower()
        if low in NON_CALL_OPERATIONS:
            return low, False
        return CALL_OPERATIONS.get(low, low), True
    req_type = attrs.get("llm.request.type")
    if isinstance(req_type, str) and req_type:
        low = req_type.lower()
        return CALL_OPERATIONS.get(low, low), low in CALL_OPERATIONS
    oi_kind = attrs.get("openinference.span.kind")
    if isinstance(oi_kind, str):
        mapped = _OPENINFERENCE_KIND.get(oi_kind.upper())
        return mapped, mapped is not None
    if attrs.get("traceloop.span.kind"):
        return None, False
    first_token = span.name.split(" ", 1)[0].lower()
    if first_token in CALL_OPERATIONS:
        return CALL_OPERATIONS[first_token], True
    has_llm_keys = any(
        k in attrs
        for k in (
            *INPUT_TOKEN_KEYS,
            *OUTPUT_TOKEN_KEYS,
            "gen_ai.request.model",
            "gen_ai.system",
            "gen_ai.provider.name",
            "gen_ai.response.model",
        )
    )
    return None, has_llm_keys


#: dialects by (scope name, attribute keys in order): an instrumentation sends the same keys
#: span after span, so the key scans of :func:`_dialect_of_keys` run once per shape
_DIALECT_BY_KEYS: dict[tuple[str | None, tuple[str, ...]], str] = {}
#: shapes remembered at most (flattened ``prefix.{i}.field`` keys make a shape per length)
MAX_CACHED_SHAPES = 1024


def detect_dialect(span: SpanData, attrs: Mapping[str, Any], engine: bool) -> str:
    """The dialect of a span (docs/dialects.md): ``vllm`` for an engine span, else from the
    attribute keys and the instrumentation scope name only."""
    if engine:
        return "vllm"
    shape = (span.scope_name, tuple(attrs))
    dialect = _DIALECT_BY_KEYS.get(shape)
    if dialect is None:
        dialect = _dialect_of_keys(span.scope_name, attrs)
        if len(_DIALECT_BY_KEYS) < MAX_CACHED_SHAPES:
            _DIALECT_BY_KEYS[shape] = dialect
    return dialect


def _dialect_of_keys(scope_name: str | None, attrs: Mapping[str, Any]) -> str:
    # one pass over the keys for both prefix tests (most spans have neither prefix)
    prefixed = [k for k in attrs if k.startswith(("llm.token_count.", "traceloop."))]
    if "openinference.span.kind" in attrs or any(
        k.startswith("llm.token_count.") for k in prefixed
    ):
        return "openinference"
    scope = (scope_name or "").lower()
    if scope.startswith("openlit") or any(
        k in attrs for k in ("gen_ai.application_name", "gen_ai.environment", "gen_ai.sdk.version")
    ):
        return "openlit"
    if (
        scope.startswith("traceloop")
        or "llm.request.type" in attrs
        or "llm.usage.total_tokens" in attrs
        or any(k.startswith("traceloop.") for k in prefixed)
    ):
        return "openllmetry"
    if any(
        k in attrs
        for k in (
            "gen_ai.provider.name",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.response.time_to_first_chunk",
        )
    ):
        return "semconv"
    return "semconv-legacy"


def detect_provider(attrs: Mapping[str, Any], engine: bool) -> str | None:
    value = first(attrs, ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"))
    if isinstance(value, str) and value:
        low = value.strip().lower()
        return _PROVIDER_MAP.get(low, low)
    return "vllm" if engine else None


def as_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def detect_request_model(
    span: SpanData, attrs: Mapping[str, Any], operation: str | None
) -> str | None:
    value = as_str(first(attrs, ("gen_ai.request.model", "llm.request.model_name")))
    if value:
        return value
    # OpenInference: the model asked for is in the invocation parameters; ``llm.model_name`` is
    # the one the instrumentation reports (from the response when it has one)
    params = content._maybe_json(attrs.get("llm.invocation_parameters"))
    if isinstance(params, content.MAPPING) and params.get("model"):
        return str(params["model"])
    value = as_str(first(attrs, ("llm.model_name", "embedding.model_name")))
    if value:
        return value
    if operation and span.name.startswith(operation + " "):
        return span.name[len(operation) + 1 :].strip() or None
    return None


def detect_response_model(attrs: Mapping[str, Any]) -> str | None:
    """``gen_ai.response.model``; for OpenInference (no response-model key) ``llm.model_name``,
    which its OpenAI instrumentation takes from the response."""
    value = as_str(first(attrs, ("gen_ai.response.model", "llm.response.model_name")))
    if value is None and "openinference.span.kind" in attrs:
        value = as_str(attrs.get("llm.model_name"))
    return value


def detect_response_id(attrs: Mapping[str, Any]) -> str | None:
    """``gen_ai.response.id``; for OpenInference (no response-id key) the ``id`` of the JSON
    response in ``output.value`` (so only when content is captured)."""
    value = as_str(first(attrs, ("gen_ai.response.id", "llm.response.id")))
    if (
        value is None
        and "openinference.span.kind" in attrs
        and attrs.get("output.mime_type") == "application/json"
    ):
        doc = content._maybe_json(attrs.get("output.value"))
        if isinstance(doc, content.MAPPING) and isinstance(doc.get("id"), str) and doc["id"]:
            value = doc["id"]
    return value


def llm_role(span: SpanData) -> str | None:
    """``engine`` for a vLLM ``llm_request`` span, ``client`` for another LLM call, else None."""
    if is_engine_span(span):
        return "engine"
    return "client" if classify_operation(span, span.attributes)[1] else None


def ttft_from_events(span: SpanData) -> float | None:
    """Time to first token, seconds: the earliest first-token event (:data:`FIRST_TOKEN_EVENTS`)
    minus the span start; None when there is no such event, no start time, or the event is
    timed before the span started (clock skew is not guessed at)."""
    start = span.start_unix_nano
    if not start or not span.events:
        return None
    earliest: int | None = None
    for ev in span.events:
        if ev.get("name") in FIRST_TOKEN_EVENTS:
            t = ev.get("time_unix_nano")
            if isinstance(t, int) and t > 0 and (earliest is None or t < earliest):
                earliest = t
    if earliest is None or earliest < start:
        return None
    return (earliest - start) / 1e9
