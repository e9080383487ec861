"""End to end (issue 8 "done when"): spans with a TTFT regression ingested over OTLP/HTTP into a
running collector -> the scheduler's alert jobs -> exactly one signed Alertmanager-format POST
to a real local receiver (verified with the ``standardwebhooks`` library) -> after recovery,
exactly one resolved POST. Short rule windows and group timers keep it within seconds."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.alerts.conftest import LOOPBACK_ALLOW, FakeClock, ScriptedReceiver
from tests.conftest import LiveCollector, free_port, make_settings, wait_for

RULE = {
    "kind": "threshold",
    "name": "ttft_p99_high",
    "stat": "ttft_s",
    "quantile": 0.99,
    "op": ">",
    "threshold": 1.0,
    "resolve_threshold": 0.5,
    "window_s": 2.0,
    "min_samples": 5,
    "for_s": 0,
    "resolve_for_s": 0,
    "filters": {"service_name": "chat-api"},
    "severity": "critical",
    "summary": "p99 TTFT {value} s > {threshold} s",
    "receivers": ["oncall"],
    "grouping": {"group_wait_s": 0, "group_interval_s": 1, "repeat_interval_s": 3600},
}


def otlp_spans(n: int, ttft_s: float) -> dict[str, Any]:
    """OTLP/JSON with ``n`` chat spans starting now whose TTFT is ``ttft_s`` seconds (rule
    windows select calls by start time)."""
    now_ns = time.time_ns()
    spans = []
    for _ in range(n):
        spans.append(
            {
                "traceId": os.urandom(16).hex(),
                "spanId": os.urandom(8).hex(),
                "name": "chat gpt-4o",
                "kind": 3,
                "startTimeUnixNano": str(now_ns),
                "endTimeUnixNano": str(now_ns + int((ttft_s + 0.05) * 1e9)),
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                    {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "100"}},
                    {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "20"}},
                    {
                        "key": "gen_ai.response.time_to_first_chunk",
                        "value": {"doubleValue": ttft_s},
                    },
                ],
            }
        )
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "chat-api"}}]
                },
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }


@pytest.fixture
def collector(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveCollector]:
    monkeypatch.setenv("DRIFTLINE_ALERT_EVAL_INTERVAL_S", "0.25")
    monkeypatch.setenv("DRIFTLINE_ALERT_DELIVERY_POLL_S", "0.1")
    monkeypatch.delenv("DRIFTLINE_ALERT_RECEIVERS_FILE", raising=False)
    settings = make_settings(
        db_url, http_port=free_port(), grpc_port=0, egress_allow=LOOPBACK_ALLOW
    )
    lc = LiveCollector(settings).start()
    try:
        yield lc
    finally:
        lc.stop()


def _ingest(c: httpx.Client, n: int, ttft_s: float) -> None:
    r = c.post("/v1/traces", json=otlp_spans(n, ttft_s))
    assert r.status_code == 200 and "partialSuccess" not in r.json(), r.text


def test_ttft_regression_pages_once_signed_then_resolves_once(
    collector: LiveCollector, receiver_server: ScriptedReceiver, clock: FakeClock
) -> None:
    with httpx.Client(base_url=collector.http_url, timeout=10) as c:
        r = c.post(
            "/api/v1/alerts/receivers",
            json={"name": "oncall", "kind": "alertmanager", "url": receiver_server.url},
        )
        assert r.status_code == 201, r.text
        hook = Webhook(r.json()["secret"])
        assert c.post("/api/v1/alerts/rules", json=RULE).status_code == 201

        # Healthy traffic: p99 TTFT 0.2 s, nothing is sent.
        for _ in range(4):
            _ingest(c, 10, 0.2)
            time.sleep(0.25)
        assert receiver_server.requests == []

        # Regression: p99 TTFT 3 s -> one firing notification.
        _ingest(c, 20, 3.0)
        wait_for(lambda: len(receiver_server.requests) >= 1, timeout_s=20)
        for _ in range(4):  # still regressed: no second page (repeat interval 1 h)
            _ingest(c, 10, 3.0)
            time.sleep(0.25)
        assert len(receiver_server.requests) == 1

        # Recovery: good spans until the bad ones leave the 2 s window -> one resolved.
        deadline = time.monotonic() + 30
        while len(receiver_server.requests) < 2 and time.monotonic() < deadline:
            _ingest(c, 10, 0.2)
            time.sleep(0.25)
        for _ in range(6):  # stays healthy: nothing more
            _ingest(c, 10, 0.2)
            time.sleep(0.25)

        bodies = []
        for req in receiver_server.requests:
            assert req.path == "/hook"
            assert req.headers["content-type"] == "application/json"
            assert req.headers["idempotency-key"] == req.headers["webhook-id"]
            hook.verify(req.body, req.headers)  # raises WebhookVerificationError if forged
            bodies.append(json.loads(req.body))
        assert [b["status"] for b in bodies] == ["firing", "resolved"]
        firing, resolved = bodies
        assert firing["version"] == "4" and firing["receiver"] == "oncall"
        assert firing["groupKey"] == resolved["groupKey"]
        assert firing["notification_reason"] == "first notification"
        (alert,) = firing["alerts"]
        assert alert["labels"]["alertname"] == "ttft_p99_high"
        assert alert["labels"]["severity"] == "critical"
        assert alert["endsAt"] == "0001-01-01T00:00:00Z"
        assert alert["annotations"]["summary"].endswith("s > 1 s")
        assert float(alert["annotations"]["summary"].split()[2]) > 1.0
        (ended,) = resolved["alerts"]
        assert ended["status"] == "resolved" and ended["fingerprint"] == alert["fingerprint"]
        assert ended["endsAt"] != "0001-01-01T00:00:00Z"
        ids = [r.headers["webhook-id"] for r in receiver_server.requests]
        assert len(set(ids)) == 2

        # The API tells the same story.
        hist = c.get("/api/v1/alerts", params={"status": "resolved"}).json()["items"]
        assert [a["fingerprint"] for a in hist] == [alert["fingerprint"]]
        deliveries = c.get("/api/v1/alerts/deliveries").json()["items"]
        assert sorted(d["id"] for d in deliveries) == sorted(ids)
        assert {d["status"] for d in deliveries} == {"delivered"}
        assert {d["attempts"] for d in deliveries} == {1}
