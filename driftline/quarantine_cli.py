"""``driftline spool quarantine list | show | replay | remove``: the spooled records the
processor set aside (:mod:`collector.spool.quarantine`), their re-processing after a fix, and
forgetting them. Ids are taken with or without ``list``'s zero padding."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path

import click

from collector.settings import load_settings
from collector.spool.quarantine import Quarantine, normalize_id
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


@quarantine.command("remove")
@click.argument("record_ids", nargs=-1)
@click.option("--all", "remove_all", is_flag=True, help="Remove every quarantined record.")
@_SPOOL_DIR
def quarantine_remove(
    record_ids: tuple[str, ...], remove_all: bool, spool_dir: Path | None
) -> None:
    """Forget quarantined records (the ids given, or --all) once looked at: their bodies are
    deleted, /healthz no longer counts them; the quarantine counter keeps them. Nothing is
    removed when an id is unknown or malformed (the error names it)."""
    if remove_all == bool(record_ids):
        raise click.UsageError("give the ids to remove, or --all (not both)")
    q = _quarantine(spool_dir)
    if remove_all:
        ids = [e.id for e in q.entries()]
    else:
        known = {e.id for e in q.entries()}
        try:
            ids = [normalize_id(r, q.dir) for r in record_ids]
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        missing = [r for r, rid in zip(record_ids, ids, strict=True) if rid not in known]
        if missing:
            raise click.ClickException(
                f"not in the quarantine {q.dir}: {', '.join(missing)} (nothing removed; "
                "`driftline spool quarantine list` shows the ids)"
            )
    removed = sum(q.remove(rid) for rid in dict.fromkeys(ids))
    click.echo(f"{removed} records removed from the quarantine")
