"""CPU-heavy ingestion never runs on the event loop (issue 35, items 2 and 3): while a 30 MB
OTLP/JSON request is decoded and prepared, ``/healthz`` keeps answering. On main the decode (and,
with the spool off or a gateway key, normalisation and redaction) ran on the loop: one such
request made ``/healthz`` wait for seconds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from collector.auth import create_key
from collector.store import engine as store_engine
from tests.conftest import LiveCollector, make_settings
from tests.support import free_port

#: the longest /healthz may take while the big request is in flight. The issue asks ~0.5 s:
#: measured with the fix, 0.18 and 0.31 s at most (2-core VM at load average 7.7, ~250 probes
#: each); on main 2.7-7.5 s. Doubled here: the test shares its 2 cores with other work.
HEALTHZ_BOUND_S = 1.0


def _span(i: int) -> dict[str, Any]:
    text = {"stringValue": f"value {i} " * 4}
    attrs = [{"key": f"attr.{k}", "value": text} for k in range(24)]
    attrs.append({"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}})
    return {
        "traceId": f"{i + 1:032x}",
        "spanId": f"{i + 1:016x}",
        "name": f"chat m{i % 7}",
        "kind": 3,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + i),
        "endTimeUnixNano": str(1_700_000_000_500_000_000 + i),
        "attributes": attrs,
    }


def _big_json(size: int) -> bytes:
    one = len(json.dumps(_span(0)))
    spans = [_span(i) for i in range(size // one + 1)]
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    return json.dumps(doc).encode()


@pytest.fixture(params=["spool_off", "spool_external", "gateway_key"])
def collector(
    request: pytest.FixtureRequest, db_url: str
) -> Iterator[tuple[LiveCollector, dict[str, str]]]:
    """A live collector; ``gateway_key``: spool on, and the request comes with a gateway-role
    key (its requests bypass the spool: decoded and prepared by the receiver itself)."""
    if not db_url.startswith("sqlite"):
        pytest.skip("the event loop, not the store, is under test")
    gateway = request.param == "gateway_key"
    settings = make_settings(
        db_url,
        http_port=free_port(),
        grpc_enabled=False,
        scheduler_enabled=False,
        spool_enabled=request.param != "spool_off",
        spool_processor="external",  # the receiver alone (the default runs it elsewhere)
        dev=not gateway,
    )
    headers: dict[str, str] = {}
    if gateway:
        engine = store_engine.make_engine(db_url)
        key = create_key(engine, "platform", "gateway", tenants=["acme"])
        engine.dispose()
        headers["Authorization"] = f"Bearer {key}"
    lc = LiveCollector(settings).start()
    try:
        yield lc, headers
    finally:
        lc.stop()


def test_healthz_answers_while_a_30_mb_json_request_is_decoded(
    collector: tuple[LiveCollector, dict[str, str]],
) -> None:
    lc, headers = collector
    body = _big_json(30_000_000)
    result: dict[str, Any] = {}

    def send() -> None:
        r = httpx.post(
            f"{lc.http_url}/v1/traces",
            content=body,
            headers={"content-type": "application/json", **headers},
            timeout=300,
        )
        result["status"] = r.status_code

    with httpx.Client(base_url=lc.http_url, timeout=30) as probe:
        probe.get("/healthz")  # connection and route warm
        sender = threading.Thread(target=send)
        sender.start()
        latencies: list[float] = []
        while sender.is_alive():
            t0 = time.perf_counter()
            assert probe.get("/healthz").status_code == 200
            latencies.append(time.perf_counter() - t0)
            time.sleep(0.05)
        sender.join()
    assert result["status"] == 200
    assert max(latencies) < HEALTHZ_BOUND_S, sorted(latencies)[-5:]
    assert len(latencies) >= 5, "the request was too quick to probe"
