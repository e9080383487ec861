"""Store-backed alerting on SQLite and PostgreSQL: schema, evaluation, grouping, silences,
acknowledgement, and a flapping metric end to end to a real local receiver."""

from __future__ import annotations

import json

import numpy as np
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from sqlalchemy import Engine, inspect
from sqlalchemy.orm import Session

from alerts import outbox, store
from alerts.delivery import DeliveryWorker
from alerts.evaluate import EvaluationResult, evaluate_rules
from alerts.grouping import Matcher
from alerts.receivers import Receiver, StaticReceivers
from alerts.rules import AlertEvent, EventRule, Grouping, Sample, Series, ThresholdRule
from alerts.state import AlertStatus
from collector.retry import RetryPolicy
from collector.store.engine import downgrade, make_engine, upgrade
from collector.store.models import Base
from tests.alerts.conftest import LOOPBACK_EGRESS, FakeClock, ScriptedReceiver

MINE = {
    "alert_rules",
    "alert_receivers",
    "alerts",
    "alert_groups",
    "alert_silences",
    "alert_notifications",
    "alert_events",
}
T0 = 1_800_000_000.0
GROUPING = Grouping(group_wait_s=30, group_interval_s=300, repeat_interval_s=4 * 3600)
TTFT = ThresholdRule(
    name="ttft_p99_high",
    stat="ttft_s",
    quantile=0.99,
    threshold=2.0,
    resolve_threshold=1.5,
    for_s=120,
    resolve_for_s=120,
    receivers=("oncall",),
    grouping=GROUPING,
    summary="p99 TTFT {value} s > {threshold} s",
    filters={"service_name": "chat-api"},
)
RCV = StaticReceivers([Receiver(name="oncall", kind="alertmanager", url="http://127.0.0.1:9/x")])


def _eval(
    engine: Engine,
    rules: list,
    now: float,
    *,
    values: dict[str, float | None] | None = None,
    events: tuple[AlertEvent, ...] = (),
    receivers: StaticReceivers = RCV,
) -> EvaluationResult:
    series = {
        name: [Series(labels={"model": "gpt-4o"}, samples=(Sample(now, v),))]
        for name, v in (values or {}).items()
    }
    with Session(engine) as s, s.begin():
        return evaluate_rules(
            s, "default", rules, now=now, receivers=receivers, series=series, events=events
        )


def test_schema_matches_models_and_walks_down(db_url: str, engine: Engine) -> None:
    with engine.connect() as c:
        diff = compare_metadata(
            MigrationContext.configure(c, opts={"compare_type": True}), Base.metadata
        )
        assert set(inspect(c).get_table_names()) >= MINE
    mine = [d for d in diff if any(t in repr(d) for t in MINE)]
    assert mine == []
    downgrade(db_url, "0001")
    with engine.connect() as c:
        assert not MINE & set(inspect(c).get_table_names())
    upgrade(db_url)


def test_firing_persists_and_notifies_once(engine: Engine) -> None:
    for i in range(5):  # breach held 120 s at i=4
        r = _eval(engine, [TTFT], T0 + 30 * i, values={"ttft_p99_high": 3.0})
    (alert,) = r.alerts
    assert alert.status is AlertStatus.FIRING and alert.fired_at == T0 + 120
    assert alert.labels == {"model": "gpt-4o", "alertname": "ttft_p99_high", "severity": "warning"}
    assert r.notifications == ()  # group_wait
    r = _eval(engine, [TTFT], T0 + 150)  # no new sample: timers still run
    assert len(r.notifications) == 1
    (item,) = outbox.list_items(engine, "default")
    body = json.loads(item.payload)
    assert body["status"] == "firing" and body["alerts"][0]["annotations"]["summary"] == (
        "p99 TTFT 3 s > 2 s"
    )
    with Session(engine) as s:
        stored = store.load_alerts(s, "default")
    assert stored[alert.fingerprint].status is AlertStatus.FIRING
    assert stored[alert.fingerprint].last_value == 3.0
    for t in (T0 + 160, T0 + 500):
        assert _eval(engine, [TTFT], t, values={"ttft_p99_high": 3.0}).notifications == ()
    assert len(outbox.list_items(engine, "default")) == 1


def test_silence_and_acknowledgement(engine: Engine) -> None:
    with Session(engine) as s, s.begin():
        sil = store.create_silence(
            s,
            "default",
            [Matcher("model", "gpt-4o")],
            starts_at=T0,
            ends_at=T0 + 3600,
            now=T0,
            created_by="bob",
        )
    for i in range(10):
        r = _eval(engine, [TTFT], T0 + 30 * i, values={"ttft_p99_high": 3.0})
        assert r.notifications == ()
    with Session(engine) as s, s.begin():
        assert [x.id for x in store.active_silences(s, "default", T0 + 300)] == [sil.id]
        store.expire_silence(s, "default", sil.id, now=T0 + 300)
        assert store.active_silences(s, "default", T0 + 301) == []
    _eval(engine, [TTFT], T0 + 301)
    assert len(_eval(engine, [TTFT], T0 + 331).notifications) == 1
    (alert,) = _eval(engine, [TTFT], T0 + 332).alerts
    with Session(engine) as s, s.begin():
        acked = store.acknowledge_alert(s, "default", alert.fingerprint, by="alice", now=T0 + 340)
    assert acked.acked_by == "alice"
    # Past repeat_interval: an acknowledged alert is not repeated.
    assert _eval(engine, [TTFT], T0 + 331 + 4 * 3600 + 1).notifications == ()


def test_event_rule_fires_and_auto_resolves(engine: Engine) -> None:
    rule = EventRule(
        name="canary_rolled_back",
        event="canary_rollback",
        severity="critical",
        resolve_after_s=600,
        receivers=("oncall",),
        grouping=Grouping(group_wait_s=0, group_interval_s=60),
    )
    ev = AlertEvent(
        kind="canary_rollback",
        at=T0,
        labels={"rollout": "r1"},
        annotations={"reason": "harm e-value 31 > 20"},
    )
    r = _eval(engine, [rule], T0, events=(ev,))
    assert len(r.notifications) == 1 and r.notifications[0].status == "firing"
    assert r.alerts[0].annotations["reason"] == "harm e-value 31 > 20"
    assert _eval(engine, [rule], T0 + 300).notifications == ()
    r = _eval(engine, [rule], T0 + 600)
    assert [n.status for n in r.notifications] == ["resolved"]
    with Session(engine) as s, s.begin():
        store.save_rule(s, "default", rule, enabled=True, now=T0)
        store.save_rule(s, "default", TTFT, enabled=False, now=T0)
    with Session(engine) as s:
        assert store.load_rules(s, "default") == [rule]


def test_receivers_round_trip_through_table(engine: Engine) -> None:
    r = Receiver(
        name="pd",
        kind="pagerduty",
        url="https://events.pagerduty.com/v2/enqueue",
        routing_key=SecretStr("r" * 32),
        max_alerts=5,
        headers={"x-team": "ml"},
    )
    with Session(engine) as s, s.begin():
        store.save_receiver(s, r, now=T0)
    with Session(engine) as s:
        assert store.load_db_receivers(s).get("default", "pd") == r


def test_flapping_metric_gives_one_firing_and_one_resolved(
    engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    rcvs = StaticReceivers([Receiver(name="oncall", kind="alertmanager", url=receiver_server.url)])
    values = (
        [2.5, 1.9, 2.6, 1.8, 2.4, 1.9, 2.7, 1.9, 2.5, 1.9]  # flaps around 2.0: never held 120 s
        + [3.0] * 10  # sustained breach: fires
        + [1.8, 2.3, 1.6, 2.2, 1.7, 2.4, 1.9, 2.1]  # inside the hysteresis band: stays firing
        + [1.4, 1.0, 1.2, 1.6, 1.3, 1.0, 1.1, 1.2, 1.0, 1.3]  # dips below 1.5, one bounce
        + [1.0] * 20
    )
    start = clock.now()
    for i, v in enumerate(values):
        _eval(engine, [TTFT], start + 30 * i, values={"ttft_p99_high": v}, receivers=rcvs)
    items = outbox.list_items(engine, "default")
    assert len(items) == 2
    worker = DeliveryWorker(
        engine,
        rcvs,
        registry=CollectorRegistry(),
        rng=np.random.default_rng(1),
        clock=clock.now,
        sleep=clock.sleep,
        policy=RetryPolicy(request_timeout_s=2),
        egress_policy=LOOPBACK_EGRESS,
    )
    clock.advance_to(start + 30 * len(values))
    worker.run_pending()
    worker.close()
    bodies = [json.loads(r.body) for r in receiver_server.requests]
    assert [b["status"] for b in bodies] == ["firing", "resolved"]
    assert bodies[1]["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"
    assert len({r.headers["webhook-id"] for r in receiver_server.requests}) == 2


def test_outbox_claims_once_on_store(engine: Engine) -> None:
    with Session(engine) as s, s.begin():
        assert outbox.enqueue(
            s,
            tenant="default",
            notification_id="msg_1",
            receiver="oncall",
            fmt="generic",
            body=b"{}",
            now=T0,
        )
    with Session(engine) as s, s.begin():
        assert not outbox.enqueue(
            s,
            tenant="default",
            notification_id="msg_1",
            receiver="oncall",
            fmt="generic",
            body=b"{}",
            now=T0,
        )
    assert [i.id for i in outbox.claim_due(engine, T0, limit=5, lease_s=10)] == ["msg_1"]
    assert outbox.claim_due(engine, T0 + 5, limit=5, lease_s=10) == []
    assert outbox.next_due_at(engine) == T0 + 10
    item = outbox.get(engine, "default", "msg_1")
    outbox.mark_failed(engine, item, now=T0 + 11, reason="permanent")
    assert outbox.count_by_status(engine) == {"failed": 1}
    outbox.redeliver(engine, "default", "msg_1", T0 + 20)
    again = outbox.get(engine, "default", "msg_1")
    assert (again.status, again.attempts, again.payload) == ("pending", 0, b"{}")


def test_second_engine_sees_committed_state(db_url: str, engine: Engine) -> None:
    for i in range(5):
        _eval(engine, [TTFT], T0 + 30 * i, values={"ttft_p99_high": 3.0})
    other = make_engine(db_url)
    try:
        assert len(_eval(other, [TTFT], T0 + 150).notifications) == 1
    finally:
        other.dispose()


def test_group_notifications_are_delivered_in_order(
    engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    """A group's resolved notification waits until its firing one is delivered, even when the
    firing one needs a retry and the worker sends several notifications in parallel."""
    from tests.alerts.conftest import Step

    rcvs = StaticReceivers([Receiver(name="oncall", kind="alertmanager", url=receiver_server.url)])
    fast = TTFT.model_copy(
        update={
            "for_s": 0,
            "resolve_for_s": 0,
            "grouping": Grouping(group_wait_s=0, group_interval_s=0),
        }
    )
    start = clock.now()
    assert (
        len(
            _eval(
                engine, [fast], start, values={"ttft_p99_high": 3.0}, receivers=rcvs
            ).notifications
        )
        == 1
    )
    assert (
        len(
            _eval(
                engine, [fast], start + 1, values={"ttft_p99_high": 1.0}, receivers=rcvs
            ).notifications
        )
        == 1
    )
    firing, resolved = sorted(outbox.list_items(engine, "default"), key=lambda i: i.seq or 0)
    assert (firing.seq, resolved.seq) == (1, 2)
    # Both are due; only the head of the group may be claimed.
    assert [i.id for i in outbox.claim_due(engine, start + 2, limit=10, lease_s=0.5)] == [firing.id]
    assert outbox.claim_due(engine, start + 2, limit=10, lease_s=0.5) == []  # in flight: blocks
    receiver_server.script = [Step(503)]
    worker = DeliveryWorker(
        engine,
        rcvs,
        registry=CollectorRegistry(),
        rng=np.random.default_rng(2),
        clock=clock.now,
        sleep=clock.sleep,
        policy=RetryPolicy(request_timeout_s=2),
        egress_policy=LOOPBACK_EGRESS,
        concurrency=4,
    )
    clock.advance_to(start + 3)  # the lease has ended
    worker.run_pending()
    worker.close()
    got = [(json.loads(r.body)["status"], r.status) for r in receiver_server.requests]
    assert got == [("firing", 503), ("firing", 200), ("resolved", 200)]
    assert receiver_server.requests[2].at >= receiver_server.requests[1].at
    assert outbox.count_by_status(engine) == {"delivered": 2}
