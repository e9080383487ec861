"""Pure logic: rules, state machine, grouping timers, silences, retry policy, signing, payloads."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import replace

import numpy as np
import pytest
from pydantic import SecretStr, ValidationError
from standardwebhooks import Webhook

from alerts.evaluate import apply_events
from alerts.grouping import GroupState, Matcher, Silence, group_of, plan_group
from alerts.payloads import quote_meta, render
from alerts.receivers import Receiver
from alerts.rules import (
    AlertEvent,
    Breach,
    EventRule,
    Grouping,
    ThresholdRule,
    breach_of,
    event_breach,
    parse_rule,
    render_summary,
)
from alerts.signing import generate_secret, secret_key, sign, verify
from alerts.state import (
    AlertState,
    AlertStatus,
    acknowledge,
    fingerprint,
    new_alert,
    step,
)
from collector.retry import (
    Outcome,
    RetryPolicy,
    backoff_delay,
    classify,
    parse_retry_after,
    schedule_retry,
)

T0 = 1_800_000_000.0
TTFT = ThresholdRule(
    name="ttft_p99_high",
    stat="ttft_s",
    quantile=0.99,
    op=">",
    threshold=2.0,
    resolve_threshold=1.5,
    for_s=300,
    resolve_for_s=120,
    receivers=("oncall",),
)


def test_rule_round_trips_and_validates() -> None:
    spec = TTFT.model_dump(mode="json")
    assert parse_rule(spec) == TTFT
    ev = parse_rule({"kind": "event", "name": "rb", "event": "canary_rollback", "receivers": ["p"]})
    assert isinstance(ev, EventRule)
    with pytest.raises(ValidationError, match="resolve_threshold"):
        ThresholdRule(
            name="x", stat="ttft_s", threshold=2.0, resolve_threshold=3.0, receivers=("r",)
        )
    with pytest.raises(ValidationError, match="label name"):
        ThresholdRule(
            name="x", stat="error_rate", threshold=0.1, labels={"bad-name": "v"}, receivers=("r",)
        )
    with pytest.raises(ValidationError):
        ThresholdRule(name="x", stat="kv_cache_usage", threshold=0.9, receivers=())


def test_hysteresis_band() -> None:
    assert breach_of(TTFT, 2.1, firing=False) is Breach.BREACHING
    assert breach_of(TTFT, 1.8, firing=False) is Breach.CLEAR
    assert breach_of(TTFT, 1.8, firing=True) is Breach.BREACHING  # inside the band: keep firing
    assert breach_of(TTFT, 1.4, firing=True) is Breach.CLEAR
    assert breach_of(TTFT, None, firing=True) is Breach.UNKNOWN
    low = ThresholdRule(
        name="judge_low",
        stat="judge_score",
        op="<",
        threshold=3.5,
        resolve_threshold=3.8,
        receivers=("r",),
    )
    assert breach_of(low, 3.4, firing=False) is Breach.BREACHING
    assert breach_of(low, 3.6, firing=True) is Breach.BREACHING
    assert breach_of(low, 3.9, firing=True) is Breach.CLEAR


def _run(values: list[float | None], rule: ThresholdRule = TTFT, dt: float = 60) -> AlertState:
    a = new_alert(rule.name, {})
    for i, v in enumerate(values):
        a = step(
            a,
            breach_of(rule, v, firing=a.is_firing),
            T0 + i * dt,
            for_s=rule.for_s,
            resolve_for_s=rule.resolve_for_s,
            value=v,
        )
    return a


def test_pending_for_duration_then_firing_then_resolved() -> None:
    assert _run([3, 3, 3, 3, 3]).status is AlertStatus.PENDING  # 240 s < for 300 s
    a = _run([3] * 6)
    assert a.status is AlertStatus.FIRING and a.fired_at == T0 + 300 and a.active_since == T0
    assert _run([3, 3, 3, 1, 3, 3]).status is AlertStatus.PENDING  # a dip resets pending
    assert _run([3, 3, 3, 1]).status is AlertStatus.INACTIVE
    assert _run([3] * 6 + [1.0, 1.0]).status is AlertStatus.FIRING  # clear 60 s < 120 s
    done = _run([3] * 6 + [1.0, 1.0, 1.0])
    assert done.status is AlertStatus.RESOLVED and done.resolved_at == T0 + 8 * 60
    assert _run([3] * 6 + [1.0, 2.5, 1.0, 1.0]).status is AlertStatus.FIRING  # countdown reset
    assert _run([3] * 6 + [None] * 10).status is AlertStatus.FIRING  # no data never resolves
    with pytest.raises(ValueError, match="for_s"):
        step(new_alert("x", {}), Breach.BREACHING, T0, for_s=-1, resolve_for_s=0)


def test_fingerprint_is_order_independent() -> None:
    assert fingerprint("r", {"a": "1", "b": "2"}) == fingerprint("r", {"b": "2", "a": "1"})
    assert fingerprint("r", {"a": "1"}) != fingerprint("s", {"a": "1"})
    assert len(fingerprint("r", {})) == 16


def test_event_rule_breach() -> None:
    rule = EventRule(name="rb", event="canary_rollback", match={"rollout": "r1"}, receivers=("p",))
    e = AlertEvent(kind="canary_rollback", at=T0, labels={"rollout": "r1", "variant": "cand"})
    assert event_breach(rule, e) is Breach.BREACHING
    assert event_breach(rule, replace(e, resolved=True)) is Breach.CLEAR
    assert event_breach(rule, replace(e, labels={"rollout": "r2"})) is Breach.UNKNOWN
    assert event_breach(rule, replace(e, kind="canary_promote")) is Breach.UNKNOWN


def test_summary_fills_value_threshold_and_labels() -> None:
    rule = EventRule(
        name="rb",
        event="canary_rollback",
        summary="canary {labels.rollout} rolled back: {labels.candidate} at {value} %, {labels.x}",
        receivers=("p",),
    )
    e = AlertEvent(
        kind="canary_rollback",
        at=T0,
        labels={"rollout": "r1", "candidate": "lora-7"},
        annotations={"reasons": "thumbs_down_rate worse"},
        value=0.0,
    )
    alerts: dict[str, AlertState] = {}
    apply_events(rule, alerts, [e], T0 + 1)
    (a,) = alerts.values()
    assert a.annotations["summary"] == "canary r1 rolled back: lora-7 at 0 %, n/a"
    assert a.annotations["reasons"] == "thumbs_down_rate worse"
    assert render_summary(rule, None) == "canary n/a rolled back: n/a at n/a %, n/a"


def _firing(labels: dict[str, str], at: float = T0) -> AlertState:
    a = new_alert("ttft_p99_high", labels)
    return replace(a, status=AlertStatus.FIRING, active_since=at, fired_at=at)


GROUPING = Grouping(
    group_by=("alertname",), group_wait_s=30, group_interval_s=300, repeat_interval_s=3600
)


def test_group_wait_interval_and_repeat() -> None:
    a, b = _firing({"model": "a"}), _firing({"model": "b"})
    g = group_of("oncall", a.labels, GROUPING.group_by)
    g, n = plan_group("t", g, [a], GROUPING, T0)
    assert n is None and g.episode_started_at == T0  # group_wait
    g, n = plan_group("t", g, [a, b], GROUPING, T0 + 30)
    assert n is not None and n.reason == "first notification" and len(n.alerts) == 2
    first_id = n.id
    g, n = plan_group("t", g, [a, b], GROUPING, T0 + 100)
    assert n is None  # unchanged
    b_res = replace(b, status=AlertStatus.RESOLVED, resolved_at=T0 + 100)
    g, n = plan_group("t", g, [a, b_res], GROUPING, T0 + 200)
    assert n is None  # group_interval not over
    g, n = plan_group("t", g, [a, b_res], GROUPING, T0 + 330)
    assert n is not None and n.reason == "some alerts resolved" and n.status == "firing"
    assert [x.status for x in n.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert n.id != first_id
    g, n = plan_group("t", g, [a, b_res], GROUPING, T0 + 330 + 3600)
    assert n is not None and n.reason == "repeat interval elapsed" and len(n.alerts) == 1
    acked = acknowledge(a, T0 + 4000, "alice")
    g, n = plan_group("t", g, [acked, b_res], GROUPING, T0 + 330 + 7200)
    assert n is None  # acknowledged: no more repeats
    a_res = replace(acked, status=AlertStatus.RESOLVED, resolved_at=T0 + 8000)
    g, n = plan_group("t", g, [a_res, b_res], GROUPING, T0 + 8000)
    assert n is not None and n.status == "resolved" and g.last_sent_firing == frozenset()


def test_silence_mutes_and_expiry_renotifies() -> None:
    a = _firing({"model": "a"})
    sil = Silence(
        id="s1", matchers=(Matcher("model", "a|b", "=~"),), starts_at=T0, ends_at=T0 + 600
    )
    g = group_of("oncall", a.labels, GROUPING.group_by)
    g, n = plan_group("t", g, [a], GROUPING, T0 + 100, silences=[sil])
    assert n is None
    g, n = plan_group("t", g, [a], GROUPING, T0 + 700, silences=[sil])
    assert n is None  # silence over: the episode starts now and waits group_wait
    g, n = plan_group("t", g, [a], GROUPING, T0 + 730, silences=[sil])
    assert n is not None and n.reason == "first notification"
    assert Matcher("model", "a", "!=").matches({"model": "b"})
    assert not Matcher("model", "a", "!~").matches({"model": "a"})
    with pytest.raises(ValueError, match="matchers"):
        Silence(id="x", matchers=(), starts_at=T0, ends_at=T0 + 1)
    with pytest.raises(ValueError, match="regex"):
        Matcher("m", "(", "=~")


def test_send_resolved_false_and_max_alerts() -> None:
    a, b = _firing({"model": "a"}), _firing({"model": "b"})
    g = group_of("oncall", a.labels, GROUPING.group_by)
    g, n = plan_group("t", g, [a, b], GROUPING, T0, max_alerts=1)
    assert n is None
    g, n = plan_group("t", g, [a, b], GROUPING, T0 + 30, max_alerts=1)
    assert n is not None and len(n.alerts) == 1 and n.truncated_alerts == 1
    ra = replace(a, status=AlertStatus.RESOLVED)
    rb = replace(b, status=AlertStatus.RESOLVED)
    g, n = plan_group("t", g, [ra, rb], GROUPING, T0 + 400, send_resolved=False)
    assert n is None and g.last_sent_firing == frozenset() and g.seq == 2


def test_retry_classification_and_backoff() -> None:
    assert classify(200) is Outcome.DELIVERED and classify(204) is Outcome.DELIVERED
    for code in (408, 429, 500, 502, 503, 504, None):
        assert classify(code) is Outcome.RETRY
    for code in (301, 400, 401, 404, 410, 422):
        assert classify(code) is Outcome.PERMANENT
    assert parse_retry_after("2", T0) == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == 10.0
    assert parse_retry_after("soon", T0) is None
    p = RetryPolicy(base_delay_s=1, multiplier=2, jitter=0.25, max_delay_s=10)
    rng = np.random.default_rng(0)
    prev: float | None = None
    delays = []
    for n in range(1, 12):
        prev = backoff_delay(p, n, rng=rng, previous_delay_s=prev)
        delays.append(prev)
    assert delays == sorted(delays) and 1 <= delays[0] <= 1.25 and delays[-1] <= 12.5
    assert backoff_delay(p, 1, rng=rng, retry_after_s=30) == 30
    assert schedule_retry(p, created_at=T0, attempts_made=8, now=T0, delay_s=1).failure_reason == (
        "max_attempts"
    )
    late = schedule_retry(p, created_at=T0, attempts_made=2, now=T0 + 899, delay_s=5)
    assert late.failure_reason == "max_age"
    with pytest.raises(ValueError, match="multiplier"):
        RetryPolicy(multiplier=0.5)
    with pytest.raises(ValueError, match="attempts_made"):
        backoff_delay(p, 0, rng=rng)


def test_signature_matches_reference_library_and_spec() -> None:
    secret = generate_secret()
    body = b'{"a": 1}'
    sig = sign(secret, "msg_1", int(T0), body)
    key = base64.b64decode(secret[len("whsec_") :])
    mac = hmac.new(key, b"msg_1." + str(int(T0)).encode() + b"." + body, hashlib.sha256).digest()
    assert sig == "v1," + base64.b64encode(mac).decode()
    from datetime import UTC, datetime

    assert Webhook(secret).sign("msg_1", datetime.fromtimestamp(T0, UTC), body.decode()) == sig
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(T0)), "webhook-signature": sig}
    assert verify(secret, headers, body, now=T0 + 10)
    assert not verify(secret, headers, body + b" ", now=T0)
    assert not verify(secret, headers, body, now=T0 + 301)
    with pytest.raises(ValueError, match="whsec_"):
        secret_key("abc")
    with pytest.raises(ValueError, match=r"24\.\.64"):
        secret_key("whsec_" + base64.b64encode(b"short").decode())


def test_payload_formats() -> None:
    a = replace(
        _firing({"model": "gpt-4o", "severity": "critical"}),
        annotations={"summary": "p99 TTFT 3 s"},
    )
    g = group_of("my.rcv", a.labels, ("alertname",))
    _, n = plan_group("t", g, [a], Grouping(group_wait_s=0), T0)
    assert n is not None
    am = json.loads(
        render(n, Receiver(name="my.rcv", kind="alertmanager", url="http://x/"), "http://dl")
    )
    assert am["version"] == "4" and am["receiver"] == r"my\.rcv" and am["status"] == "firing"
    assert am["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert am["alerts"][0]["fingerprint"] == a.fingerprint
    assert am["commonLabels"]["model"] == "gpt-4o"
    assert am["notification_reason"] == "first notification"
    slack = json.loads(render(n, Receiver(name="s", kind="slack", url="http://x/")))
    assert "FIRING:1" in slack["text"] and slack["blocks"]
    pd_rcv = Receiver(name="p", kind="pagerduty", url="http://x/", routing_key=SecretStr("k" * 32))
    pd = json.loads(render(n, pd_rcv))
    assert pd["event_action"] == "trigger" and pd["dedup_key"] == n.group_id
    assert pd["payload"]["severity"] == "critical" and pd["routing_key"] == "k" * 32
    gen = json.loads(render(n, Receiver(name="g", url="http://x/")))
    assert gen["type"] == "alert.firing" and gen["data"]["id"] == n.id
    assert render(n, pd_rcv) == render(n, pd_rcv)  # deterministic bytes
    assert quote_meta("a.b*c") == r"a\.b\*c"


def test_group_state_default() -> None:
    g = GroupState(group_id="x", group_key="k", receiver="r", group_labels={})
    assert g.seq == 0 and g.last_flush_at is None
