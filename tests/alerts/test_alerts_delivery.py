"""Case 23 (webhook receiver down) and delivery guarantees, against a real local HTTP server."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from alerts import outbox
from alerts.delivery import DeliveryWorker
from alerts.grouping import group_of
from alerts.payloads import render
from alerts.receivers import Receiver, ReceiverKind, StaticReceivers
from alerts.signing import generate_secret
from alerts.state import AlertStatus, new_alert
from collector.retry import RetryPolicy
from collector.store.engine import make_engine
from tests.alerts.conftest import LOOPBACK_EGRESS, FakeClock, ScriptedReceiver, Step

SECRET = generate_secret()


def _receiver(url: str, name: str = "oncall", kind: ReceiverKind = "alertmanager") -> Receiver:
    return Receiver(name=name, kind=kind, url=url, secret=SecretStr(SECRET))


def _enqueue_firing(engine: Engine, rcv: Receiver, now: float, rule: str = "ttft_p95_high") -> str:
    """Enqueue one firing notification for case 23's alert; returns its id."""
    from dataclasses import replace

    from alerts.grouping import Notification, notification_id

    a = new_alert(rule, {"service": "chat-api", "model": "gpt-4o", "severity": "warning"})
    a = replace(a, status=AlertStatus.FIRING, active_since=now, fired_at=now)
    g = group_of(rcv.name, a.labels, ("alertname",))
    n = Notification(
        id=notification_id("default", g.group_id, 1),
        tenant="default",
        receiver=rcv.name,
        group_id=g.group_id,
        group_key=g.group_key,
        group_labels=g.group_labels,
        status="firing",
        reason="first notification",
        alerts=(a,),
        created_at=now,
    )
    with Session(engine) as s, s.begin():
        outbox.enqueue_notification(s, n, rcv.kind, render(n, rcv))
    return n.id


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    e = make_engine(sqlite_url)
    yield e
    e.dispose()


def _worker(
    engine: Engine,
    rcvs: list[Receiver],
    clock: FakeClock,
    registry: CollectorRegistry,
    policy: RetryPolicy | None = None,
) -> DeliveryWorker:
    return DeliveryWorker(
        engine,
        StaticReceivers(rcvs),
        registry=registry,
        rng=np.random.default_rng(23),
        policy=policy or RetryPolicy(request_timeout_s=0.5),
        egress_policy=LOOPBACK_EGRESS,
        clock=clock.now,
        sleep=clock.sleep,
    )


def _attempt_when_due(worker: DeliveryWorker, engine: Engine, clock: FakeClock) -> int:
    due = outbox.next_due_at(engine)
    assert due is not None
    clock.advance_to(due)
    return worker.run_once()


def test_case23_a_transient_outage(
    sqlite_engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    rcv = _receiver(receiver_server.url)
    reg = CollectorRegistry()
    worker = _worker(sqlite_engine, [rcv], clock, reg)
    nid = _enqueue_firing(sqlite_engine, rcv, clock.now())
    times: list[float] = []

    receiver_server.script = [Step(503)]
    times.append(clock.now())
    assert _attempt_when_due(worker, sqlite_engine, clock) == 1  # 1: 503
    receiver_server.stop()  # 2: connection refused
    times.append(outbox.next_due_at(sqlite_engine) or 0)
    assert _attempt_when_due(worker, sqlite_engine, clock) == 1
    receiver_server.start()
    receiver_server.script = [Step(503, {"Retry-After": "2"}), Step(200)]
    for _ in range(2):  # 3: 503 + Retry-After 2; 4: 200
        times.append(outbox.next_due_at(sqlite_engine) or 0)
        _attempt_when_due(worker, sqlite_engine, clock)
    assert outbox.next_due_at(sqlite_engine) is None  # nothing more to send
    assert worker.run_pending() == 0

    reqs = receiver_server.requests
    assert [r.status for r in reqs] == [503, 503, 200]  # attempt 2 never reached the server
    item = outbox.get(sqlite_engine, "default", nid)
    assert item.status == "delivered" and item.attempts == 4
    delays = np.diff(times)
    assert delays[2] >= 2.0  # before attempt 4: honours Retry-After
    assert all(d2 >= d1 for d1, d2 in itertools.pairwise(delays))
    assert len({r.body for r in reqs}) == 1
    assert {r.headers["webhook-id"] for r in reqs} == {nid}
    assert {r.headers["idempotency-key"] for r in reqs} == {nid}
    for r in reqs:
        Webhook(SECRET).verify(r.body, r.headers)
    body = json.loads(reqs[0].body)
    assert body["version"] == "4" and body["status"] == "firing"
    assert body["alerts"][0]["labels"]["service"] == "chat-api"
    assert (
        reg.get_sample_value(
            "driftline_alert_notifications_delivered_total",
            {"tenant": "default", "receiver": "oncall"},
        )
        == 1.0
    )
    assert (
        reg.get_sample_value(
            "driftline_alert_delivery_attempts_total",
            {"tenant": "default", "receiver": "oncall", "result": "retry"},
        )
        == 3.0
    )
    worker.close()


def test_case23_b_permanent_client_error(
    sqlite_engine: Engine,
    clock: FakeClock,
    receiver_server: ScriptedReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rcv = _receiver(receiver_server.url)
    reg = CollectorRegistry()
    worker = _worker(sqlite_engine, [rcv], clock, reg)
    nid = _enqueue_firing(sqlite_engine, rcv, clock.now())
    receiver_server.script = [Step(400)]
    worker.run_pending()
    assert len(receiver_server.requests) == 1
    item = outbox.get(sqlite_engine, "default", nid)
    assert (item.status, item.attempts, item.last_status_code) == ("failed", 1, 400)
    assert item.failure_reason == "permanent"
    assert "failed after 1 attempt(s) (permanent): HTTP 400" in caplog.text
    assert (
        reg.get_sample_value(
            "driftline_alert_notifications_failed_total",
            {"tenant": "default", "receiver": "oncall", "reason": "permanent"},
        )
        == 1.0
    )
    worker.close()


def test_case23_c_long_outage_gives_up(
    sqlite_engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    receiver_server.default = Step(503)
    rcv = _receiver(receiver_server.url)
    reg = CollectorRegistry()
    policy = RetryPolicy(max_attempts=8, max_age_s=900, request_timeout_s=0.5)
    worker = _worker(sqlite_engine, [rcv], clock, reg, policy)
    start = clock.now()
    nid = _enqueue_firing(sqlite_engine, rcv, start)
    worker.run_pending(until=start + 3600)
    reqs = receiver_server.requests
    assert len(reqs) == 8
    assert reqs[-1].at - start <= 900
    gaps = np.diff([r.at for r in reqs])
    assert np.all(np.diff(gaps) >= 0) and gaps[0] > 0
    item = outbox.get(sqlite_engine, "default", nid)
    assert (item.status, item.failure_reason, item.last_status_code) == (
        "failed",
        "max_attempts",
        503,
    )
    assert (
        reg.get_sample_value(
            "driftline_alert_notifications_failed_total",
            {"tenant": "default", "receiver": "oncall", "reason": "max_attempts"},
        )
        == 1.0
    )
    assert reg.get_sample_value("driftline_alert_outbox_notifications", {"status": "failed"}) == 1.0
    assert (
        reg.get_sample_value("driftline_alert_outbox_notifications", {"status": "pending"}) == 0.0
    )
    worker.close()


def test_max_age_bounds_attempts(
    sqlite_engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    receiver_server.default = Step(503)
    rcv = _receiver(receiver_server.url)
    policy = RetryPolicy(max_attempts=100, max_age_s=900, max_delay_s=120, request_timeout_s=0.5)
    worker = _worker(sqlite_engine, [rcv], clock, CollectorRegistry(), policy)
    start = clock.now()
    nid = _enqueue_firing(sqlite_engine, rcv, start)
    worker.run_pending(until=start + 3600)
    item = outbox.get(sqlite_engine, "default", nid)
    assert item.failure_reason == "max_age"
    assert max(r.at for r in receiver_server.requests) - start <= 900
    assert len(receiver_server.requests) < 100
    worker.close()


def test_case23_d_hanging_receiver_times_out(
    sqlite_engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    rcv = _receiver(receiver_server.url)
    worker = _worker(
        sqlite_engine, [rcv], clock, CollectorRegistry(), RetryPolicy(request_timeout_s=0.3)
    )
    nid = _enqueue_firing(sqlite_engine, rcv, clock.now())
    receiver_server.script = [Step(hang_s=2.0), Step(200)]
    assert worker.run_once() == 1
    item = outbox.get(sqlite_engine, "default", nid)
    assert item.status == "pending" and item.last_status_code is None
    assert item.last_error is not None and item.last_error.startswith("timeout")
    worker.run_pending()
    item = outbox.get(sqlite_engine, "default", nid)
    assert (item.status, item.attempts) == ("delivered", 2)
    worker.close()


def test_hanging_receiver_does_not_block_others(
    sqlite_engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    other = ScriptedReceiver(clock)
    other.start()
    try:
        slow, fast = _receiver(receiver_server.url, "slow"), _receiver(other.url, "fast")
        worker = _worker(
            sqlite_engine,
            [slow, fast],
            clock,
            CollectorRegistry(),
            RetryPolicy(request_timeout_s=0.5),
        )
        receiver_server.default = Step(hang_s=2.0)
        _enqueue_firing(sqlite_engine, slow, clock.now())
        fid = _enqueue_firing(sqlite_engine, fast, clock.now(), rule="error_rate_high")
        worker.run_once()
        assert outbox.get(sqlite_engine, "default", fid).status == "delivered"
        assert len(other.requests) == 1
        worker.close()
    finally:
        other.stop()


def test_outbox_survives_restart_mid_retry(
    sqlite_url: str, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    rcv = _receiver(receiver_server.url)
    e1 = make_engine(sqlite_url)
    w1 = _worker(e1, [rcv], clock, CollectorRegistry())
    nid = _enqueue_firing(e1, rcv, clock.now())
    receiver_server.script = [Step(503), Step(503)]
    w1.run_once()
    clock.advance_to(outbox.next_due_at(e1) or 0)
    w1.run_once()
    w1.close()
    e1.dispose()  # "process" gone mid-retry

    e2 = make_engine(sqlite_url)
    w2 = _worker(e2, [rcv], clock, CollectorRegistry())
    assert outbox.get(e2, "default", nid).attempts == 2
    w2.run_pending()
    item = outbox.get(e2, "default", nid)
    assert (item.status, item.attempts) == ("delivered", 3)
    reqs = receiver_server.requests
    assert [r.status for r in reqs] == [503, 503, 200]
    assert len({r.body for r in reqs}) == 1 and {r.headers["webhook-id"] for r in reqs} == {nid}
    w2.close()
    e2.dispose()


def test_lease_hides_claimed_row_until_it_expires(sqlite_engine: Engine, clock: FakeClock) -> None:
    rcv = _receiver("http://127.0.0.1:9/never")
    nid = _enqueue_firing(sqlite_engine, rcv, clock.now())
    first = outbox.claim_due(sqlite_engine, clock.now(), limit=10, lease_s=40)
    assert [i.id for i in first] == [nid]
    assert outbox.claim_due(sqlite_engine, clock.now(), limit=10, lease_s=40) == []
    again = outbox.claim_due(sqlite_engine, clock.now() + 41, limit=10, lease_s=40)
    assert [i.id for i in again] == [nid]  # a crashed worker's row comes back


def test_unknown_receiver_is_failed_and_counted(sqlite_engine: Engine, clock: FakeClock) -> None:
    rcv = _receiver("http://127.0.0.1:9/never", name="gone")
    nid = _enqueue_firing(sqlite_engine, rcv, clock.now())
    reg = CollectorRegistry()
    worker = _worker(sqlite_engine, [], clock, reg)
    assert worker.run_once() == 0
    assert outbox.get(sqlite_engine, "default", nid).failure_reason == "unknown_receiver"
    assert (
        reg.get_sample_value(
            "driftline_alert_notifications_failed_total",
            {"tenant": "default", "receiver": "gone", "reason": "unknown_receiver"},
        )
        == 1.0
    )
    worker.close()
