"""Seed the parts of a demo store that have no ingest API: engine samples and alerts.

Engine samples go through the collector's real path minus the HTTP GET: a vLLM ``/metrics``
exposition is rendered, parsed by :func:`collector.engines.scrape.parse_exposition` and rated by
:func:`collector.engines.rates.engine_rates`, then stored in ``engine_samples``. Alerts go through
``alerts`` (rules, receivers, :func:`evaluate_rules` on the seeded calls' p95 TTFT,
drift events, a silence), so their states and outbox rows are the ones the scheduler would write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from alerts import (
    AlertEvent,
    EventRule,
    Grouping,
    Matcher,
    Receiver,
    Sample,
    Series,
    ThresholdRule,
    evaluate_rules,
)
from alerts import store as alert_store
from alerts.receivers import StaticReceivers
from collector.engines.rates import EngineRates, engine_rates
from collector.engines.scrape import parse_exposition
from collector.store.models.api import EngineSample as EngineSampleRow
from dashboard import queries, stats

VLLM_URL = "http://127.0.0.1:8100/metrics"
VLLM_MODEL = "qwen2.5-0.5b-instruct"


@dataclass(frozen=True, slots=True)
class AlertsSeedResult:
    """Alert rules stored and evaluated, and alerts firing after the last evaluation."""

    rules: int
    firing: int


def vllm_exposition(
    *,
    kv: float,
    running: int,
    waiting: int,
    queries_total: int,
    hits_total: int,
    prompt_total: int,
    gen_total: int,
    preempt_total: int,
) -> str:
    """A vLLM (V1) Prometheus text exposition with the given gauges and counters."""
    lab = f'{{engine="0",model_name="{VLLM_MODEL}"}}'
    return "\n".join(
        [
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{lab} {kv}",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{lab} {running}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{lab} {waiting}",
            "# TYPE vllm:prefix_cache_queries counter",
            f"vllm:prefix_cache_queries_total{lab} {queries_total}",
            "# TYPE vllm:prefix_cache_hits counter",
            f"vllm:prefix_cache_hits_total{lab} {hits_total}",
            "# TYPE vllm:prompt_tokens counter",
            f"vllm:prompt_tokens_total{lab} {prompt_total}",
            "# TYPE vllm:generation_tokens counter",
            f"vllm:generation_tokens_total{lab} {gen_total}",
            "# TYPE vllm:num_preemptions counter",
            f"vllm:num_preemptions_total{lab} {preempt_total}",
            "",
        ]
    )


def seed_engine_samples(
    engine: Engine,
    tenant: str,
    rng: np.random.Generator,
    *,
    hours: float = 6.0,
    interval_s: float = 60.0,
    now_s: float | None = None,
) -> int:
    """Store one scrape per ``interval_s`` seconds over the last ``hours``; returns the count.

    Load follows a smooth daily-like curve plus noise; counters only increase.

    Raises:
        ValueError: ``hours`` or ``interval_s`` not positive.
    """
    if not (hours > 0 and interval_s > 0):
        raise ValueError("hours and interval_s must be positive")
    now = time.time() if now_s is None else now_s
    times = np.arange(now - hours * 3600.0, now, interval_s)
    q = h = p = g = pre = 0
    prev = None
    rows = []
    for i, t in enumerate(times):
        load = 0.5 + 0.35 * np.sin(i / max(len(times), 1) * 2 * np.pi) + rng.normal(0, 0.05)
        load = float(np.clip(load, 0.02, 0.98))
        new_q = int(rng.poisson(4000 * load)) + 1
        q, h = q + new_q, h + int(new_q * rng.uniform(0.35, 0.7))
        p, g = p + int(rng.poisson(3000 * load)), g + int(rng.poisson(2500 * load))
        pre += int(rng.random() < load**4)
        text = vllm_exposition(
            kv=round(load * rng.uniform(0.8, 1.0), 4),
            running=int(rng.poisson(12 * load)),
            waiting=int(rng.poisson(max(0.0, 8 * (load - 0.6)))),
            queries_total=q,
            hits_total=h,
            prompt_total=p,
            gen_total=g,
            preempt_total=pre,
        )
        (sample,) = parse_exposition(text, scraped_at_unix_s=float(t))
        rates: EngineRates | None = engine_rates(prev, sample) if prev is not None else None
        prev = sample
        rows.append(
            EngineSampleRow(
                tenant=tenant,
                url=VLLM_URL,
                engine_kind=sample.engine_kind.value,
                model_name=sample.model_name,
                engine_index=sample.engine_index,
                scraped_unix_nano=int(t * 1e9),
                kv_cache_usage=sample.kv_cache_usage,
                requests_running=sample.requests_running,
                requests_waiting=sample.requests_waiting,
                prefix_cache_queries_total=sample.prefix_cache_queries_total,
                prefix_cache_hits_total=sample.prefix_cache_hits_total,
                preemptions_total=sample.preemptions_total,
                prompt_tokens_total=sample.prompt_tokens_total,
                generation_tokens_total=sample.generation_tokens_total,
                prefix_cache_hit_rate=rates.prefix_cache_hit_rate if rates else None,
            )
        )
    with Session(engine) as s, s.begin():
        s.add_all(rows)
    return len(rows)


def seed_alerts(engine: Engine, tenant: str, *, now_s: float | None = None) -> AlertsSeedResult:
    """Rules, a receiver, two evaluations an hour apart, drift events and a silence.

    The TTFT rule watches the seeded calls' per-model p95 TTFT over the hour before each
    evaluation (threshold 0.4 s), so which models fire depends on the data; the drift event rule
    gets one episode that fires and resolves (history) and one still firing.
    """
    now = time.time() if now_s is None else now_s
    receiver = Receiver(name="oncall", tenant=tenant, kind="generic", url="http://127.0.0.1:9/hook")
    grouping = Grouping(group_by=("alertname",), group_wait_s=0, group_interval_s=60)
    ttft = ThresholdRule(
        name="ttft_p95_high",
        stat="ttft_s",
        quantile=0.95,
        op=">",
        threshold=0.4,
        resolve_threshold=0.35,
        severity="warning",
        summary="p95 TTFT {value} s above {threshold} s",
        group_labels=("model",),
        receivers=("oncall",),
        grouping=grouping,
    )
    drift = EventRule(
        name="drift_detected",
        event="drift_detected",
        severity="info",
        summary="drift detected",
        receivers=("oncall",),
        grouping=grouping,
    )
    directory = StaticReceivers([receiver])
    with Session(engine) as s, s.begin():
        alert_store.save_receiver(s, receiver, now=now - 3 * 3600)
        alert_store.save_rule(s, tenant, ttft, enabled=True, now=now - 3 * 3600)
        alert_store.save_rule(s, tenant, drift, enabled=True, now=now - 3 * 3600)
    shift = {"signal": "output_tokens", "segment": "support-gateway"}
    topic = {"signal": "prompt_topic", "segment": "lora-v2"}
    for at, events in (
        (now - 2 * 3600, [AlertEvent("drift_detected", now - 2 * 3600, shift, value=0.004)]),
        (
            now - 600,
            [
                AlertEvent("drift_detected", now - 600, shift, resolved=True),
                AlertEvent("drift_detected", now - 600, topic, value=0.0007),
            ],
        ),
    ):
        df = queries.calls_frame(engine, tenant, int((at - 3600) * 1e9), int(at * 1e9))
        series = [
            Series({"model": str(m)}, (Sample(at, stats.summarize(g, 3600).ttft_s["p95"]),))
            for m, g in df.groupby("model")
        ]
        with Session(engine) as s, s.begin():
            result = evaluate_rules(
                s,
                tenant,
                [ttft, drift],
                now=at,
                receivers=directory,
                series={ttft.name: series},
                events=events,
            )
    with Session(engine) as s, s.begin():
        alert_store.create_silence(
            s,
            tenant,
            [Matcher("model", "gpt-4o")],
            starts_at=now - 1800,
            ends_at=now + 4 * 3600,
            now=now - 1800,
            created_by="on-call",
            comment="provider incident, vendor is on it",
        )
    firing = sum(1 for a in result.alerts if a.is_firing)
    return AlertsSeedResult(rules=2, firing=firing)


def seed_rollout(
    engine: Engine,
    tenant: str,
    *,
    started_s: float,
    looks_s: tuple[float, ...],
    name: str = "support-assistant",
    baseline: str = "base",
    candidate: str = "lora-v2",
) -> str:
    """Create rollout ``name`` at ``started_s`` (unix s) at a 20 % candidate step (the seeded
    traffic split) and let the real evaluator look at it at each time in ``looks_s``, applying
    its decisions; returns the rollout's status afterwards."""
    import datetime as dt

    from drift.canary.jobs import evaluate_rollout
    from drift.canary.policy import RolloutPolicy, default_metrics
    from drift.canary.store import create_rollout, get_rollout

    policy = RolloutPolicy(
        name=name,
        baseline_variant=baseline,
        candidate_variant=candidate,
        steps_pct=(20.0, 50.0, 100.0),
        min_samples_per_step=200,
        min_step_duration_s=1800.0,
        max_duration_s=24 * 3600.0,
        # the seeded self-hosted variants are unpriced and unjudged: leave those metrics out
        metrics=tuple(m for m in default_metrics() if m.name not in ("cost_usd", "judge_score")),
    )
    create_rollout(
        engine, tenant, policy, actor="seed", now=dt.datetime.fromtimestamp(started_s, dt.UTC)
    )
    for t in looks_s:
        record = get_rollout(engine, tenant, name)
        evaluate_rollout(engine, record, now=dt.datetime.fromtimestamp(t, dt.UTC), emit=_no_event)
    return str(get_rollout(engine, tenant, name).status)


def _no_event(engine: Engine, record: object, action: str, reasons: object) -> None:
    """Seeded looks do not raise alert events (the alert seed has its own)."""
