"""``driftline drift ...`` commands (the ``drift`` group, re-exported by ``drift.canary.cli``)."""

from __future__ import annotations

import time
from typing import Any

import click

from collector.lake.jobs import lake_of
from collector.settings import load_settings
from collector.store import engine as store_engine
from drift.callreaders import ENGINES, CallReader, lake_reader, spark_reader, spark_session
from drift.errors import DriftError
from drift.runs import (
    RunSummary,
    load_drift_settings,
    monitored_tenants,
    resolve_windows,
    run_drift,
)
from drift.windows import parse_time


@click.group()
def drift() -> None:
    """Drift tests of LLM signals (reference window vs current window, per segment)."""


def _echo(summary: RunSummary) -> None:
    click.echo(
        f"run {summary.run_id} tenant={summary.tenant} status={summary.status} "
        f"evaluated={summary.n_evaluated} drifted={summary.n_drifted} "
        f"duration={summary.duration_s:.2f}s"
    )
    for signal, segment in summary.drifted:
        click.echo(f"  drifted: {signal} [{segment or 'all traffic'}]")
    for signal, why in summary.skipped.items():
        click.echo(f"  skipped: {signal}: {why}")
    if summary.error:
        click.echo(f"  error: {summary.error}", err=True)


def _reader(settings: Any, engine: str, spark_master: str) -> CallReader:
    """The run's :data:`~drift.callreaders.CallReader` for ``--engine``; the Spark session is
    started here, once for every run of the command."""
    try:
        lake = lake_of(settings)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="DRIFTLINE_LAKE_URL") from None
    if engine == "duckdb":
        return lake_reader(lake)
    if lake is None:
        raise click.BadParameter(
            "needs the lake (DRIFTLINE_LAKE_ENABLED=true and a database on disk)",
            param_hint="--engine spark",
        )
    try:
        session = spark_session(spark_master)
    except DriftError as exc:
        raise click.ClickException(str(exc)) from None
    return spark_reader(session, lake)


@drift.command("run")
@click.option("--once", is_flag=True, help="One run per tenant, then exit (default: loop).")
@click.option("--since", default=None, help="Current window start: ISO 8601, unix s, or 2h ago.")
@click.option(
    "--reference",
    default=None,
    help="START..END (pinned range), deploy:COLUMN=VALUE, or 24h (rolling length).",
)
@click.option("--until", default=None, help="Current window end (default: now).")
@click.option("--tenant", "tenants", multiple=True, help="Tenant(s) (default: all with calls).")
@click.option("--database-url", default=None, help="Overrides DRIFTLINE_DATABASE_URL.")
@click.option("--seed", type=int, default=None, help="Seed of the run's random samples.")
@click.option("--no-migrate", is_flag=True, help="Do not upgrade the schema first.")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="duckdb",
    show_default=True,
    help="Who extracts the signal columns of sealed hours: DuckDB here, or a Spark session "
    "(the hot tail always comes from the store; docs/lake.md).",
)
@click.option(
    "--spark-master",
    default=None,
    help="Spark master for --engine spark (default: DRIFTLINE_DRIFT_SPARK_MASTER, local[2]).",
)
def run_command(
    once: bool,
    since: str | None,
    reference: str | None,
    until: str | None,
    tenants: tuple[str, ...],
    database_url: str | None,
    seed: int | None,
    no_migrate: bool,
    engine: str,
    spark_master: str | None,
) -> None:
    """Run the drift monitor: rolling (DRIFTLINE_DRIFT_REFERENCE_HOURS before the current
    window) or pinned (--reference) reference vs the current window (--since .. --until).
    Sealed hours are read from the Parquet lake (DuckDB, or Spark with --engine spark), the
    unsealed hot tail from the store."""
    settings = load_settings(database_url=database_url)
    drift_settings = load_drift_settings(
        seed=seed, tenants=list(tenants) or None, spark_master=spark_master
    )
    if spark_master is not None and engine != "spark":
        raise click.BadParameter("only with --engine spark", param_hint="--spark-master")
    read = _reader(settings, engine, drift_settings.spark_master)
    if not no_migrate:
        store_engine.upgrade(settings.database_url)
    db = store_engine.make_engine(settings.database_url)
    failed = False
    try:
        while True:
            now_ns = time.time_ns()
            try:
                if until is not None:
                    now_ns = parse_time(until, now_ns=now_ns, name="--until")
                since_ns = (
                    None if since is None else parse_time(since, now_ns=now_ns, name="--since")
                )
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--since/--until") from None
            horizon = (since_ns or now_ns) - int(drift_settings.reference_hours * 3600e9)
            for tenant in monitored_tenants(db, drift_settings, since_ns=horizon):
                try:
                    windows = resolve_windows(
                        db, tenant, drift_settings, now_ns=now_ns, reference=reference,
                        since_ns=since_ns,
                    )  # fmt: skip
                except ValueError as exc:
                    raise click.BadParameter(str(exc), param_hint="--reference") from None
                summary = run_drift(
                    db, settings.database_url, tenant, windows, drift_settings, read=read
                )
                failed = failed or summary.status != "ok"
                _echo(summary)
            if once:
                break
            time.sleep(drift_settings.interval_s)
    finally:
        db.dispose()
    if failed:
        raise SystemExit(1)


@drift.command("simulate")
@click.option(
    "--scenario",
    type=click.Choice(["stationary", "ar1", "daily-cycle", "shift", "rare-rate-3x"]),
    required=True,
    help="Null traffic (stationary, ar1, daily-cycle) or a change to detect (shift, rare-rate-3x).",
)
@click.option("--calls-per-hour", type=click.FloatRange(min=1), default=400.0, show_default=True)
@click.option("--runs", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--rho",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.8,
    show_default=True,
    help="AR(1) coefficient between consecutive calls (ar1 scenario).",
)
@click.option(
    "--base-rate",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.01,
    show_default=True,
    help="Refusal rate before a rare-rate-3x change.",
)
@click.option(
    "--change-hours",
    type=click.FloatRange(0, 25, min_open=True),
    default=1.0,
    show_default=True,
    help="Hours between the start of the change (shift, rare-rate-3x) and the run; 1 = the "
    "change began with the current window.",
)
@click.option(
    "--hourly-runs",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Instead: this many consecutive hourly runs per stream after the change (--runs "
    "streams), printing detected_within_hours.K (shift, rare-rate-3x).",
)
def simulate_command(
    scenario: str,
    calls_per_hour: float,
    runs: int,
    seed: int,
    rho: float,
    base_rate: float,
    change_hours: float,
    hourly_runs: int,
) -> None:
    """Simulated drift runs at the default settings (24 h reference, 1 h current window),
    printing RESULT lines: false_alarm_rate per signal per run, or detection_rate."""
    from drift.simulate import hourly_result_lines, result_lines, simulate, simulate_hourly

    if hourly_runs:
        if scenario not in ("shift", "rare-rate-3x"):
            raise click.BadParameter(
                "needs --scenario shift or rare-rate-3x", param_hint="--hourly-runs"
            )
        hourly = simulate_hourly(
            scenario, calls_per_hour, runs, seed, hours=hourly_runs, rho=rho,
            base_rate=base_rate, settings=load_drift_settings(),
        )  # fmt: skip
        for line in hourly_result_lines(hourly):
            click.echo(line)
        return
    res = simulate(
        scenario, calls_per_hour, runs, seed, rho=rho, base_rate=base_rate,
        change_hours=change_hours, settings=load_drift_settings(),
    )  # fmt: skip
    for line in result_lines(res):
        click.echo(line)
