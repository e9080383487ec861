"""``driftline export calls|traces|feedback``: streamed exports with a progress bar.

Attached to the ``export`` group of :mod:`judges.cli` by :mod:`driftline.cli`. Rows come
from :mod:`collector.store.exports` (the calls filters of ``GET /api/v1/calls``); the
progress bar (rich) goes to stderr so ``--out -`` can pipe the data. In CSV, a text cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a CR gets a leading ``'`` so no spreadsheet runs
it as a formula (:func:`collector.store.exports.csv_cell`); JSON Lines and Parquet are unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from collector.settings import load_settings
from collector.store import engine as store_engine
from collector.store import exports, queries, traces
from driftline.api.params import MAX_SECONDS, parse_time

_common = [
    click.option(
        "--format",
        "fmt",
        type=click.Choice(exports.FORMATS),
        default="jsonl",
        show_default=True,
        help="csv: cells starting =, +, -, @, tab or CR get a leading ' (no formulas run).",
    ),
    click.option("--out", required=True, help="File to write, or - for stdout."),
    click.option("--tenant", default="default", show_default=True),
    click.option("--since", default=None, help="unix seconds or ISO 8601"),
    click.option("--until", default=None, help="unix seconds or ISO 8601"),
    click.option("--database-url", default=None, help="Overrides DRIFTLINE_DATABASE_URL."),
    click.option("--no-progress", is_flag=True, help="No progress bar."),
]


def _options(fn: Any) -> Any:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


def _time(value: str | None, name: str) -> int | None:
    try:
        return parse_time(value, name)
    except Exception as exc:
        raise click.BadParameter(str(exc), param_hint=f"--{name}") from None


@contextmanager
def _sink(out: str, fmt: str) -> Iterator[IO[bytes]]:
    if out == "-":
        if fmt == "parquet" and sys.stdout.isatty():
            raise click.UsageError("refusing to write parquet to a terminal; use --out FILE")
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with open(out, "wb") as fh:
        yield fh


def _run(
    kind: str, pages: Iterator[list[dict[str, Any]]], fmt: str, out: str, no_progress: bool
) -> None:
    console = Console(stderr=True)
    with (
        Progress(
            SpinnerColumn(),
            TextColumn(f"exporting {kind}"),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=no_progress,
            transient=False,
        ) as progress,
        _sink(out, fmt) as sink,
    ):
        task = progress.add_task(kind, total=None)
        try:
            n = exports.write(pages, kind, fmt, sink, lambda k: progress.advance(task, k))
        except ValueError as exc:  # a bad filter (search query, status) found while reading
            raise click.UsageError(str(exc)) from None
    console.print(f"wrote {n} {kind} to {out}")


def _engine(database_url: str | None) -> Any:
    return store_engine.make_engine(load_settings(database_url=database_url).database_url)


@click.command("calls")
@_options
@click.option("--model", default=None)
@click.option("--service", default=None)
@click.option("--variant", default=None)
@click.option("--rollout", default=None)
@click.option("--finish-reason", default=None)
@click.option("--user", default=None)
@click.option("--session", default=None)
@click.option("-q", "--query", "q", default=None, help="Full-text search of captured text.")
def calls_cmd(
    fmt: str,
    out: str,
    tenant: str,
    since: str | None,
    until: str | None,
    database_url: str | None,
    no_progress: bool,
    model: str | None,
    service: str | None,
    variant: str | None,
    rollout: str | None,
    finish_reason: str | None,
    user: str | None,
    session: str | None,
    q: str | None,
) -> None:
    """Export call records (the filters of GET /api/v1/calls), newest first."""
    flt = queries.CallFilter(
        model=model,
        service=service,
        variant=variant,
        rollout=rollout,
        finish_reason=finish_reason,
        user_id=user,
        session_id=session,
        q=q,
        since_unix_nano=_time(since, "since"),
        until_unix_nano=_time(until, "until"),
    )
    engine = _engine(database_url)
    try:
        _run("calls", exports.iter_calls(engine, tenant, flt), fmt, out, no_progress)
    finally:
        engine.dispose()


@click.command("traces")
@_options
@click.option("--service", default=None)
@click.option("--status", type=click.Choice(traces.STATUSES), default=None)
@click.option("--user", default=None)
@click.option("--session", default=None)
@click.option("--min-duration-s", type=click.FloatRange(min=0, max=MAX_SECONDS), default=None)
def traces_cmd(
    fmt: str,
    out: str,
    tenant: str,
    since: str | None,
    until: str | None,
    database_url: str | None,
    no_progress: bool,
    service: str | None,
    status: str | None,
    user: str | None,
    session: str | None,
    min_duration_s: float | None,
) -> None:
    """Export trace summaries (totals per trace), newest first."""
    flt = traces.TraceFilter(
        since_unix_nano=_time(since, "since"),
        until_unix_nano=_time(until, "until"),
        service=service,
        status=status,
        user_id=user,
        session_id=session,
        min_duration_s=min_duration_s,
    )
    engine = _engine(database_url)
    try:
        _run("traces", exports.iter_traces(engine, tenant, flt), fmt, out, no_progress)
    finally:
        engine.dispose()


@click.command("feedback")
@_options
def feedback_cmd(
    fmt: str,
    out: str,
    tenant: str,
    since: str | None,
    until: str | None,
    database_url: str | None,
    no_progress: bool,
) -> None:
    """Export feedback events, oldest first."""
    engine = _engine(database_url)
    try:
        pages = exports.iter_feedback(
            engine,
            tenant,
            since_unix_nano=_time(since, "since"),
            until_unix_nano=_time(until, "until"),
        )
        _run("feedback", pages, fmt, out, no_progress)
    finally:
        engine.dispose()


def attach(group: click.Group) -> click.Group:
    """Add ``calls``, ``traces`` and ``feedback`` to the ``export`` group; idempotent."""
    for cmd in (calls_cmd, traces_cmd, feedback_cmd):
        if cmd.name not in group.commands:
            group.add_command(cmd)
    return group
