"""Pure trace assembly: agent-aware span labels, the span tree and per-subtree totals.

No I/O: :mod:`collector.store.traces` fetches a trace's spans and call records and hands them
here. Labels follow the OpenTelemetry gen_ai semantic conventions (``gen_ai.operation.name``:
``invoke_agent``, ``create_agent``, ``execute_tool``, ``chat``, ``embeddings``, ...;
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/) and OpenInference span
kinds (``openinference.span.kind``: ``AGENT``, ``TOOL``, ``LLM``, ``RETRIEVER``, ``EMBEDDING``,
``CHAIN``, ``RERANKER``, ``GUARDRAIL``, ``EVALUATOR``;
https://github.com/Arize-ai/openinference/blob/main/spec/semantic_conventions.md), then
OpenLLMetry's ``traceloop.span.kind``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: span kinds of driftline's trace view
KINDS = (
    "agent",
    "tool",
    "llm",
    "retrieval",
    "embedding",
    "chain",
    "reranker",
    "guardrail",
    "other",
)

_SEMCONV_OP = {
    "invoke_agent": "agent",
    "create_agent": "agent",
    "execute_tool": "tool",
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "embeddings": "embedding",
    "retrieval": "retrieval",
}
_OPENINFERENCE = {
    "AGENT": "agent",
    "TOOL": "tool",
    "LLM": "llm",
    "RETRIEVER": "retrieval",
    "EMBEDDING": "embedding",
    "CHAIN": "chain",
    "RERANKER": "reranker",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "other",
}
_TRACELOOP = {"agent": "agent", "tool": "tool", "workflow": "chain", "task": "chain"}


def _str(attrs: Mapping[str, Any], *keys: str) -> str | None:
    for k in keys:
        v = attrs.get(k)
        if v is not None and v != "":
            return str(v)
    return None


def classify_span(name: str, attributes: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(kind, label)`` of a span: kind is one of :data:`KINDS`, label a short display text.

    Examples: ``("agent", "agent: trip-planner")``, ``("tool", "tool: get_weather")``,
    ``("llm", "chat gpt-4o-mini")``, ``("retrieval", "retrieval: vector-store")``.
    """
    attrs = attributes or {}
    op = _str(attrs, "gen_ai.operation.name")
    kind = _SEMCONV_OP.get(op or "")
    if kind is None:
        kind = _OPENINFERENCE.get((_str(attrs, "openinference.span.kind") or "").upper())
    if kind is None:
        kind = _TRACELOOP.get((_str(attrs, "traceloop.span.kind") or "").lower())
    if kind is None and name == "llm_request":
        kind = "llm"  # vLLM's engine span
    kind = kind or "other"
    if kind == "agent":
        who = _str(attrs, "gen_ai.agent.name", "agent.name", "gen_ai.agent.id") or name
        return kind, f"agent: {who}"
    if kind == "tool":
        who = _str(attrs, "gen_ai.tool.name", "tool.name") or name
        return kind, f"tool: {who}"
    if kind in ("retrieval", "embedding", "reranker", "guardrail"):
        what = _str(attrs, "gen_ai.data_source.id", "gen_ai.request.model", "embedding.model_name")
        return kind, f"{kind}: {what or name}"
    if kind == "llm":
        model = _str(attrs, "gen_ai.request.model", "llm.model_name", "gen_ai.response.model")
        return kind, f"{op or 'llm'} {model}" if model else name
    return kind, name


def _sum(values: Iterable[Any]) -> Any:
    """Sum skipping nulls; None when every value is unknown (null is never 0)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _span_node(span: Mapping[str, Any]) -> dict[str, Any]:
    kind, label = classify_span(span["name"], span.get("attributes"))
    start, end = span["start_unix_nano"] or None, span["end_unix_nano"] or None
    return {
        "span_id": span["span_id"],
        "parent_span_id": span["parent_span_id"],
        "name": span["name"],
        "kind": kind,
        "label": label,
        "service_name": span["service_name"],
        "start_unix_nano": start,
        "end_unix_nano": end,
        "duration_s": (end - start) / 1e9 if start and end and end >= start else None,
        "status": {0: "unset", 1: "ok", 2: "error"}.get(span["status_code"], "unset"),
        "status_message": span.get("status_message"),
        "attributes": span.get("attributes") or {},
        "missing": False,
        "call": None,
        "call_ref": None,
        "children": [],
    }


def _missing_node(span_id: str) -> dict[str, Any]:
    return {
        "span_id": span_id,
        "parent_span_id": None,
        "name": "(missing span)",
        "kind": "other",
        "label": "missing parent (span not received)",
        "service_name": None,
        "start_unix_nano": None,
        "end_unix_nano": None,
        "duration_s": None,
        "status": "unset",
        "status_message": None,
        "attributes": {},
        "missing": True,
        "call": None,
        "call_ref": None,
        "children": [],
    }


def _roll_up(node: dict[str, Any]) -> dict[str, Any]:
    """Fill ``node["totals"]`` from its own call and its children's totals (post-order)."""
    kids = [_roll_up(c) for c in node["children"]]
    call = node["call"]
    own = {
        "llm_calls": 1 if call else 0,
        "input_tokens": call["input_tokens"] if call else None,
        "output_tokens": call["output_tokens"] if call else None,
        "cost_usd": call["cost_usd"] if call else None,
        "errors": 1 if node["status"] == "error" or (call and call["status"] == "error") else 0,
    }
    starts = [node["start_unix_nano"]] + [k["start_unix_nano"] for k in kids]
    ends = [node["end_unix_nano"]] + [k["end_unix_nano"] for k in kids]
    known_s, known_e = [s for s in starts if s], [e for e in ends if e]
    totals = {
        "spans": (0 if node["missing"] else 1) + sum(k["spans"] for k in kids),
        "llm_calls": own["llm_calls"] + sum(k["llm_calls"] for k in kids),
        "input_tokens": _sum([own["input_tokens"]] + [k["input_tokens"] for k in kids]),
        "output_tokens": _sum([own["output_tokens"]] + [k["output_tokens"] for k in kids]),
        "cost_usd": _sum([own["cost_usd"]] + [k["cost_usd"] for k in kids]),
        "errors": own["errors"] + sum(k["errors"] for k in kids),
        "start_unix_nano": min(known_s) if known_s else None,
        "end_unix_nano": max(known_e) if known_e else None,
    }
    s, e = totals["start_unix_nano"], totals["end_unix_nano"]
    totals["latency_s"] = (e - s) / 1e9 if s and e and e >= s else None
    node["totals"] = totals
    return totals


def build_tree(
    spans: Iterable[Mapping[str, Any]], calls: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The span tree of one trace.

    Args:
        spans: span rows (``span_id``, ``parent_span_id``, ``name``, ``service_name``,
            ``start_unix_nano``, ``end_unix_nano``, ``status_code``, ``attributes``, ...).
        calls: the trace's call records (API dicts); each is attached to its primary span
            (``call``) and referenced from its merged vLLM engine span (``call_ref``).

    Returns:
        ``{"roots": [node, ...], "totals": {...}, "missing_parents": [span_id, ...]}``. Every
        node has ``kind``, ``label``, ``duration_s`` (seconds), ``status``, ``call`` and
        ``children`` (by start time); ``totals`` per node and for the trace: ``spans``,
        ``llm_calls``, ``input_tokens``, ``output_tokens`` (tokens), ``cost_usd`` (USD),
        ``errors`` (spans or calls with error status), ``latency_s`` (last end - first start,
        seconds). Token and cost sums skip unknown values and are None when all are unknown.
        A span whose parent was never received hangs under a placeholder node with
        ``missing: True`` (its ``span_id`` is the absent parent's id).
    """
    nodes = {s["span_id"]: _span_node(s) for s in spans}
    for call in calls:
        primary = nodes.get(call["span_id"])
        if primary is not None:
            primary["call"] = call
        engine = call.get("engine_span_id")
        if engine and engine in nodes:
            nodes[engine]["call_ref"] = call["call_id"]
    roots: list[dict[str, Any]] = []
    missing: dict[str, dict[str, Any]] = {}
    for node in nodes.values():
        parent = node["parent_span_id"]
        if not parent:
            roots.append(node)
        elif parent in nodes:
            nodes[parent]["children"].append(node)
        else:
            if parent not in missing:
                missing[parent] = _missing_node(parent)
                roots.append(missing[parent])
            missing[parent]["children"].append(node)

    def order(items: list[dict[str, Any]]) -> None:
        items.sort(key=lambda n: (n["start_unix_nano"] or 0, n["span_id"]))
        for n in items:
            order(n["children"])

    order(roots)
    for m in missing.values():
        m["start_unix_nano"] = min((c["start_unix_nano"] or 0) for c in m["children"]) or None
    roots.sort(key=lambda n: (n["start_unix_nano"] or 0, n["span_id"]))
    subtotals = [_roll_up(r) for r in roots]
    totals = {
        "spans": sum(t["spans"] for t in subtotals),
        "llm_calls": sum(t["llm_calls"] for t in subtotals),
        "input_tokens": _sum(t["input_tokens"] for t in subtotals),
        "output_tokens": _sum(t["output_tokens"] for t in subtotals),
        "cost_usd": _sum(t["cost_usd"] for t in subtotals),
        "errors": sum(t["errors"] for t in subtotals),
    }
    starts = [t["start_unix_nano"] for t in subtotals if t["start_unix_nano"]]
    ends = [t["end_unix_nano"] for t in subtotals if t["end_unix_nano"]]
    totals["start_unix_nano"] = min(starts) if starts else None
    totals["end_unix_nano"] = max(ends) if ends else None
    s, e = totals["start_unix_nano"], totals["end_unix_nano"]
    totals["latency_s"] = (e - s) / 1e9 if s and e and e >= s else None
    return {"roots": roots, "totals": totals, "missing_parents": sorted(missing)}


def walk(roots: Iterable[dict[str, Any]], depth: int = 0) -> Iterable[tuple[int, dict[str, Any]]]:
    """``(depth, node)`` in display order (pre-order), for indented renderings."""
    for node in roots:
        yield depth, node
        yield from walk(node["children"], depth + 1)
