"""``driftline judge run`` and ``driftline export flywheel`` (click, loaded lazily).

Entry points build the settings (``DRIFTLINE_DATABASE_URL``, ``DRIFTLINE_JUDGE_*``) and the
``openai.AsyncOpenAI`` client, and pass them down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import click
import openai

from collector.settings import load_settings
from collector.store import engine as store_engine
from collector.timeparse import parse_time_ns
from judges.settings import JudgeSettings, load_judge_settings
from judges.worker import RunReport, run_forever, run_once


def build_client(settings: JudgeSettings) -> openai.AsyncOpenAI:
    """The judge API client of ``settings`` (retries are done by judges.transport)."""
    base_url, _ = settings.require_endpoint()
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=settings.api_key.get_secret_value(),
        max_retries=0,
        timeout=settings.timeout_s,
    )


@click.group("judge")
def judge() -> None:
    """LLM-as-judge scoring of sampled calls."""


def _print(report: RunReport) -> None:
    click.echo(
        f"considered {report.considered} calls, sampled {report.sampled}; "
        f"judged {report.judged}, failed {report.failed}, requeued {report.requeued}, "
        f"pairwise {report.pairwise}"
        + ("; daily budget exhausted" if report.budget_exhausted else "")
    )


async def _run(settings: JudgeSettings, database_url: str, once: bool, concurrency: int) -> None:
    engine = store_engine.make_engine(database_url)
    client = build_client(settings)
    try:
        if once:
            _print(await run_once(client, engine, settings, concurrency=concurrency))
            return
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await run_forever(client, engine, settings, stop=stop, concurrency=concurrency)
    finally:
        await client.close()
        engine.dispose()


@judge.command("run")
@click.option("--once", is_flag=True, help="One round (select, judge all pending), then exit.")
@click.option("--concurrency", type=int, default=None, help="Judge requests in flight.")
@click.option("--database-url", default=None, help="Overrides DRIFTLINE_DATABASE_URL.")
@click.option("--migrate/--no-migrate", default=True, show_default=True)
def run_cmd(once: bool, concurrency: int | None, database_url: str | None, migrate: bool) -> None:
    """Judge sampled calls through DRIFTLINE_JUDGE_BASE_URL with DRIFTLINE_JUDGE_MODEL."""
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    collector_settings = load_settings(database_url=database_url)
    settings = load_judge_settings(concurrency=concurrency)
    settings.require_endpoint()
    if migrate:
        store_engine.upgrade(collector_settings.database_url)
    asyncio.run(
        _run(settings, collector_settings.database_url, once, concurrency or settings.concurrency)
    )


def _parse_since(value: str) -> int:
    """``--since``: ISO 8601 (UTC if no zone), unix seconds or a duration like ``7d`` / ``12h``."""
    try:
        return parse_time_ns(value, name="--since")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.group("export")
def export() -> None:
    """Export data out of driftline."""


@export.command("flywheel")
@click.option("--since", required=True, help="ISO 8601 time or a duration (7d, 12h).")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, writable=True))
@click.option("--tenant", default="default", show_default=True)
@click.option("--system-prompt", default=None, help="Prepended when a prompt has none.")
@click.option("--no-redact", is_flag=True, help="Do not redact PII again on export.")
@click.option(
    "--include-approved", is_flag=True, help="Also answers reviewers approved as they are."
)
@click.option("--database-url", default=None, help="Overrides DRIFTLINE_DATABASE_URL.")
def flywheel_cmd(
    since: str,
    out: str,
    tenant: str,
    system_prompt: str | None,
    no_redact: bool,
    include_approved: bool,
    database_url: str | None,
) -> None:
    """Write flagged calls with human corrections as chat fine-tuning JSONL."""
    from judges.export import export_flywheel

    collector_settings = load_settings(database_url=database_url)
    settings = load_judge_settings()
    engine = store_engine.make_engine(collector_settings.database_url)
    try:
        report = export_flywheel(
            engine,
            tenant,
            out,
            since_ns=_parse_since(since),
            low_score_threshold=settings.low_score_threshold,
            system_prompt=system_prompt,
            redact=not no_redact,
            include_approved=include_approved,
        )
    finally:
        engine.dispose()
    click.echo(f"wrote {report.lines} examples to {out}")
