"""The OTLP failure cases of tests/fixtures/cases as tests, with their EXPECTED.md values,
on SQLite and PostgreSQL, through the real HTTP route."""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import CASES

JSON_HEADERS = {"Content-Type": "application/json"}


def post_case(client: TestClient, name: str, **headers: str) -> Any:
    body = (CASES / name).read_bytes()
    r = client.post("/v1/traces", content=body, headers={**JSON_HEADERS, **headers})
    return r


def calls(client: TestClient, **params: Any) -> dict[str, dict[str, Any]]:
    r = client.get("/api/v1/calls", params={"limit": 1000, **params})
    assert r.status_code == 200, r.text
    return {c["span_id"][-4:]: c for c in r.json()["items"]}


def assert_ok(r: Any) -> None:
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert int(body.get("partialSuccess", {}).get("rejectedSpans", 0)) == 0, body


def close(a: float | None, b: float, tol: float = 1e-9) -> bool:
    return a is not None and math.isclose(a, b, abs_tol=tol)


def test_02_int_value_shapes(client: TestClient) -> None:
    assert_ok(post_case(client, "02_int_value_shapes.json"))
    c = calls(client)
    for sid in ("0a01", "0a02", "0a03", "0a04"):
        assert (c[sid]["input_tokens"], c[sid]["output_tokens"]) == (1200, 350)
        assert close(c[sid]["cost_usd"], 0.00039)
    assert close(c["0a01"]["cost_usd"] + c["0a02"]["cost_usd"], 0.00078)


def test_03_gzip_identity_and_bad_encodings(client: TestClient) -> None:
    plain = (CASES / "03_gzip_body.json").read_bytes()
    gz = (CASES / "03_gzip_body.json.gz").read_bytes()
    a = client.post("/v1/traces", content=gz, headers={**JSON_HEADERS, "Content-Encoding": "gzip"})
    assert_ok(a)
    c = calls(client)
    assert len(c) == 1
    (call,) = c.values()
    assert (call["model"], call["input_tokens"], call["output_tokens"]) == ("gpt-4o", 1000, 200)
    assert close(call["cost_usd"], 0.0045)
    assert close(call["e2e_s"], 1.2)

    b = client.post(
        "/v1/traces", content=plain, headers={**JSON_HEADERS, "Content-Encoding": "gzip"}
    )
    assert b.status_code == 400
    assert "decompress" in b.json()["message"]

    br = client.post(
        "/v1/traces", content=plain, headers={**JSON_HEADERS, "Content-Encoding": "br"}
    )
    assert br.status_code == 415
    assert "'br'" in br.json()["message"]

    d = client.post(
        "/v1/traces", content=plain, headers={**JSON_HEADERS, "Content-Encoding": "identity"}
    )
    assert_ok(d)
    assert len(calls(client)) == 1  # A then D: the same span, stored once
    assert gzip.decompress(gz) == plain or json.loads(gzip.decompress(gz)) == json.loads(plain)


@pytest.mark.parametrize(
    "body",
    [
        None,  # the case file
        b"{}",
        b'{"resourceSpans":[]}',
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[]}]}',
    ],
)
def test_04_empty_requests(client: TestClient, body: bytes | None) -> None:
    content = body if body is not None else (CASES / "04_empty_resource_spans.json").read_bytes()
    assert_ok(client.post("/v1/traces", content=content, headers=JSON_HEADERS))
    assert calls(client) == {}


def test_04_zero_length_bodies(client: TestClient) -> None:
    r = client.post("/v1/traces", content=b"", headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-protobuf"
    assert r.content == b""  # ExportTraceServiceResponse with partial_success unset
    r = client.post("/v1/traces", content=b"", headers=JSON_HEADERS)
    assert r.status_code == 200


def test_05_empty_or_zero_parent_is_root(client: TestClient) -> None:
    assert_ok(post_case(client, "05_empty_parent_span_id.json"))
    c = calls(client)
    assert set(c) == {"0c02", "0d02"}  # the agent.run roots are spans, not LLM calls
    for sid in ("0c02", "0d02"):
        assert (c[sid]["input_tokens"], c[sid]["output_tokens"]) == (600, 90)
        assert close(c[sid]["cost_usd"], 0.000144)
    d = client.get(f"/api/v1/calls/{c['0d02']['trace_id']}:{c['0d02']['span_id']}").json()
    assert d["parent_span_id"] == "0000000000000d01"
    traces = {c[s]["trace_id"] for s in c}
    assert len(traces) == 2


def test_07_duplicate_delivery_stored_once(client: TestClient) -> None:
    for _ in range(2):
        assert_ok(post_case(client, "07_duplicate_span_retry.json"))
    c = calls(client)
    assert list(c) == ["1001"]
    assert (c["1001"]["input_tokens"], c["1001"]["output_tokens"]) == (1000, 200)
    assert close(c["1001"]["cost_usd"], 0.0045)
    assert len(calls(client, model="gpt-4o")) == 1


def test_08_negative_and_unset_durations(client: TestClient) -> None:
    assert_ok(post_case(client, "08_negative_and_unset_durations.json"))
    c = calls(client)
    for sid in ("1101", "1102", "1104"):
        assert (c[sid]["input_tokens"], c[sid]["output_tokens"]) == (100, 20)
        assert close(c[sid]["cost_usd"], 0.000027)
    assert c["1101"]["e2e_s"] is None and "invalid_timing" in c["1101"]["flags"]
    assert c["1102"]["e2e_s"] is None
    v = c["1103"]
    assert v["queue_s"] is None and "invalid_timing" in v["flags"]
    assert close(v["ttft_s"], 0.3) and close(v["e2e_s"], 2.0)
    assert (v["input_tokens"], v["output_tokens"]) == (300, 40)
    assert v["cost_usd"] is None and "unpriced" in v["flags"]
    assert close(c["1104"]["e2e_s"], 1.0)
    latencies = [x["e2e_s"] for x in c.values() if x["e2e_s"] is not None]
    assert sorted(latencies) == [1.0, 2.0]
    assert sum(latencies) / len(latencies) == 1.5
    for x in c.values():
        for f in ("e2e_s", "ttft_s", "queue_s", "tpot_s", "prefill_s", "decode_s"):
            assert x[f] is None or x[f] >= 0


def test_11_huge_attribute_keeps_usage(client: TestClient) -> None:
    assert_ok(post_case(client, "11_huge_attribute_value.json"))
    (call,) = calls(client).values()
    assert (call["input_tokens"], call["output_tokens"]) == (75000, 500)
    assert call["finish_reasons"] == ["stop"]
    assert close(call["cost_usd"], 0.1925)
    detail = client.get(f"/api/v1/calls/{call['call_id']}").json()
    raw = detail["spans"][0]["attributes"]["gen_ai.input.messages"]
    assert len(raw) == 300062  # stored in full
    assert call["input_text"] and len(call["input_text"]) >= 300000


def test_11_body_over_limit_is_413(db_url: str) -> None:
    from driftline.app import create_app
    from tests.conftest import make_settings

    settings = make_settings(db_url, grpc_enabled=False, max_body_bytes=100_000)
    with TestClient(create_app(settings)) as c:
        r = post_case(c, "11_huge_attribute_value.json")
        assert r.status_code == 413
        assert "100000" in r.json()["message"]
        assert c.get("/api/v1/calls").json()["items"] == []


def test_12_token_key_dialects(client: TestClient) -> None:
    assert_ok(post_case(client, "12_token_key_dialects.json"))
    c = calls(client)
    for sid in ("1501", "1502", "1503", "1504"):
        assert (c[sid]["input_tokens"], c[sid]["output_tokens"]) == (500, 100), sid
        assert close(c[sid]["cost_usd"], 0.000135)
    assert (c["1505"]["input_tokens"], c["1505"]["output_tokens"]) == (500, 0)
    assert close(c["1505"]["cost_usd"], 0.000075)
    assert sum(x["input_tokens"] for x in c.values()) == 2500
    assert sum(x["output_tokens"] for x in c.values()) == 400
    assert close(sum(x["cost_usd"] for x in c.values()), 0.000615)
    assert c["1504"]["dialect"] == "openinference"
    assert c["1501"]["dialect"] == "semconv-legacy"
    assert c["1501"]["provider"] == "openai"


def test_14_streaming_without_usage(client: TestClient) -> None:
    assert_ok(post_case(client, "14_streaming_missing_usage.json"))
    c = calls(client, model="gpt-4o")
    assert len(c) == 2
    m = c["1701"]
    assert m["input_tokens"] is None and m["output_tokens"] is None and m["cost_usd"] is None
    assert "usage_missing" in m["flags"]
    assert close(m["e2e_s"], 3.2)
    assert close(c["1702"]["cost_usd"], 0.0045)
    priced = [x["cost_usd"] for x in c.values() if x["cost_usd"] is not None]
    assert priced == [0.0045]
    assert sum(x["cost_usd"] is None for x in c.values()) == 1


def test_15_vllm_ttft_itl(client: TestClient) -> None:
    assert_ok(post_case(client, "15_vllm_ttft_itl.json"))
    c = calls(client)
    a, b, e = c["1801"], c["1802"], c["1803"]
    assert close(a["ttft_s"], 0.123) and close(a["e2e_s"], 1.5) and close(a["queue_s"], 0.01)
    assert (a["input_tokens"], a["output_tokens"]) == (230, 52)
    assert close(a["tpot_s"], 0.027)
    assert close(b["ttft_s"], 0.2) and (b["input_tokens"], b["output_tokens"]) == (40, 1)
    assert b["tpot_s"] is None
    assert e["ttft_s"] is None and e["tpot_s"] is None and close(e["e2e_s"], 0.8)
    assert (e["input_tokens"], e["output_tokens"]) == (500, 0)
    assert e["status"] == "error"
    ttfts = [x["ttft_s"] for x in c.values() if x["ttft_s"] is not None]
    assert math.isclose(sum(ttfts) / len(ttfts), 0.1615)
    assert all(x["cost_usd"] is None and "unpriced" in x["flags"] for x in c.values())
    assert all(x["dialect"] == "vllm" and x["provider"] == "vllm" for x in c.values())


def test_16_model_name_variants(client: TestClient) -> None:
    assert_ok(post_case(client, "16_model_name_variants.json"))
    c = calls(client)
    expected = {
        "1901": ("gpt-4o", 0.0045),
        "1902": ("gpt-4o", 0.0045),
        "1903": ("claude-sonnet-4", 0.006),
        "1904": ("gpt-4o-mini", 0.00027),
    }
    for sid, (model, cost) in expected.items():
        assert c[sid]["model"] == model, sid
        assert close(c[sid]["cost_usd"], cost), sid
    u = c["1905"]
    assert u["cost_usd"] is None and "unpriced" in u["flags"]
    assert (u["input_tokens"], u["output_tokens"]) == (1000, 200)
    assert u["request_model"] == "acme-finetune-v3"
    assert c["1902"]["response_model"] == "gpt-4o-2024-08-06"
    known = sum(x["cost_usd"] for x in c.values() if x["cost_usd"] is not None)
    assert close(known, 0.01527)
