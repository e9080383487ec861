"""``driftline spool quarantine list | show | replay``: the spooled records the processor set
aside (:mod:`collector.spool.quarantine`) and their re-processing after a fix."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path

import click

from collector.settings import load_settings
from collector.spool.quarantine import Quarantine
from collector.store import engine as store_engine

_SPOOL_DIR = click.option(
    "--spool-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The spool directory (default DRIFTLINE_SPOOL_DIR).",
)


def _quarantine(spool_dir: Path | None) -> Quarantine:
    if spool_dir is not None:
        return Quarantine(spool_dir)
    return Quarantine(load_settings().spool_dir)


@click.group("quarantine")
def quarantine() -> None:
    """Spooled requests the processor could not store, set aside so that it went on."""


@quarantine.command("list")
@_SPOOL_DIR
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def quarantine_list(spool_dir: Path | None, as_json: bool) -> None:
    """Every quarantined record: id, when, tenant, kind, size, reason, error (first line)."""
    entries = _quarantine(spool_dir).entries()
    for e in entries:
        if as_json:
            click.echo(json.dumps(asdict(e)))
            continue
        when = dt.datetime.fromtimestamp(e.quarantined_unix, dt.UTC).isoformat(timespec="seconds")
        first = e.error.splitlines()[0][:120] if e.error else ""
        click.echo(f"{e.id}  {when}  {e.tenant}  {e.kind}  {e.size} B  {e.reason}: {first}")
    if not as_json:
        click.echo(f"{len(entries)} records in quarantine")


@quarantine.command("show")
@click.argument("record_id")
@_SPOOL_DIR
@click.option("--body", is_flag=True, help="Also print the request body (JSON as is, else hex).")
def quarantine_show(record_id: str, spool_dir: Path | None, body: bool) -> None:
    """One quarantined record's details (and its body with --body)."""
    try:
        entry, rec = _quarantine(spool_dir).get(record_id)
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from None
    click.echo(json.dumps(asdict(entry), indent=2))
    if body:
        try:
            click.echo(rec.body.decode())
        except UnicodeDecodeError:
            click.echo(rec.body.hex())


@quarantine.command("replay")
@click.argument("record_ids", nargs=-1)
@_SPOOL_DIR
@click.option("--database-url", default=None)
def quarantine_replay(
    record_ids: tuple[str, ...], spool_dir: Path | None, database_url: str | None
) -> None:
    """Re-process quarantined records (all, or the ids given) after a fix: those that store
    now are removed from the quarantine, the others stay with their new reason. Exits 1 when
    some failed again."""
    from collector.cost.prices import PriceTable
    from collector.errors import QueueFullError, StoreUnavailableError
    from collector.spool.replay import replay_quarantine

    settings = load_settings(database_url=database_url, spool_dir=spool_dir)
    engine = store_engine.make_engine(settings.database_url)
    try:
        stored, failed = replay_quarantine(
            settings.spool_dir,
            engine,
            PriceTable.load(settings.prices),
            ids=record_ids,
            capture_default=settings.capture_content,
            max_text_chars=settings.max_text_chars,
        )
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from None
    except (StoreUnavailableError, QueueFullError) as exc:
        raise click.ClickException(f"the store is unavailable, nothing more tried: {exc}") from None
    finally:
        engine.dispose()
    for rid, error in failed.items():
        click.echo(f"{rid} failed again: {error.splitlines()[0][:200] if error else ''}")
    click.echo(f"{len(stored)} records stored and removed, {len(failed)} left in quarantine")
    if failed:
        raise SystemExit(1)
