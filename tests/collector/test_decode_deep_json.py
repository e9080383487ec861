"""A JSON body nested past ~1,000 levels loses only the deep value's span (issue 35, item 5).

On main orjson refused the document (depth > 1,024), the standard library's json then raised
RecursionError and the whole request was a 400: every good span of it was lost. Both parsers'
paths are covered: valid UTF-8 (orjson's refusal) and invalid UTF-8 (json's).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from collector.ingest.decode import CHUNKED_JSON_BYTES, decode_json
from collector.ingest.jsondoc import cut_deep, load_chunked
from collector.ingest.logs import decode_logs

DEPTHS = [1_100, 5_000, 50_000]


def _deep_value(depth: int) -> str:
    """An OTLP AnyValue (JSON text) nested ``depth`` kvlists deep."""
    head = '{"kvlistValue":{"values":[{"key":"k","value":' * depth
    return head + '{"stringValue":"bottom"}' + "}]}}" * depth


def _span(i: int, value: str = '{"stringValue":"ok"}', name: str = "chat m") -> str:
    return (
        f'{{"traceId":"{i + 1:032x}","spanId":"{i + 1:016x}","name":"{name}",'
        '"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000",'
        f'"attributes":[{{"key":"a","value":{value}}}]}}'
    )


def _traces(depth: int, name: str = "chat m") -> bytes:
    spans = ",".join([_span(0, name=name), _span(1, _deep_value(depth)), _span(2, name=name)])
    return f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{spans}]}}]}}]}}'.encode()


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("utf8", ["valid", "invalid"])
def test_a_deep_attribute_loses_only_its_span(depth: int, utf8: str) -> None:
    body = _traces(depth, name="chat BAD")
    if utf8 == "invalid":  # orjson refuses invalid UTF-8: the json path then
        body = body.replace(b"BAD", b"\xff\xfe")
    batch = decode_json(body)
    good = {s.span_id for s in batch.spans}
    assert {f"{1:016x}", f"{3:016x}"} <= good  # the two good spans are kept
    assert len(batch.spans) + batch.rejected == 3
    if f"{2:016x}" in good:  # kept with its value cut, never with the whole depth
        (deep,) = [s for s in batch.spans if s.span_id == f"{2:016x}"]
        assert "bottom" not in json.dumps(deep.attributes)


def test_deep_log_record_loses_only_itself() -> None:
    def record(i: int, value: str) -> str:
        return (
            f'{{"timeUnixNano":"1700000000000000000","eventName":"gen_ai.evaluation.result",'
            f'"traceId":"{i + 1:032x}","spanId":"{i + 1:016x}",'
            f'"attributes":[{{"key":"gen_ai.evaluation.name","value":{{"stringValue":"q"}}}},'
            f'{{"key":"gen_ai.evaluation.score.value","value":{{"doubleValue":0.5}}}},'
            f'{{"key":"x","value":{value}}}]}}'
        )

    records = ",".join([record(0, '{"intValue":"1"}'), record(1, _deep_value(5_000))])
    body = f'{{"resourceLogs":[{{"scopeLogs":[{{"logRecords":[{records}]}}]}}]}}'.encode()
    batch = decode_logs(body, "application/json")
    assert len(batch.evaluations) + batch.rejected == 2 and len(batch.evaluations) >= 1


def test_cut_deep_keeps_shallow_documents_and_strings() -> None:
    text = json.dumps({"a": [1, {"b": '[[[{{{ \\" ]]'}], "c": None})
    assert cut_deep(text, 3) == text
    assert json.loads(cut_deep("[[[[1]]]]", 2)) == [[None]]
    assert json.loads(cut_deep('{"a":{"b":{"c":1}},"d":[2]}', 2)) == {"a": {"b": None}, "d": [2]}
    with pytest.raises(ValueError, match="max_depth"):
        cut_deep("[]", 0)


def test_the_http_receiver_stores_the_good_spans(client: TestClient) -> None:
    r = client.post(
        "/v1/traces", content=_traces(5_000), headers={"content-type": "application/json"}
    )
    assert r.status_code == 200, r.text
    rejected: Any = r.json().get("partialSuccess", {}).get("rejectedSpans", 0)
    calls = client.get("/api/v1/calls", params={"limit": 100}).json()["items"]
    assert int(rejected) + len(calls) == 3 and len(calls) >= 2


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        " [ ] ",
        '{"resourceSpans":[{"resource":{},"scopeSpans":[{"spans":[{"a":[1,2,{"b":null}]},{}]}]}]}',
        '[1, "x\\"y", true, false, null, -1.5e3, {"k": ["v", {"z": {}}]}]',
        '{"a": 1, "a": 2}',
        '{"big": 123456789012345678901234567890}',
    ],
)
def test_load_chunked_equals_json_loads(text: str) -> None:
    assert load_chunked(text) == json.loads(text)
    assert load_chunked(text, levels=1) == json.loads(text)


@pytest.mark.parametrize(
    "text", ["", "{", '{"a" 1}', '{"a":1,}', "[1 2]", "[1,]", "{} x", "{1:2}", "[", '"open']
)
def test_load_chunked_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        load_chunked(text)


def test_a_large_body_decodes_like_a_small_one() -> None:
    """Past CHUNKED_JSON_BYTES the body is parsed value by value: the same spans."""
    pad = json.dumps("x" * (CHUNKED_JSON_BYTES + 10))
    body = _traces(3).replace(b'"chat m"', b'"chat m","pad":' + pad.encode(), 1)
    assert len(body) > CHUNKED_JSON_BYTES
    big, small = decode_json(body), decode_json(_traces(3))
    assert [s.span_id for s in big.spans] == [s.span_id for s in small.spans]
    assert big.rejected == small.rejected == 0
