"""Seed a whole demo store: calls + feedback over OTLP/HTTP, then engine samples, alerts and a
rollout through the collector's and drift's own functions.

``python -m dashboard.seed_demo --collector-url http://127.0.0.1:4318 --database-url URL``
seeds a running ``driftline collector --dev`` and its store (the database URL must be the one
the collector writes to).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import click
import httpx
import numpy as np

from collector.store.engine import make_engine
from dashboard.seed import SeedResult, seed_calls
from dashboard.seed_store import seed_alerts, seed_engine_samples, seed_rollout


@dataclass(frozen=True, slots=True)
class DemoSeed:
    """What :func:`seed_demo` wrote: calls / feedback, engine samples, firing alerts, rollout."""

    calls: SeedResult
    engine_samples: int
    firing_alerts: int
    rollout_status: str | None


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
) -> DemoSeed:
    """Seed calls and feedback through ``client`` (the collector), then the store extras.

    ``rollout`` False skips the canary rollout (a store without the canary tables).

    Raises:
        ValueError: bad ``n_calls`` / ``hours``; RuntimeError: the collector refused data.
    """
    now = time.time()
    calls = seed_calls(client, rng, n_calls=n_calls, hours=hours, now_s=now, api_key=api_key)
    engine = make_engine(database_url)
    try:
        samples = seed_engine_samples(engine, tenant, rng, hours=hours, now_s=now)
        alerts = seed_alerts(engine, tenant, now_s=now)
        status = None
        if rollout:
            status = seed_rollout(
                engine,
                tenant,
                started_s=now - hours * 3600.0,
                looks_s=(now - hours * 1800.0, now - 1800.0, now - 30.0),
            )
    finally:
        engine.dispose()
    return DemoSeed(calls, samples, alerts.firing, status)


@click.command()
@click.option("--collector-url", default="http://127.0.0.1:4318", show_default=True)
@click.option("--database-url", required=True, help="The store the collector writes to.")
@click.option("--api-key", default=None, help="Ingest key (not needed for a --dev collector).")
@click.option("--tenant", default="default", show_default=True)
@click.option("--calls", "n_calls", type=int, default=600, show_default=True)
@click.option("--hours", type=float, default=6.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def main(
    collector_url: str,
    database_url: str,
    api_key: str | None,
    tenant: str,
    n_calls: int,
    hours: float,
    seed: int,
) -> None:
    """Fill a running collector's store with a demo day of synthetic traffic."""
    with httpx.Client(base_url=collector_url, timeout=30) as client:
        out = seed_demo(
            client,
            database_url,
            np.random.default_rng(seed),
            tenant=tenant,
            n_calls=n_calls,
            hours=hours,
            api_key=api_key,
        )
    click.echo(
        f"seeded {len(out.calls.calls)} calls, {out.calls.feedback_events} feedback events, "
        f"{out.engine_samples} engine samples, {out.firing_alerts} firing alerts, "
        f"rollout {out.rollout_status}"
    )


if __name__ == "__main__":
    main()
