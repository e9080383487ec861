"""Merging a caller's LLM span (gateway / SDK CLIENT span) with its vLLM ``llm_request`` child.

The gateway sends ``traceparent``, so the engine span is a child of the gateway span; both halves
describe one request and become one call record (DESIGN.md, "Joining"). Pure function over
:class:`~collector.ingest.normalize.Extract`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from collector.ingest.normalize import Extract


def merge(client: Extract, engine: Extract) -> Extract:
    """Join a caller's span with its vLLM ``llm_request`` child into one call.

    Both latencies are kept side by side: ``server_ttft_s`` / ``server_e2e_s`` and
    queue/prefill/decode/inference are the engine's (``gen_ai.latency.*``); ``ttft_s`` /
    ``e2e_s`` and the ITL summary are the caller's (client-observed, so they include the
    network and the gateway's own queue, ``gateway_queue_s``). Model, variant, user and text
    come from the caller; whatever the caller lacks (e.g. ``ttft_s`` of a non-streaming call),
    from the engine.
    """

    def pick(name: str) -> Any:
        value = getattr(client, name)
        return value if value is not None else getattr(engine, name)

    return replace(
        client,
        engine_span_id=engine.span_id,
        server_request_id=engine.server_request_id or client.server_request_id,
        queue_s=engine.queue_s,
        prefill_s=engine.prefill_s,
        decode_s=engine.decode_s,
        inference_s=engine.inference_s,
        server_ttft_s=engine.ttft_s,
        server_e2e_s=engine.e2e_s,
        gateway_queue_s=client.gateway_queue_s,
        **{
            n: pick(n)
            for n in (
                "ttft_s",
                "e2e_s",
                "input_tokens",
                "output_tokens",
                "cached_input_tokens",
                "cache_write_input_tokens",
                "reasoning_output_tokens",
                "finish_reasons",
                "request_model",
                "response_model",
                "input_text",
                "output_text",
                "error_type",
            )
        },
        status="error" if "error" in (client.status, engine.status) else client.status,
        flags=client.flags | engine.flags,
        redactions=None
        if client.redactions is None and engine.redactions is None
        else (client.redactions or 0) + (engine.redactions or 0),
    )
