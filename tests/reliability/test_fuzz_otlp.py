"""10,000 generated OTLP bodies sent to ``POST /v1/traces`` of the app in-process (``--dev``,
SQLite): never a 5xx, never an unhandled exception (TestClient re-raises them), and the app
still healthy and ingesting afterwards.

Bodies per test in ``EXAMPLES``: valid protobuf messages with random fields, mangled protobuf
(truncated, bit-flipped, garbage appended), random bytes (also claiming gzip/deflate), deeply
nested protobuf, OTLP/JSON documents and junk, deeply nested JSON.
Generation is derandomized (fixed seed) and deadline-free so CI runs the same bodies each time.
"""

from __future__ import annotations

import gzip
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from driftline.app import create_app
from tests.conftest import make_settings
from tests.reliability import otlp_strategies as gen

settings.register_profile(
    "reliability-fuzz",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("reliability-fuzz")
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: what a client's mistake may earn; 5xx never
CLIENT_ANSWERS = {200, 400, 413, 415}
#: bodies per test; 10,000 in all
EXAMPLES = {
    "valid_protobuf": 1500,
    "mangled_protobuf": 1500,
    "random_bytes": 1500,
    "deep_protobuf": 300,
    "json": 4700,
    "deep_json": 500,
}
ENCODE: dict[str, Callable[[bytes], bytes]] = {
    "identity": lambda b: b,
    "gzip": gzip.compress,
    "deflate": zlib.compress,
}


@pytest.fixture(scope="module")
def app_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.db"
    app = create_app(make_settings(f"sqlite:///{db}", grpc_enabled=False, scheduler_enabled=False))
    with TestClient(app) as client:  # raise_server_exceptions: an unhandled error fails
        yield client


def post(client: TestClient, body: bytes, media: str, encoding: str = "identity") -> int:
    """POST ``body``; assert a client-error-or-OK answer in the request's encoding."""
    headers = {"Content-Type": media}
    if encoding != "identity":
        headers["Content-Encoding"] = encoding
    r = client.post("/v1/traces", content=ENCODE[encoding](body), headers=headers)
    assert r.status_code in CLIENT_ANSWERS, (r.status_code, r.text[:500])
    if r.status_code == 200 and media == PROTOBUF:
        ExportTraceServiceResponse.FromString(r.content)
    elif r.status_code == 200:
        r.json()
    return r.status_code


def assert_healthy(client: TestClient) -> None:
    """/healthz is 200 and a well-formed span is still ingested and readable."""
    assert client.get("/healthz").status_code == 200
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x7f" * 16, b"\x7e" * 8, "chat gpt-4o"
    kv = span.attributes.add()
    kv.key, kv.value.string_value = "gen_ai.request.model", "gpt-4o"
    assert post(client, req.SerializeToString(), PROTOBUF) == 200
    r = client.get("/api/v1/calls", params={"trace_id": "7f" * 16})
    assert r.status_code == 200
    assert any(c["span_id"] == "7e" * 8 for c in r.json()["items"])


encodings = st.sampled_from(list(ENCODE))


def check(client: TestClient, answers: Counter[int], examples: int) -> None:
    """Every example ran (no early stop) and the app is healthy afterwards."""
    print(f"{examples} bodies: answers {dict(answers)}")
    assert sum(answers.values()) == examples
    assert_healthy(client)


@pytest.mark.slow
def test_fuzz_valid_protobuf_messages(app_client: TestClient) -> None:
    answers: Counter[int] = Counter()

    @settings(FUZZ, max_examples=EXAMPLES["valid_protobuf"])
    @given(gen.protobuf_requests(), encodings)
    def run(req: ExportTraceServiceRequest, encoding: str) -> None:
        answers[post(app_client, req.SerializeToString(), PROTOBUF, encoding)] += 1

    run()
    check(app_client, answers, EXAMPLES["valid_protobuf"])
    assert answers[200] > EXAMPLES["valid_protobuf"] // 2  # mostly accepted (partial success)


@pytest.mark.slow
def test_fuzz_mangled_protobuf(app_client: TestClient) -> None:
    answers: Counter[int] = Counter()

    @settings(FUZZ, max_examples=EXAMPLES["mangled_protobuf"])
    @given(gen.mangled_protobuf())
    def run(body: bytes) -> None:
        answers[post(app_client, body, PROTOBUF)] += 1

    run()
    check(app_client, answers, EXAMPLES["mangled_protobuf"])
    assert answers[400] > 0 and answers[200] > 0


def test_fuzz_random_bytes(app_client: TestClient) -> None:
    answers: Counter[int] = Counter()

    @settings(FUZZ, max_examples=EXAMPLES["random_bytes"])
    @given(st.binary(max_size=512), st.sampled_from([PROTOBUF, JSON]), encodings, st.booleans())
    def run(body: bytes, media: str, encoding: str, raw: bool) -> None:
        if raw and encoding != "identity":  # a body that claims an encoding it does not have
            r = app_client.post(
                "/v1/traces",
                content=body,
                headers={"Content-Type": media, "Content-Encoding": encoding},
            )
            assert r.status_code in CLIENT_ANSWERS, (r.status_code, r.text[:500])
            answers[r.status_code] += 1
        else:
            answers[post(app_client, body, media, encoding)] += 1

    run()
    check(app_client, answers, EXAMPLES["random_bytes"])


def test_fuzz_deeply_nested_protobuf(app_client: TestClient) -> None:
    answers: Counter[int] = Counter()

    @settings(FUZZ, max_examples=EXAMPLES["deep_protobuf"])
    @given(gen.deep_protobuf_bodies)
    def run(body: bytes) -> None:
        answers[post(app_client, body, PROTOBUF)] += 1

    run()
    check(app_client, answers, EXAMPLES["deep_protobuf"])
    # shallow ones stored; a span too deep for upb is rejected alone in partialSuccess (200)
    assert answers[200] == EXAMPLES["deep_protobuf"]


@pytest.mark.slow
def test_fuzz_json_bodies(app_client: TestClient) -> None:
    answers: Counter[int] = Counter()

    @settings(FUZZ, max_examples=EXAMPLES["json"])
    @given(gen.json_bodies, encodings)
    def run(body: bytes, encoding: str) -> None:
        answers[post(app_client, body, JSON, encoding)] += 1

    run()
    check(app_client, answers, EXAMPLES["json"])
    assert answers[200] > 0 and answers[400] > 0


def test_fuzz_deeply_nested_json(app_client: TestClient) -> None:
    answers: Counter[int] = Counter()

    @settings(FUZZ, max_examples=EXAMPLES["deep_json"])
    @given(gen.deep_json_bodies)
    def run(body: bytes) -> None:
        answers[post(app_client, body, JSON)] += 1

    run()
    check(app_client, answers, EXAMPLES["deep_json"])


def test_the_budget_is_ten_thousand_bodies() -> None:
    assert sum(EXAMPLES.values()) == 10_000


def _span_request(start_unix_nano: int = 1, **attrs: float) -> bytes:
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x5a" * 16, b"\x5b" * 8, "chat gpt-4o"
    span.start_time_unix_nano, span.end_time_unix_nano = start_unix_nano, start_unix_nano
    kv = span.attributes.add()
    kv.key, kv.value.string_value = "gen_ai.request.model", "gpt-4o"
    for key, value in attrs.items():
        kv = span.attributes.add()
        kv.key, kv.value.double_value = key, value
    return req.SerializeToString()


VALID_JSON_SPAN = '{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"}'


def test_regressions_found_by_fuzzing(app_client: TestClient) -> None:
    """Bodies that answered 500 before: a time past 2^63 - 1 ns, a token count past 2^63 - 1
    (both overflowed the store's signed 64-bit integers), JSON nested past Python's stack,
    ``scopeSpans`` / ``resource`` of the wrong JSON type."""
    r = app_client.post(
        "/v1/traces", content=_span_request(2**63), headers={"Content-Type": PROTOBUF}
    )
    assert r.status_code == 200
    assert ExportTraceServiceResponse.FromString(r.content).partial_success.rejected_spans == 1

    body = _span_request(10**18, **{"gen_ai.usage.input_tokens": 9.3e18})
    assert post(app_client, body, PROTOBUF) == 200
    [call] = app_client.get("/api/v1/calls", params={"trace_id": "5a" * 16}).json()["items"]
    assert call["input_tokens"] is None and "invalid_usage" in call["flags"]

    assert post(app_client, b"[" * 5000 + b"]" * 5000, JSON) == 400
    r = app_client.post(
        "/v1/traces",
        content=b'{"resourceSpans":[{"scopeSpans":5}]}',
        headers={"Content-Type": JSON},
    )
    assert r.status_code == 200, r.text
    bad_resource = (
        '{"resourceSpans":[{"resource":5,"scopeSpans":[{"spans":[' + VALID_JSON_SPAN + "]}]}]}"
    )
    r = app_client.post("/v1/traces", content=bad_resource, headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text
    assert r.json()["partialSuccess"]["rejectedSpans"] in (1, "1")
