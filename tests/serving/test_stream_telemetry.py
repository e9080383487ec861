"""SSE framing, stream accumulation, ITL summary and the semconv message JSON."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from serving.stream import SseSplitter, StreamAccumulator, event_data, with_include_usage
from serving.telemetry import (
    CallOutcome,
    input_messages_json,
    itl_summary,
    output_messages_json,
    response_attributes,
)


def test_splitter_handles_arbitrary_chunk_boundaries_and_crlf() -> None:
    raw = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\n\n: comment\n\ndata: [DONE]\n\n'
    for cut in range(1, len(raw)):
        s = SseSplitter()
        events = s.feed(raw[:cut]) + s.feed(raw[cut:])
        assert [event_data(e) for e in events] == [b'{"a": 1}', b'{"b": 2}', None, b"[DONE]"]
        assert s.rest() == b""


def test_accumulator_reads_text_reasons_usage_and_times() -> None:
    ticks = iter([1.0, 1.5, 1.7, 2.0, 2.1, 2.2])
    acc = StreamAccumulator(clock=lambda: next(ticks))
    chunks = [
        {
            "id": "c1",
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {
            "id": "c1",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "!"}, "finish_reason": "stop"}],
        },
        {
            "id": "c1",
            "model": "m",
            "choices": [],
            "usage": {
                "prompt_tokens": 7,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 4},
            },
        },
    ]
    usage_only = [acc.add(json.dumps(c).encode()) for c in chunks]
    assert usage_only == [False, False, False, False, True]
    acc.add(b"[DONE]")
    assert acc.done and acc.text() == "Hello!" and acc.finish_reasons == {0: "stop"}
    assert (acc.input_tokens, acc.output_tokens, acc.cached_input_tokens) == (7, 3, 4)
    assert acc.first_chunk_at == 1.0 and acc.token_times == [1.5, 1.7, 2.0]
    assert (acc.response_id, acc.response_model) == ("c1", "m")


def test_include_usage_is_added_and_client_wish_remembered() -> None:
    body, asked = with_include_usage({"stream": True})
    assert body["stream_options"] == {"include_usage": True} and not asked
    body, asked = with_include_usage({"stream_options": {"include_usage": True, "x": 1}})
    assert asked and body["stream_options"] == {"include_usage": True, "x": 1}


def test_itl_summary_matches_numpy() -> None:
    times = np.cumsum(np.random.default_rng(0).exponential(0.02, size=50))
    s = itl_summary(list(times))
    gaps = np.diff(times)
    assert s is not None and s.n == 49
    assert s.p50_s == pytest.approx(np.percentile(gaps, 50))
    assert s.p95_s == pytest.approx(np.percentile(gaps, 95))
    assert s.max_s == pytest.approx(gaps.max())
    assert itl_summary([1.0]) is None
    with pytest.raises(ValueError, match="token_times"):
        itl_summary([2.0, 1.0])


def test_messages_follow_the_semconv_parts_schema() -> None:
    msgs: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "http://i/x.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    assert json.loads(input_messages_json(msgs)) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "look"},
                {"type": "uri", "modality": "image", "uri": "http://i/x.png"},
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "weather",
                    "arguments": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}],
        },
    ]
    out = json.loads(output_messages_json({0: "a", 1: "b"}, {0: "stop", 1: "tool_calls"}))
    assert [m["finish_reason"] for m in out] == ["stop", "tool_call"]


def test_response_attributes_omit_unknowns() -> None:
    attrs = response_attributes(CallOutcome(response_id="r1"), capture_content=True)
    assert attrs == {"gen_ai.response.id": "r1"}
    full = response_attributes(
        CallOutcome(texts={0: "x"}, finish_reasons={1: "length", 0: "stop"}, output_tokens=0),
        capture_content=False,
    )
    assert full["gen_ai.response.finish_reasons"] == ["stop", "length"]
    assert full["gen_ai.usage.output_tokens"] == 0 and "gen_ai.output.messages" not in full
