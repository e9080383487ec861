"""Hypothesis strategies for OTLP trace export bodies: protobuf messages with random fields,
their truncations and bit flips, random bytes, and OTLP/JSON documents with wrong types, huge
integers, bad hex, odd unicode and deep nesting.

Shapes follow opentelemetry-proto ``trace/v1/trace.proto`` and the OTLP/JSON mapping
(``docs/specification.md``: hex ids, int64 as string or number)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

#: attribute keys the normaliser reads (every dialect), so random values reach its parsers
KEYS = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.request.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.response.finish_reasons",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.conversation.id",
    "llm.model_name",
    "llm.token_count.prompt",
    "llm.token_count.completion",
    "llm.input_messages",
    "openinference.span.kind",
    "traceloop.span.kind",
    "llm.request.type",
    "driftline.rollout",
    "driftline.variant",
    "user.id",
    "session.id",
    "error.type",
    "service.name",
]

BIG = 2**64
ints = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 1, 2**63 - 1, -(2**63), 2**31, 10**15]),
)
texts = st.text(max_size=40)
json_texts = st.sampled_from(
    [
        '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
        '[{"role":"assistant","finish_reason":"stop","parts":[]}]',
        "[{",
        "[null, 1, {}]",
        '{"role": 5}',
        '[{"role":"user","parts":"x"}]',
        "",
    ]
)


def _any_value(depth: int) -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        st.builds(lambda s: AnyValue(string_value=s), st.one_of(texts, json_texts)),
        st.builds(lambda i: AnyValue(int_value=i), ints),
        st.builds(lambda f: AnyValue(double_value=f), st.floats()),
        st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
        st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=16)),
        st.just(AnyValue()),
    )
    if depth <= 0:
        return scalars

    def array(values: list[AnyValue]) -> AnyValue:
        v = AnyValue()
        v.array_value.values.extend(values)
        return v

    def kvlist(items: list[tuple[str, AnyValue]]) -> AnyValue:
        v = AnyValue()
        for k, x in items:
            kv = v.kvlist_value.values.add()
            kv.key = k
            kv.value.CopyFrom(x)
        return v

    inner = _any_value(depth - 1)
    return st.one_of(
        scalars,
        st.builds(array, st.lists(inner, max_size=3)),
        st.builds(kvlist, st.lists(st.tuples(texts, inner), max_size=3)),
    )


attr_values = _any_value(2)
attr_lists = st.lists(st.tuples(st.one_of(st.sampled_from(KEYS), texts), attr_values), max_size=8)
ids16 = st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20))
ids8 = st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=10))
times = st.one_of(st.integers(0, BIG - 1), st.just(0), st.integers(1_700_000_000 * 10**9, 2**62))


@st.composite
def protobuf_requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    """A well-formed ``ExportTraceServiceRequest`` whose field values are random."""
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = req.resource_spans.add()
        for k, v in draw(attr_lists):
            kv = rs.resource.attributes.add()
            kv.key = k
            kv.value.CopyFrom(v)
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name = draw(st.one_of(st.just("vllm.tracing.otel"), texts))
            ss.scope.version = draw(texts)
            for _ in range(draw(st.integers(0, 4))):
                span = Span(
                    trace_id=draw(ids16),
                    span_id=draw(ids8),
                    parent_span_id=draw(st.one_of(st.just(b""), ids8)),
                    name=draw(st.one_of(st.sampled_from(["chat gpt-4o", "llm_request"]), texts)),
                    kind=Span.SpanKind.ValueType(draw(st.integers(0, 5))),
                    start_time_unix_nano=draw(times),
                    end_time_unix_nano=draw(times),
                    status=Status(
                        code=Status.StatusCode.ValueType(draw(st.integers(0, 2))),
                        message=draw(texts),
                    ),
                )
                for k, v in draw(attr_lists):
                    kv = span.attributes.add()
                    kv.key = k
                    kv.value.CopyFrom(v)
                for _ in range(draw(st.integers(0, 2))):
                    ev = span.events.add()
                    ev.name = draw(st.one_of(st.just("gen_ai.content.prompt"), texts))
                    ev.time_unix_nano = draw(times)
                    for k, v in draw(attr_lists):
                        kv = ev.attributes.add()
                        kv.key = k
                        kv.value.CopyFrom(v)
                if draw(st.booleans()):
                    link = span.links.add()
                    link.trace_id, link.span_id = draw(ids16), draw(ids8)
                ss.spans.append(span)
    return req


@st.composite
def mangled_protobuf(draw: st.DrawFn) -> bytes:
    """A valid message's bytes truncated, with bytes flipped, or with garbage appended."""
    raw = draw(protobuf_requests()).SerializeToString()
    how = draw(st.sampled_from(["truncate", "flip", "append"]))
    if how == "truncate" or not raw:
        return raw[: draw(st.integers(0, max(len(raw) - 1, 0)))]
    if how == "flip":
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        return bytes(data)
    return raw + draw(st.binary(min_size=1, max_size=32))


# ------------------------------------------------------------------------------- OTLP/JSON

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(BIG**2), BIG**2),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
#: a field that should be a string/int/object but may be anything
wrong = st.one_of(json_values, st.integers(-(BIG**3), BIG**3), st.text(max_size=5))
hex_ids = st.one_of(
    st.binary(min_size=16, max_size=16).map(bytes.hex),
    st.binary(min_size=8, max_size=8).map(bytes.hex),
    st.text(alphabet="0123456789abcdefABCDEFxyz -", max_size=40),
    st.text(max_size=8),
    wrong,
)
int64s = st.one_of(
    ints,
    ints.map(str),
    st.integers(BIG, BIG**3),
    st.integers(BIG, BIG**3).map(str),
    st.floats(),
    st.sampled_from(["", "1e9", "0x10", "-0", " 5", "NaN", "١٢٣"]),
    wrong,
)


def _json_any(depth: int) -> st.SearchStrategy[Any]:
    scalar = st.one_of(
        st.fixed_dictionaries({"stringValue": st.one_of(texts, json_texts, wrong)}),
        st.fixed_dictionaries({"intValue": int64s}),
        st.fixed_dictionaries({"doubleValue": st.one_of(st.floats(), st.text(max_size=5), wrong)}),
        st.fixed_dictionaries({"boolValue": st.one_of(st.booleans(), wrong)}),
        st.fixed_dictionaries({"bytesValue": st.one_of(st.text(max_size=12), wrong)}),
        wrong,
    )
    if depth <= 0:
        return scalar
    inner = _json_any(depth - 1)
    return st.one_of(
        scalar,
        st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": st.lists(inner)})}),
        st.fixed_dictionaries(
            {
                "kvlistValue": st.fixed_dictionaries(
                    {"values": st.lists(st.fixed_dictionaries({"key": texts, "value": inner}))}
                )
            }
        ),
    )


json_attrs = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {"key": st.one_of(st.sampled_from(KEYS), texts, wrong), "value": _json_any(2)}
        ),
        max_size=6,
    ),
    wrong,
)


def _maybe(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """An object with any subset of ``fields`` (a missing field is a test case too)."""
    return st.fixed_dictionaries({}, optional=fields)


json_spans = st.one_of(
    _maybe(
        {
            "traceId": hex_ids,
            "spanId": hex_ids,
            "parentSpanId": hex_ids,
            "name": st.one_of(texts, wrong),
            "kind": st.one_of(
                st.integers(-3, 9), st.sampled_from(["SPAN_KIND_CLIENT", "x"]), wrong
            ),
            "startTimeUnixNano": int64s,
            "endTimeUnixNano": int64s,
            "attributes": json_attrs,
            "status": st.one_of(_maybe({"code": st.one_of(ints, wrong), "message": wrong}), wrong),
            "events": st.one_of(
                st.lists(_maybe({"name": wrong, "timeUnixNano": int64s, "attributes": json_attrs})),
                wrong,
            ),
            "links": st.one_of(st.lists(_maybe({"traceId": hex_ids, "spanId": hex_ids})), wrong),
        }
    ),
    wrong,
)
json_scope_spans = st.one_of(
    _maybe(
        {
            "scope": st.one_of(_maybe({"name": wrong, "version": wrong}), wrong),
            "spans": st.one_of(st.lists(json_spans, max_size=4), wrong),
        }
    ),
    wrong,
)
json_resource_spans = st.one_of(
    _maybe(
        {
            "resource": st.one_of(_maybe({"attributes": json_attrs}), wrong),
            "scopeSpans": st.one_of(st.lists(json_scope_spans, max_size=3), wrong),
            "scope_spans": st.one_of(st.lists(json_scope_spans, max_size=2), wrong),
        }
    ),
    wrong,
)
json_documents = st.one_of(
    _maybe(
        {
            "resourceSpans": st.one_of(st.lists(json_resource_spans, max_size=3), wrong),
            "resource_spans": wrong,
        }
    ),
    json_values,
)


def dump(doc: Any, ensure_ascii: bool) -> bytes:
    """JSON text of ``doc``; ``ensure_ascii`` writes lone surrogates as ``\\udXXX`` escapes."""
    return json.dumps(doc, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


json_bodies = st.one_of(
    st.builds(dump, json_documents, st.booleans()),
    st.builds(
        lambda depth, opener, closer: (opener * depth + closer * depth).encode(),
        st.integers(1, 100_000),
        st.sampled_from(["[", '{"a":', '{"resourceSpans":[']),
        st.sampled_from(["]", "}", "]}"]),
    ),
    st.binary(max_size=200),
    st.text(max_size=100).map(lambda s: s.encode("utf-8", "surrogatepass")),
)


def _deep_json_attribute(depth: int, kind: str) -> bytes:
    """A valid-looking span whose one attribute nests ``depth`` arrays or kvlists."""
    if kind == "array":
        value = '{"arrayValue":{"values":[' * depth + '{"intValue":"1"}' + "]}}" * depth
    else:
        value = (
            '{"kvlistValue":{"values":[{"key":"k","value":' * depth
            + '{"stringValue":"x"}'
            + "}]}}" * depth
        )
    span = (
        '{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",'
        '"name":"chat","attributes":[{"key":"deep","value":' + value + "}]}"
    )
    return ('{"resourceSpans":[{"scopeSpans":[{"spans":[' + span + "]}]}]}").encode()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _deep_protobuf_attribute(depth: int) -> bytes:
    """A protobuf request whose one attribute nests ``depth`` array values, written on the
    wire by hand (the protobuf runtime refuses to build messages nested past its limit).

    Field numbers from trace.proto / common.proto: AnyValue.array_value = 5,
    ArrayValue.values = 1, AnyValue.int_value = 3, KeyValue key/value = 1/2, Span
    trace_id/span_id/name/attributes = 1/2/5/9, ScopeSpans.spans = 2,
    ResourceSpans.scope_spans = 2, ExportTraceServiceRequest.resource_spans = 1."""
    value = bytes([3 << 3, 1])  # int_value = 1
    for _ in range(depth):
        value = _field(5, _field(1, value))
    kv = _field(1, b"deep") + _field(2, value)
    span = _field(1, b"\x01" * 16) + _field(2, b"\x02" * 8) + _field(5, b"chat") + _field(9, kv)
    return _field(1, _field(2, _field(2, span)))


deep_json_bodies = st.builds(
    _deep_json_attribute, st.integers(1, 3000), st.sampled_from(["array", "kvlist"])
)
deep_protobuf_bodies = st.builds(_deep_protobuf_attribute, st.integers(1, 400))
