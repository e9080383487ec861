"""Table tests of normalisation: every dialect, without a database."""

from __future__ import annotations

import json
from typing import Any

import pytest

from collector.cost.prices import PriceTable
from collector.ingest.dialects import llm_role
from collector.ingest.merge import merge
from collector.ingest.normalize import extract, finalize, normalize_span
from collector.ingest.values import finish_reasons
from collector.store.models import LLMCall
from collector.store.schema import CALL_COLUMNS, SpanData
from tests.conftest import PRICE_FIXTURE

PRICES = PriceTable.load(PRICE_FIXTURE)
T0 = 1_714_000_000_000_000_000


def span(
    attrs: dict[str, Any],
    *,
    name: str = "chat gpt-4o",
    span_id: str = "00000000000000a1",
    parent: str | None = None,
    events: list[dict[str, Any]] | None = None,
    scope: str | None = None,
    status: int = 0,
    dur_s: float = 1.0,
    service: str = "app",
) -> SpanData:
    return SpanData(
        trace_id="ab" * 16,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=3,
        start_unix_nano=T0,
        end_unix_nano=T0 + int(dur_s * 1e9),
        status_code=status,
        status_message=None,
        attributes=attrs,
        events=events or [],
        links=[],
        resource_attributes={"service.name": service},
        scope_name=scope,
        scope_version=None,
    )


def rec(attrs: dict[str, Any], **kw: Any) -> Any:
    r = normalize_span(span(attrs, **kw), tenant="t", prices=PRICES)
    assert r is not None
    return r


def test_record_fields_match_table_columns() -> None:
    assert tuple(c.name for c in LLMCall.__table__.columns) == CALL_COLUMNS


def test_semconv_current_with_messages() -> None:
    r = rec(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "OpenAI",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 11,
            "gen_ai.usage.cache_read.input_tokens": 40,
            "gen_ai.response.time_to_first_chunk": 0.5,
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.conversation.id": "sess-1",
            "user.id": "u-1",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "finish_reason": "stop",
                        "parts": [{"type": "text", "content": "Sunny."}],
                    }
                ]
            ),
        },
        dur_s=1.5,
    )
    assert r.dialect == "semconv" and r.provider == "openai" and r.operation == "chat"
    assert r.call_id == "chatcmpl-1" and r.model == "gpt-4o"
    assert r.input_text == "system: Be brief.\nuser: Weather in Paris?"
    assert r.output_text == "Sunny."
    assert r.ttft_s == 0.5 and r.e2e_s == 1.5 and r.tpot_s == pytest.approx(0.1)
    assert (r.session_id, r.user_id) == ("sess-1", "u-1")
    # 60 uncached input at 2.5, 40 cached at 1.25, 11 output at 10 (USD per 1M)
    assert r.cost_usd == pytest.approx((60 * 2.5 + 40 * 1.25 + 11 * 10) / 1e6)


def test_legacy_flattened_prompt_and_completion() -> None:
    r = rec(
        {
            "gen_ai.system": "Cohere",
            "gen_ai.request.model": "command-r",
            "gen_ai.usage.prompt_tokens": 10,
            "gen_ai.usage.completion_tokens": 5,
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "You help.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Hi",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Hello!",
            "gen_ai.completion.0.finish_reason": "COMPLETE",
            "llm.request.type": "chat",
        }
    )
    assert r.dialect == "openllmetry" and r.provider == "cohere"
    assert r.input_text == "system: You help.\nuser: Hi"
    assert r.output_text == "Hello!" and r.finish_reasons == ["stop"]


def test_openinference_llm_span() -> None:
    r = rec(
        {
            "openinference.span.kind": "LLM",
            "llm.provider": "openai",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 7,
            "llm.token_count.completion": 3,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "2+2?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "4",
            "session.id": "s9",
        },
        name="ChatCompletion",
    )
    assert r.dialect == "openinference" and r.operation == "chat"
    assert (r.input_text, r.output_text, r.session_id) == ("2+2?", "4", "s9")
    assert r.model == "gpt-4o-mini"


def test_openinference_chain_is_not_a_call() -> None:
    assert llm_role(span({"openinference.span.kind": "CHAIN"}, name="chain")) is None
    assert (
        llm_role(
            span(
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 5},
                name="invoke_agent a",
            )
        )
        is None
    )


def test_openlit_events_and_provider_mapping() -> None:
    r = rec(
        {
            "gen_ai.system": "az.ai.openai",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 1,
            "gen_ai.usage.output_tokens": 1,
            "gen_ai.application_name": "app",
            "gen_ai.usage.cost": 0.5,
        },
        events=[
            {"name": "gen_ai.content.prompt", "attributes": {"gen_ai.prompt": "hello"}},
            {"name": "gen_ai.content.completion", "attributes": {"gen_ai.completion": "bye"}},
        ],
    )
    assert r.dialect == "openlit" and r.provider == "azure.ai.openai"
    assert (r.input_text, r.output_text) == ("hello", "bye")
    assert r.cost_usd == pytest.approx(2.5e-6 + 10e-6)  # table price wins over reported


def test_reported_cost_used_only_when_unpriced() -> None:
    r = rec(
        {
            "gen_ai.request.model": "my-model",
            "gen_ai.usage.input_tokens": 1,
            "gen_ai.usage.output_tokens": 1,
            "gen_ai.usage.cost": 0.25,
        }
    )
    assert r.cost_usd == 0.25 and "cost_reported" in r.flags and "unpriced" not in r.flags


def test_vllm_engine_span_and_startup_spans() -> None:
    attrs = {
        "gen_ai.latency.time_to_first_token": 0.05,
        "gen_ai.latency.e2e": 1.05,
        "gen_ai.latency.time_in_queue": 0.01,
        "gen_ai.latency.time_in_model_prefill": 0.04,
        "gen_ai.latency.time_in_model_decode": 1.0,
        "gen_ai.usage.prompt_tokens": 20,
        "gen_ai.usage.completion_tokens": 11,
        "gen_ai.request.id": "chatcmpl-9",
        "gen_ai.response.finish_reasons": '["length"]',
    }
    e = extract(span(attrs, name="llm_request", scope="vllm.tracing.otel"))
    assert e is not None and e.role == "engine" and e.dialect == "vllm"
    assert e.finish_reasons == ("length",) and e.provider == "vllm"
    assert llm_role(span({"code.function": "load"}, name="Load weights")) is None


def test_merge_gateway_and_engine() -> None:
    client = extract(
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "vllm",
                "gen_ai.request.model": "candidate-bad",
                "gen_ai.response.id": "chatcmpl-9",
                "gen_ai.response.time_to_first_chunk": 0.08,
                "gen_ai.usage.input_tokens": 20,
                "gen_ai.usage.output_tokens": 11,
                "driftline.rollout": "support-assistant",
                "driftline.variant": "candidate-bad",
                "driftline.itl.p50_s": 0.09,
                "driftline.itl.p95_s": 0.12,
                "driftline.itl.max_s": 0.2,
                "driftline.gateway.queue_s": 0.015,
            },
            dur_s=1.1,
            service="gateway",
        )
    )
    engine = extract(
        span(
            {
                "gen_ai.latency.time_to_first_token": 0.05,
                "gen_ai.latency.e2e": 1.05,
                "gen_ai.latency.time_in_queue": 0.01,
                "gen_ai.latency.time_in_model_prefill": 0.04,
                "gen_ai.latency.time_in_model_decode": 1.0,
                "gen_ai.usage.prompt_tokens": 20,
                "gen_ai.usage.completion_tokens": 11,
                "gen_ai.request.id": "chatcmpl-9",
            },
            name="llm_request",
            span_id="00000000000000b2",
            parent="00000000000000a1",
            scope="vllm.tracing.otel",
            service="vllm",
        )
    )
    assert client is not None and engine is not None
    r = finalize(merge(client, engine), tenant="t", prices=PRICES)
    assert r.span_id == "00000000000000a1" and r.engine_span_id == "00000000000000b2"
    assert (r.variant, r.rollout, r.service_name) == (
        "candidate-bad",
        "support-assistant",
        "gateway",
    )
    assert (r.queue_s, r.prefill_s, r.decode_s) == (0.01, 0.04, 1.0)
    # both latencies, side by side: the caller's (client-observed) and the engine's
    assert r.ttft_s == 0.08 and r.e2e_s == pytest.approx(1.1)
    assert r.server_ttft_s == 0.05 and r.server_e2e_s == 1.05
    assert r.gateway_queue_s == 0.015
    assert r.tpot_s == pytest.approx((1.1 - 0.08) / 10)
    assert (r.itl_p50_s, r.itl_p95_s, r.itl_max_s) == (0.09, 0.12, 0.2)
    assert r.server_request_id == "chatcmpl-9" and r.call_id == "chatcmpl-9"
    # whichever half comes alone: the engine's own latencies are server-side, the caller's not
    alone = finalize(engine, tenant="t", prices=PRICES)
    assert (alone.ttft_s, alone.e2e_s) == (0.05, 1.05)
    assert (alone.server_ttft_s, alone.server_e2e_s, alone.gateway_queue_s) == (0.05, 1.05, None)
    lone_client = finalize(client, tenant="t", prices=PRICES)
    assert lone_client.server_ttft_s is None and lone_client.server_e2e_s is None
    assert lone_client.gateway_queue_s == 0.015


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["stop"], ["stop"]),
        ('["stop","length"]', ["stop", "length"]),
        ("stop,length", ["stop", "length"]),
        ("tool_call", ["tool_calls"]),
        ("MAX_TOKENS", ["length"]),
        ("end_turn", ["stop"]),
        ("", None),
        (None, None),
        ([], None),
    ],
)
def test_finish_reasons_shapes(raw: Any, expected: list[str] | None) -> None:
    assert finish_reasons(raw) == expected


def test_timing_and_token_guards() -> None:
    r = rec(
        {
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": -5,
            "gen_ai.usage.output_tokens": "7",
            "gen_ai.response.time_to_first_chunk": "nan",
        }
    )
    assert r.input_tokens is None and "invalid_usage" in r.flags
    assert r.output_tokens == 7 and r.ttft_s is None and "invalid_timing" in r.flags
    assert r.cost_usd is None and "usage_missing" in r.flags
    # TTFT after the end: TPOT would be negative -> null, flagged
    r2 = rec(
        {
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 1,
            "gen_ai.usage.output_tokens": 5,
            "gen_ai.response.time_to_first_chunk": 3.0,
        }
    )
    assert r2.tpot_s is None and "invalid_timing" in r2.flags


def test_long_text_truncated_with_marker() -> None:
    e = extract(span({"gen_ai.request.model": "m", "input.value": "a" * 50}), max_text_chars=10)
    assert e is not None
    assert e.input_text == "a" * 10 + "…[truncated by driftline: original length 50 chars]"
    assert "text_truncated" in e.flags


def test_embeddings_without_output_tokens_are_priced() -> None:
    r = rec(
        {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 1000,
        },
        name="embeddings gpt-4o",
    )
    assert r.operation == "embeddings" and r.cost_usd == pytest.approx(0.0025)
    assert "usage_missing" not in r.flags


def test_model_from_span_name_and_invocation_parameters() -> None:
    r = rec(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 1,
            "gen_ai.usage.output_tokens": 1,
        },
        name="chat gpt-4o-mini",
    )
    assert r.request_model == "gpt-4o-mini"
    r2 = rec(
        {
            "openinference.span.kind": "LLM",
            "llm.invocation_parameters": json.dumps({"model": "gpt-4o"}),
        },
        name="x",
    )
    assert r2.request_model == "gpt-4o"


def test_openlit_zero_cost_for_an_unpriced_model_is_unknown() -> None:
    r = rec(
        {
            "gen_ai.request.model": "my-model",
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.output_tokens": 3,
            "gen_ai.usage.cost": 0,
            "gen_ai.application_name": "app",
        },
        scope="openlit.otel.tracing",
    )
    assert r.dialect == "openlit" and r.cost_usd is None
    assert {"unpriced", "reported_cost_ignored"} <= set(r.flags)


#: the streaming span of openinference-instrumentation-openai 0.1.59 around openai 1.109.1 (as
#: captured by tests/collector/test_instrumentations.py; no response-model or response-id key)
OPENINFERENCE_STREAM = {
    "llm.system": "openai",
    "input.value": json.dumps(
        {
            "messages": [{"role": "user", "content": "Count to three."}],
            "model": "gpt-4o-mini",
            "stream": True,
        }
    ),
    "input.mime_type": "application/json",
    "output.value": json.dumps(
        {
            "choices": [
                {
                    "message": {"content": "one, two, three", "role": "assistant"},
                    "index": 0,
                    "finish_reason": "stop",
                }
            ],
            "id": "chatcmpl-2",
            "model": "gpt-4o-mini-2024-07-18",
            "object": "chat.completion",
        }
    ),
    "output.mime_type": "application/json",
    "llm.invocation_parameters": json.dumps({"model": "gpt-4o-mini", "stream": True}),
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "Count to three.",
    "llm.model_name": "gpt-4o-mini-2024-07-18",
    "llm.token_count.total": 15,
    "llm.token_count.prompt": 12,
    "llm.token_count.completion": 3,
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "one, two, three",
    "llm.finish_reason": "stop",
    "openinference.span.kind": "LLM",
}


def test_openinference_openai_streaming_span() -> None:
    r = rec(
        OPENINFERENCE_STREAM,
        name="ChatCompletion",
        scope="openinference.instrumentation.openai",
        events=[_chunk(0.004, "First Token Stream Event")],
    )
    assert r.dialect == "openinference" and r.operation == "chat"
    assert (r.request_model, r.response_model) == ("gpt-4o-mini", "gpt-4o-mini-2024-07-18")
    assert r.response_id == "chatcmpl-2" and r.call_id == "chatcmpl-2"
    assert (r.input_tokens, r.output_tokens) == (12, 3)
    assert r.input_text == "Count to three." and r.output_text == "one, two, three"
    assert r.finish_reasons == ["stop"]
    assert r.ttft_s == pytest.approx(0.004) and "ttft_from_event" in r.flags


def test_openinference_response_id_needs_a_json_output() -> None:
    attrs = {**OPENINFERENCE_STREAM, "output.mime_type": "text/plain"}
    assert rec(attrs, name="ChatCompletion").response_id is None
    attrs = {k: v for k, v in OPENINFERENCE_STREAM.items() if k != "output.value"}
    assert rec(attrs, name="ChatCompletion").response_id is None


#: the non-streaming span of openlit 1.45.0 around openai 1.109.1 (as captured by
#: tests/collector/test_instrumentations.py): semconv keys, the system prompt both in
#: ``gen_ai.system_instructions`` and ``gen_ai.input.messages``, a reported cost of 0
OPENLIT_CHAT = {
    "telemetry.sdk.name": "openlit",
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "acme-chat-1",
    "gen_ai.response.model": "acme-chat-1",
    "gen_ai.request.stream": False,
    "gen_ai.server.time_per_output_token": 0,
    "gen_ai.server.time_to_first_token": 0.0127,
    "gen_ai.sdk.version": "1.109.1",
    "gen_ai.request.user": "",
    "gen_ai.response.id": "chatcmpl-1",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.input_tokens": 12,
    "gen_ai.usage.output_tokens": 3,
    "gen_ai.usage.cost": 0,
    "gen_ai.usage.cache_read.input_tokens": 0,
    "gen_ai.usage.cache_creation.input_tokens": 0,
    "gen_ai.input.messages": json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Hi?"}]},
        ]
    ),
    "gen_ai.output.messages": json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Hello."}],
                "finish_reason": "stop",
            }
        ]
    ),
    "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
}


def test_openlit_openai_span() -> None:
    r = rec(OPENLIT_CHAT, name="chat acme-chat-1", scope="openlit.instrumentation.openai")
    assert r.dialect == "openlit" and r.response_id == "chatcmpl-1"
    assert r.input_text == "system: Be brief.\nuser: Hi?"  # the system prompt once
    assert r.output_text == "Hello." and r.finish_reasons == ["stop"]
    assert r.ttft_s == pytest.approx(0.0127) and "ttft_from_event" not in r.flags
    assert r.user_id is None  # sent as ""
    assert r.cost_usd is None and {"unpriced", "reported_cost_ignored"} <= set(r.flags)


def test_system_instructions_not_in_the_messages_are_kept() -> None:
    attrs = {
        **OPENLIT_CHAT,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be kind."}]),
    }
    assert rec(attrs).input_text == "system: Be kind.\nsystem: Be brief.\nuser: Hi?"


def _chunk(at_s: float, name: str = "gen_ai.content.completion.chunk") -> dict[str, Any]:
    return {"name": name, "time_unix_nano": T0 + int(at_s * 1e9), "attributes": {}}


@pytest.mark.parametrize(
    ("attrs", "scope", "events", "dialect"),
    [
        (  # OpenLLMetry: one chunk event per streamed chunk
            {
                "llm.request.type": "chat",
                "gen_ai.request.model": "gpt-4o",
                "llm.is_streaming": True,
            },
            "opentelemetry.instrumentation.openai.v1",
            [_chunk(0.40), _chunk(0.25), _chunk(0.60)],
            "openllmetry",
        ),
        (  # OpenInference: one first-token event
            {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"},
            "openinference.instrumentation.openai",
            [_chunk(0.25, "First Token Stream Event")],
            "openinference",
        ),
    ],
)
def test_ttft_from_the_first_token_event(
    attrs: dict[str, Any], scope: str, events: list[dict[str, Any]], dialect: str
) -> None:
    r = rec(attrs, scope=scope, events=events, name="ChatCompletion")
    assert r.dialect == dialect
    assert r.ttft_s == pytest.approx(0.25) and "ttft_from_event" in r.flags


def test_ttft_attribute_wins_over_the_event_and_a_skewed_event_is_ignored() -> None:
    base = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    r = rec({**base, "gen_ai.response.time_to_first_chunk": 0.1}, events=[_chunk(0.3)])
    assert r.ttft_s == pytest.approx(0.1) and "ttft_from_event" not in r.flags
    early = rec(base, events=[_chunk(-0.5)])
    assert early.ttft_s is None and "ttft_from_event" not in early.flags
