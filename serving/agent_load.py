"""Agent-style traffic for ``driftline load``: one planned request becomes an agent run.

The run is one trace: an ``invoke_agent`` span (gen_ai semconv agent span) whose children are
two chat calls through the gateway (the W3C ``traceparent`` of the agent span is sent, so the
gateway's client spans join the trace) and an ``execute_tool`` span between them. The agent and
tool spans are posted to the collector's ``/v1/traces`` as OTLP/JSON (HTTP only: serving never
imports the collector). A failed span post is counted by the caller, never fatal.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from serving.workload import PlannedRequest

AGENT_NAME = "support-agent"
TOOL_NAME = "lookup_order"
SERVICE = "driftline-load-agent"

SendChat = Callable[[str, dict[str, str]], Awaitable[tuple[int, dict[str, str], str, str | None]]]


def _attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def agent_spans(
    trace_id: str,
    agent_span: str,
    tool_span: str,
    session_id: str,
    agent_ns: tuple[int, int],
    tool_ns: tuple[int, int],
    ok: bool,
) -> dict[str, Any]:
    """The OTLP/JSON body with the ``invoke_agent`` and ``execute_tool`` spans (times: unix ns)."""
    common = {"traceId": trace_id, "kind": 1}
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", SERVICE)]},
                "scopeSpans": [
                    {
                        "scope": {"name": "driftline.load"},
                        "spans": [
                            {
                                **common,
                                "spanId": agent_span,
                                "name": f"invoke_agent {AGENT_NAME}",
                                "startTimeUnixNano": str(agent_ns[0]),
                                "endTimeUnixNano": str(agent_ns[1]),
                                "attributes": [
                                    _attr("gen_ai.operation.name", "invoke_agent"),
                                    _attr("gen_ai.agent.name", AGENT_NAME),
                                    _attr("gen_ai.conversation.id", session_id),
                                ],
                                "status": {"code": 1 if ok else 2},
                            },
                            {
                                **common,
                                "spanId": tool_span,
                                "parentSpanId": agent_span,
                                "name": f"execute_tool {TOOL_NAME}",
                                "startTimeUnixNano": str(tool_ns[0]),
                                "endTimeUnixNano": str(tool_ns[1]),
                                "attributes": [
                                    _attr("gen_ai.operation.name", "execute_tool"),
                                    _attr("gen_ai.tool.name", TOOL_NAME),
                                ],
                                "status": {"code": 1},
                            },
                        ],
                    }
                ],
            }
        ]
    }


async def agent_run(
    client: httpx.AsyncClient,
    req: PlannedRequest,
    collector_url: str,
    send_chat: SendChat,
    *,
    tool_s: float = 0.05,
) -> tuple[tuple[int, dict[str, str], str, str | None], bool]:
    """Run chat → tool → chat under one ``invoke_agent`` span.

    ``send_chat(prompt, headers)`` sends one chat request to the gateway. Returns the second
    chat's ``(status, headers, text, response_id)`` (the first's when it failed) and whether the
    agent spans reached the collector.
    """
    trace_id, agent_span, tool_span = (
        secrets.token_hex(16),
        secrets.token_hex(8),
        secrets.token_hex(8),
    )
    headers = {"traceparent": f"00-{trace_id}-{agent_span}-01"}
    t0 = time.time_ns()
    first = await send_chat(req.prompt.text, headers)
    result = first
    tool = (time.time_ns(), time.time_ns())
    if first[0] == 200:
        start = time.time_ns()
        await asyncio.sleep(tool_s)  # the tool call (an order lookup)
        tool = (start, time.time_ns())
        follow_up = f"{req.prompt.text}\n\nTool {TOOL_NAME} returned: order found, shipped."
        result = await send_chat(follow_up, headers)
    body = agent_spans(
        trace_id,
        agent_span,
        tool_span,
        req.session_id,
        (t0, time.time_ns()),
        tool,
        ok=result[0] == 200,
    )
    try:
        r = await client.post(f"{collector_url}/v1/traces", json=body, timeout=5.0)
        posted = r.status_code < 300
    except httpx.HTTPError:
        posted = False
    return result, posted
