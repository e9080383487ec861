"""Seed a whole demo store: calls + feedback over OTLP/HTTP, then engine samples, alerts, a
rollout, GPU cost, judge verdicts and human labels, and a drift run through the collector's,
canary's, judges' and drift's own functions.

``python -m driftline.demo.seed_demo --collector-url http://127.0.0.1:4318 --database-url URL``
seeds a running ``driftline collector --dev`` and its store (the database URL must be the one
the collector writes to); ``--judge-base-url`` / ``--judge-model`` name an OpenAI-compatible
judge endpoint (without them no call is judged).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import click
import httpx
import numpy as np

from collector.store.engine import make_engine
from drift.runs import RunSummary
from driftline.demo.seed import SELF_HOSTED_SERVICE, SeedResult, seed_calls
from driftline.demo.seed_quality import (
    JudgesSeed,
    demo_drift_settings,
    seed_drift,
    seed_gpu_cost,
    seed_judges,
)
from driftline.demo.seed_store import seed_alerts, seed_engine_samples, seed_rollout
from driftline.demo.seed_text import answer_grades
from judges.settings import JudgeSettings

#: USD per hour of the self-hosted replica serving ``support-gateway`` (one mid-range GPU)
GPU_USD_PER_HOUR = 1.20


@dataclass(frozen=True, slots=True)
class DemoSeed:
    """What :func:`seed_demo` wrote: calls / feedback, engine samples, firing alerts, rollout,
    calls given a GPU cost, the judge round and labels, the drift run, and its ``now_s``."""

    calls: SeedResult
    engine_samples: int
    firing_alerts: int
    rollout_status: str | None
    now_s: float
    gpu_costed_calls: int = 0
    judges: JudgesSeed | None = None
    drift: RunSummary | None = None


def seed_demo(
    client: httpx.Client,
    database_url: str,
    rng: np.random.Generator,
    *,
    tenant: str = "default",
    n_calls: int = 600,
    hours: float = 6.0,
    api_key: str | None = None,
    rollout: bool = True,
    judge: JudgeSettings | None = None,
    drift: bool = True,
    gpu_usd_per_hour: float | None = GPU_USD_PER_HOUR,
) -> DemoSeed:
    """Seed calls and feedback through ``client`` (the collector), then the store extras.

    Args:
        rollout: False skips the canary rollout (a store without the canary tables).
        judge: the judge endpoint and sampling (None: nothing is judged or labelled). Judging
            runs after the rollout exists so its candidate arm is over-sampled.
        drift: run the drift monitor once (current window: the last 2 hours, where the seed's
            topic shift is).
        gpu_usd_per_hour: USD per hour of the self-hosted replica, amortised over the
            ``support-gateway`` calls (None: no GPU cost).

    Raises:
        ValueError: bad ``n_calls`` / ``hours``; RuntimeError: the collector refused data;
        judges.settings.JudgeConfigError: ``judge`` without endpoint or model.
    """
    now = time.time()
    calls = seed_calls(client, rng, n_calls=n_calls, hours=hours, now_s=now, api_key=api_key)
    engine = make_engine(database_url)
    judged: JudgesSeed | None = None
    drift_run: RunSummary | None = None
    costed = 0
    try:
        samples = seed_engine_samples(engine, tenant, rng, hours=hours, now_s=now)
        alerts = seed_alerts(engine, tenant, now_s=now)
        if gpu_usd_per_hour is not None:
            costed = seed_gpu_cost(
                engine, SELF_HOSTED_SERVICE, gpu_usd_per_hour, since_s=now - hours * 3600, now_s=now
            )
        status = None
        if rollout:
            status = seed_rollout(
                engine,
                tenant,
                started_s=now - hours * 3600.0,
                looks_s=(now - hours * 1800.0, now - 1800.0, now - 30.0),
            )
        if judge is not None:
            judged = seed_judges(engine, tenant, judge, answer_grades(), rng)
        if drift:
            drift_run = seed_drift(engine, database_url, tenant, demo_drift_settings(), now_s=now)
    finally:
        engine.dispose()
    return DemoSeed(calls, samples, alerts.firing, status, now, costed, judged, drift_run)


def demo_judge_settings(base_url: str, model: str, api_key: str = "EMPTY") -> JudgeSettings:
    """Judge settings of the demo: 30 % of calls judged (60 % of the candidate arm), 35 % of
    those audited by humans, no settle delay, helpfulness rubric, list prices of a small model."""
    return JudgeSettings(
        base_url=base_url,
        model=model,
        api_key=api_key,  # type: ignore[arg-type]  # pydantic coerces str to SecretStr
        salt="driftline-demo",
        base_rate=0.3,
        candidate_rate=0.6,
        audit_rate=0.35,
        settle_s=0.0,
        low_score_threshold=2.0,
        input_usd_per_mtok=0.15,
        output_usd_per_mtok=0.6,
        concurrency=8,
        timeout_s=30.0,
    )


@click.command()
@click.option("--collector-url", default="http://127.0.0.1:4318", show_default=True)
@click.option("--database-url", required=True, help="The store the collector writes to.")
@click.option("--api-key", default=None, help="Ingest key (not needed for a --dev collector).")
@click.option("--tenant", default="default", show_default=True)
@click.option("--calls", "n_calls", type=int, default=600, show_default=True)
@click.option("--hours", type=float, default=6.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--judge-base-url", default=None, help="OpenAI-compatible judge endpoint (.../v1).")
@click.option("--judge-model", default=None, help="Judge model name.")
@click.option("--judge-api-key", default="EMPTY", show_default=True)
def main(
    collector_url: str,
    database_url: str,
    api_key: str | None,
    tenant: str,
    n_calls: int,
    hours: float,
    seed: int,
    judge_base_url: str | None,
    judge_model: str | None,
    judge_api_key: str,
) -> None:
    """Fill a running collector's store with a demo day of synthetic traffic."""
    if (judge_base_url is None) != (judge_model is None):
        raise click.BadParameter("give both --judge-base-url and --judge-model, or neither")
    judge = None
    if judge_base_url and judge_model:
        judge = demo_judge_settings(judge_base_url, judge_model, judge_api_key)
    with httpx.Client(base_url=collector_url, timeout=30) as client:
        out = seed_demo(
            client,
            database_url,
            np.random.default_rng(seed),
            tenant=tenant,
            n_calls=n_calls,
            hours=hours,
            api_key=api_key,
            judge=judge,
        )
    click.echo(
        f"seeded {len(out.calls.calls)} calls, {out.calls.feedback_events} feedback events, "
        f"{out.engine_samples} engine samples, {out.firing_alerts} firing alerts, "
        f"rollout {out.rollout_status}, {out.gpu_costed_calls} GPU-costed calls"
    )
    if out.judges is not None:
        click.echo(
            f"judged {out.judges.report.judged} calls, {len(out.judges.audit_labels)} audit "
            f"labels, {out.judges.open_items} review items open"
        )
    if out.drift is not None:
        click.echo(
            f"drift run {out.drift.run_id}: {out.drift.n_drifted} of "
            f"{out.drift.n_evaluated} signals drifted"
        )


if __name__ == "__main__":
    main()
