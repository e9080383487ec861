"""The event inbox, store-fed series, health events and the scheduler job factory, on SQLite and
PostgreSQL (series are queries, so their rows are inserted directly)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine, insert
from sqlalchemy.orm import Session

from alerts import events as inbox
from alerts import outbox, store
from alerts.errors import ReceiverConfigError
from alerts.jobs import HealthWatcher, jobs
from alerts.receivers import Receiver, StaticReceivers
from alerts.rules import EventRule, Grouping, ThresholdRule
from alerts.runtime import evaluate_tenant, tenants_to_evaluate
from alerts.series import rule_series
from alerts.state import AlertStatus
from collector.errors import ConfigError
from collector.store.callstats import is_rate_limited
from collector.store.events import emit_event
from collector.store.models import LLMCall
from collector.telemetry.metrics import IngestMetrics
from tests.conftest import make_settings

T0 = 1_800_000_000.0
RCV = StaticReceivers([Receiver(name="oncall", kind="generic", url="http://127.0.0.1:9/x")])
ROLLBACK = EventRule(
    name="canary_rolled_back",
    event="canary_rollback",
    severity="critical",
    receivers=("oncall",),
    grouping=Grouping(group_wait_s=0, group_interval_s=0),
)


def _calls(engine: Engine, rows: list[dict[str, Any]], tenant: str = "default") -> None:
    base = {"tenant": tenant, "status": "ok", "flags": [], "dialect": "semconv"}
    with engine.begin() as c:
        c.execute(
            insert(LLMCall),
            [
                {
                    **base,
                    "trace_id": os.urandom(16).hex(),
                    "span_id": os.urandom(8).hex(),
                    "call_id": os.urandom(8).hex(),
                    "start_unix_nano": int(T0 * 1e9) - 10**9,
                    **r,
                }
                for r in rows
            ],
        )


def test_emit_event_validates_its_arguments(engine: Engine) -> None:
    with pytest.raises(ValueError, match="kind"):
        emit_event(engine, "default", "drift_happened", {})
    with pytest.raises(ValueError, match="tenant"):
        emit_event(engine, "", "drift_detected", {})
    with pytest.raises(ValueError, match="at"):
        emit_event(engine, "default", "drift_detected", {}, at=float("nan"))
    with pytest.raises(ValueError, match="labels"):
        emit_event(engine, "default", "drift_detected", {"": "x"})


def test_events_fire_once_and_resolve_through_the_inbox(engine: Engine) -> None:
    with Session(engine) as s, s.begin():
        store.save_rule(s, "default", ROLLBACK, enabled=True, now=T0)
    eid = emit_event(
        engine, "default", "canary_rollback", {"rollout": "r1"}, {"reason": "harm"}, T0, value=31.0
    )
    assert isinstance(eid, int)
    later = emit_event(engine, "default", "canary_rollback", {"rollout": "r1"}, {}, T0 + 100)
    assert tenants_to_evaluate(engine) == ["default"]
    r = evaluate_tenant(engine, "default", now=T0 + 1, receivers=RCV)
    assert [n.status for n in r.notifications] == ["firing"]
    (alert,) = r.alerts
    assert alert.labels["rollout"] == "r1" and alert.annotations["reason"] == "harm"
    assert alert.last_value == 31.0
    with Session(engine) as s:  # the future event waits; the applied one is consumed
        assert [i for i, _ in inbox.pending_events(s, "default")] == [later]
    assert evaluate_tenant(engine, "default", now=T0 + 2, receivers=RCV).notifications == ()
    emit_event(engine, "default", "canary_rollback", {"rollout": "r1"}, {}, T0 + 3, resolved=True)
    r = evaluate_tenant(engine, "default", now=T0 + 4, receivers=RCV)
    assert [n.status for n in r.notifications] == ["resolved"]
    assert r.alerts[0].status is AlertStatus.RESOLVED
    bodies = [json.loads(i.payload) for i in outbox.list_items(engine, "default")]
    assert [b["type"] for b in bodies] == ["alert.firing", "alert.resolved"]


def test_events_of_tenants_without_rules_are_drained(engine: Engine) -> None:
    emit_event(engine, "acme", "judge_drift", {"rubric": "helpful"}, {}, T0)
    assert tenants_to_evaluate(engine) == ["acme"]
    assert evaluate_tenant(engine, "acme", now=T0 + 1, receivers=RCV).alerts == ()
    assert tenants_to_evaluate(engine) == []


def test_latency_series_match_numpy_and_skip_nulls(engine: Engine) -> None:
    rng = np.random.default_rng(8)
    ttft = rng.lognormal(-1.0, 0.6, size=200)
    _calls(engine, [{"ttft_s": float(v), "model": "a", "service_name": "chat"} for v in ttft])
    _calls(engine, [{"ttft_s": None, "model": "a", "service_name": "chat"}] * 5)
    _calls(engine, [{"ttft_s": 50.0, "model": "b", "service_name": "chat"}] * 3)
    _calls(engine, [{"ttft_s": 99.0, "model": "a", "service_name": "batch"}] * 3)
    _calls(engine, [{"ttft_s": 99.0, "model": "a", "start_unix_nano": int((T0 - 400) * 1e9)}])
    _calls(engine, [{"ttft_s": 99.0, "model": "a", "service_name": "chat"}], tenant="acme")
    rule = ThresholdRule(
        name="t",
        stat="ttft_s",
        quantile=0.99,
        threshold=1,
        receivers=("oncall",),
        filters={"service_name": "chat"},
        group_labels=("model",),
        min_samples=5,
    )
    with engine.connect() as c:
        got = {s.labels["model"]: s.samples[0] for s in rule_series(c, "default", rule, T0)}
        mean = rule.model_copy(update={"quantile": None, "group_labels": ()})
        (overall,) = rule_series(c, "default", mean, T0)
    assert got["a"].at == T0 and got["a"].value == pytest.approx(float(np.quantile(ttft, 0.99)))
    assert got["b"].value is None  # 3 calls < min_samples: unknown, never 0
    every = np.concatenate([ttft, [50.0] * 3])
    assert overall.labels == {} and overall.samples[0].value == pytest.approx(every.mean())


def test_server_side_and_itl_series_read_their_own_columns(engine: Engine) -> None:
    rng = np.random.default_rng(9)
    client = rng.lognormal(-1.0, 0.4, size=60)
    server = client * 0.5  # the engine's TTFT, without network and gateway queue
    itl = rng.uniform(0.01, 0.05, size=60)
    _calls(
        engine,
        [
            {"ttft_s": float(c), "server_ttft_s": float(s), "itl_p50_s": float(i)}
            for c, s, i in zip(client, server, itl, strict=True)
        ],
    )
    _calls(engine, [{"ttft_s": 9.0, "server_ttft_s": None, "itl_p50_s": None}] * 4)
    with engine.connect() as c:
        for stat, values in (
            ("server_ttft_s", server),
            ("ttft_s", np.concatenate([client, [9.0] * 4])),
            ("itl_p50_s", itl),
        ):
            rule = ThresholdRule(
                name=stat, stat=stat, quantile=0.95, threshold=1, receivers=("oncall",)
            )
            (s,) = rule_series(c, "default", rule, T0)
            assert s.samples[0].value == pytest.approx(float(np.quantile(values, 0.95))), stat


def test_rate_and_cost_series(engine: Engine) -> None:
    _calls(
        engine, [{"status": "ok", "cost_usd": 0.002, "input_tokens": 900, "output_tokens": 100}] * 6
    )
    _calls(engine, [{"status": "error", "error_type": "RateLimitError"}] * 3)
    _calls(engine, [{"status": "error", "error_type": "timeout"}])
    with engine.connect() as c:

        def value(stat: str) -> float | None:
            rule = ThresholdRule(name=stat, stat=stat, threshold=0.5, receivers=("x",))  # type: ignore[arg-type]
            (s,) = rule_series(c, "default", rule, T0)
            return s.samples[0].value

        assert value("error_rate") == pytest.approx(0.4)
        assert value("rejection_rate_429") == pytest.approx(0.3)
        assert value("cost_per_1k_tokens_usd") == pytest.approx(1000 * 0.012 / 6000)
        empty = ThresholdRule(name="e", stat="e2e_s", threshold=1, receivers=("x",))
        assert rule_series(c, "nobody", empty, T0)[0].samples[0].value is None
        with pytest.raises(ValueError, match="filters"):
            rule_series(c, "default", empty.model_copy(update={"filters": {"colour": "red"}}), T0)
    assert is_rate_limited("429") and is_rate_limited("rate_limit_exceeded")
    assert not is_rate_limited("timeout") and not is_rate_limited(None)


def test_health_watcher_turns_metrics_into_events() -> None:
    m = IngestMetrics.create(CollectorRegistry())
    hw = HealthWatcher(queue_max_spans=100, queue_saturation=0.9)
    assert hw.check(m.registry, T0) == []  # baseline
    m.spans_rejected.labels("http", "bad_trace_id").inc(3)
    (ev,) = hw.check(m.registry, T0 + 1)
    assert (ev.kind, dict(ev.labels), ev.value, ev.resolved) == (
        "collector_unhealthy",
        {"check": "spans_rejected"},
        3.0,
        False,
    )
    (ev,) = hw.check(m.registry, T0 + 2)
    assert ev.labels["check"] == "spans_rejected" and ev.resolved
    assert hw.check(m.registry, T0 + 3) == []
    m.queue_spans.set(95)
    (ev,) = hw.check(m.registry, T0 + 4)
    assert ev.labels["check"] == "queue_saturation" and ev.value == pytest.approx(0.95)


def test_job_factory_reads_alert_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings(f"sqlite:///{tmp_path}/x.db")
    monkeypatch.setenv("DRIFTLINE_ALERT_EVAL_INTERVAL_S", "7")
    assert [(j.name, j.interval_s) for j in jobs(settings)] == [
        ("alerts.evaluate", 7.0),
        ("alerts.deliver", 1.0),
    ]
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    assert jobs(settings) == []
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "true")
    monkeypatch.setenv("DRIFTLINE_ALERT_EVAL_INTERVAL_S", "-1")
    with pytest.raises(ConfigError, match="DRIFTLINE_ALERT_EVAL_INTERVAL_S"):
        jobs(settings)
    monkeypatch.setenv("DRIFTLINE_ALERT_EVAL_INTERVAL_S", "5")
    monkeypatch.setenv("DRIFTLINE_ALERT_RECEIVERS_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(ReceiverConfigError, match="DRIFTLINE_ALERT_RECEIVERS_FILE"):
        jobs(settings)
