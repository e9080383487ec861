"""``driftline collector`` and ``driftline db`` commands."""

from __future__ import annotations

import datetime as dt
import gc
import logging
import os
from pathlib import Path

import click

from collector.auth import ROLES
from collector.errors import MigrationError
from collector.settings import load_settings
from collector.store import engine as store_engine
from driftline.quarantine_cli import quarantine


@click.command("collector")
@click.option("--host", default=None, help="Bind address (default 127.0.0.1).")
@click.option("--port", "http_port", type=int, default=None, help="OTLP/HTTP + REST port (4318).")
@click.option("--grpc-port", type=int, default=None, help="OTLP/gRPC port (4317).")
@click.option("--database-url", default=None, help="Overrides DRIFTLINE_DATABASE_URL.")
@click.option(
    "--dev", is_flag=True, default=None, help="Single tenant `default`, no API keys, loopback only."
)
@click.option("--log-level", default="info", show_default=True)
def collector(
    host: str | None,
    http_port: int | None,
    grpc_port: int | None,
    database_url: str | None,
    dev: bool | None,
    log_level: str,
) -> None:
    """Run the collector: OTLP receivers (HTTP 4318, gRPC 4317), REST API, /metrics."""
    import uvicorn

    from driftline.app import create_app
    from driftline.preflight import check_database, check_ports

    settings = load_settings(
        host=host, http_port=http_port, grpc_port=grpc_port, database_url=database_url, dev=dev
    )
    ports = {"OTLP/HTTP + API": (settings.http_port, "--port / DRIFTLINE_HTTP_PORT")}
    if settings.grpc_enabled:
        ports["OTLP/gRPC"] = (settings.grpc_port, "--grpc-port / DRIFTLINE_GRPC_PORT")
    check_ports(settings.host, ports)
    check_database(settings.database_url)
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    click.echo(
        f"driftline collector: OTLP/HTTP + API http://{settings.host}:{settings.http_port} "
        f"(docs /docs), OTLP/gRPC {settings.host}:{settings.grpc_port}, "
        f"store {settings.database_url}"
    )
    tune_gc()
    uvicorn.run(
        app, host=settings.host, port=settings.http_port, log_level=log_level, access_log=False
    )


#: generation-0 threshold of the collector process (CPython's default is 700 allocations)
GC_GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    """Garbage-collector settings of the long-running collector process.

    Every span is a dozen container objects that live until its batch commits, so with the
    default thresholds (700, 10, 10) each one is traversed by several young collections, and
    every full collection walks the ~250k objects of the imported libraries as well. Freezing
    the start-up objects (``gc.freeze``: never traversed again) and collecting young objects
    every 50k allocations instead of 700 leaves reference counting to free everything that is
    not in a cycle, as before. Measured with ``benchmarks/ingest.py`` (40k spans, thread CPU
    time in ``gc.callbacks``): the cyclic GC took 2.7 s of the collector's ~17 s; now 0.9 s.
    """
    gc.collect()  # start-up garbage is freed, not frozen
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


@click.group("db")
def db() -> None:
    """Schema migrations of the store (alembic)."""


@db.command("upgrade")
@click.argument("revision", default="heads")
@click.option("--database-url", default=None)
def db_upgrade(revision: str, database_url: str | None) -> None:
    """Migrate the store up to REVISION (default: all heads)."""
    settings = load_settings(database_url=database_url)
    try:
        store_engine.upgrade(settings.database_url, revision)
    except MigrationError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"at revision {store_engine.current(settings.database_url)}")


@db.command("downgrade", context_settings={"ignore_unknown_options": True})  # `-1` is no option
@click.argument("revision")
@click.option("--database-url", default=None)
def db_downgrade(revision: str, database_url: str | None) -> None:
    """Migrate the store down to REVISION: a revision id, `base` (drops everything),
    `<revision>-N` or `<branch>@-N`. A bare `-N` is refused while several branch heads are
    applied (`driftline db current` lists them)."""
    settings = load_settings(database_url=database_url)
    try:
        store_engine.downgrade(settings.database_url, revision)
    except MigrationError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"at revision {store_engine.current(settings.database_url)}")


@db.command("current")
@click.option("--database-url", default=None)
def db_current(database_url: str | None) -> None:
    """Print the store's current revision."""
    settings = load_settings(database_url=database_url)
    click.echo(store_engine.current(settings.database_url) or "none (empty database)")


@click.group("keys")
def keys() -> None:
    """API keys: the tenant of every stored row comes from the key that sent it."""


@keys.command("create")
@click.option("--tenant", required=True, help="Tenant name (created if new).")
@click.option(
    "--role",
    type=click.Choice(list(ROLES)),
    help="admin: manages its own tenant; platform-admin: also reads every tenant.",
    default="ingest",
    show_default=True,
)
@click.option("--name", default=None, help="A label for the key.")
@click.option(
    "--speaks-for",
    default=None,
    help="gateway keys: comma list of tenants whose spans the key may file (driftline.tenant).",
)
@click.option("--database-url", default=None)
def keys_create(
    tenant: str, role: str, name: str | None, speaks_for: str | None, database_url: str | None
) -> None:
    """Create a key and print it once (only its hash is stored)."""
    from collector.auth import create_key

    settings = load_settings(database_url=database_url)
    store_engine.upgrade(settings.database_url)
    eng = store_engine.make_engine(settings.database_url)
    try:
        tenants = [t.strip() for t in (speaks_for or "").split(",") if t.strip()]
        key = create_key(eng, tenant, role, name, tenants)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    finally:
        eng.dispose()
    click.echo(key)
    click.echo(
        f"(tenant {tenant}, role {role}; shown once. Use `Authorization: Bearer <key>`, e.g. "
        'OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer <key>")',
        err=True,
    )


@keys.command("revoke")
@click.argument("key_id")
@click.option("--database-url", default=None)
def keys_revoke(key_id: str, database_url: str | None) -> None:
    """Revoke a key by its id (the part after `dl_`)."""
    from collector.auth import revoke_key

    settings = load_settings(database_url=database_url)
    eng = store_engine.make_engine(settings.database_url)
    try:
        if not revoke_key(eng, key_id.removeprefix("dl_").split("_")[0]):
            raise click.ClickException(f"no active key {key_id}")
    finally:
        eng.dispose()
    click.echo(f"revoked {key_id}")


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
@click.option("--database-url", default=None)
def keys_list(tenant: str | None, database_url: str | None) -> None:
    """List keys, tab-separated: tenant, key id, role, name, created, revoked (UTC ISO 8601;
    revoked empty while active). Never a secret: only its hash is stored, and not shown."""
    from sqlalchemy import select

    from collector.store.models.api import ApiKey

    settings = load_settings(database_url=database_url)
    eng = store_engine.make_engine(settings.database_url)
    cols = (ApiKey.tenant, ApiKey.key_id, ApiKey.role, ApiKey.name)
    q = select(*cols, ApiKey.created_at, ApiKey.revoked_at).order_by(
        ApiKey.tenant, ApiKey.created_at, ApiKey.key_id
    )
    if tenant is not None:
        q = q.where(ApiKey.tenant == tenant)
    try:
        with eng.connect() as conn:
            rows = conn.execute(q).all()
    finally:
        eng.dispose()
    click.echo("tenant\tkey_id\trole\tname\tcreated\trevoked")
    for t, key_id, role, name, created, revoked in rows:
        when = [d.isoformat(timespec="seconds") if d else "" for d in (created, revoked)]
        fields = [t, key_id, role, name or "", *when]
        # names are free text: tabs and line breaks would break the columns
        click.echo("\t".join(" ".join(f.split()) if f else "" for f in fields))


@click.group("tenants")
def tenants() -> None:
    """Tenant policies: content capture and retention."""


@tenants.command("set")
@click.argument("name")
@click.option("--capture-content", type=click.Choice(["none", "redacted", "full"]), default=None)
@click.option("--retention-days", type=click.IntRange(min=1), default=None)
@click.option("--database-url", default=None)
def tenants_set(
    name: str, capture_content: str | None, retention_days: int | None, database_url: str | None
) -> None:
    """Create or update tenant NAME's policy."""
    from sqlalchemy import update

    from collector.auth import ensure_tenant
    from collector.store.models import Tenant

    settings = load_settings(database_url=database_url)
    store_engine.upgrade(settings.database_url)
    eng = store_engine.make_engine(settings.database_url)
    try:
        ensure_tenant(eng, name)
        values: dict[str, object] = {}
        if capture_content:
            values["capture_content"] = capture_content
        if retention_days:
            values["retention_days"] = retention_days
        if values:
            with eng.begin() as conn:
                conn.execute(update(Tenant).where(Tenant.name == name).values(**values))
    finally:
        eng.dispose()
    click.echo(f"tenant {name}: {values or 'unchanged'}")


@click.group("retention")
def retention() -> None:
    """Delete telemetry older than each tenant's retention policy."""


@retention.command("apply")
@click.option("--batch-size", type=click.IntRange(min=1), default=5000, show_default=True)
@click.option("--database-url", default=None)
def retention_apply(batch_size: int, database_url: str | None) -> None:
    """Delete calls, spans and linked feedback older than the tenant's retention_days."""
    from collector.store.retention import apply_retention

    settings = load_settings(database_url=database_url)
    eng = store_engine.make_engine(settings.database_url)
    try:
        for tenant, counts in apply_retention(eng, batch_size=batch_size).items():
            click.echo(f"{tenant}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    finally:
        eng.dispose()


@click.group("spool")
def spool() -> None:
    """The durable spool of OTLP requests (DRIFTLINE_SPOOL_DIR)."""


spool.add_command(quarantine)


@spool.command("replay")
@click.option(
    "--since",
    required=True,
    help="Replay requests received at or after this time: ISO 8601 (UTC if no zone) or unix s.",
)
@click.option("--database-url", default=None)
@click.option("--spool-dir", type=click.Path(path_type=Path), default=None)
def spool_replay(since: str, database_url: str | None, spool_dir: Path | None) -> None:
    """Re-derive call records from kept spool segments (idempotent)."""
    from collector.cost.prices import PriceTable
    from collector.spool.replay import replay

    settings = load_settings(database_url=database_url, spool_dir=spool_dir)
    try:
        since_ns = int(float(since) * 1e9)
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(since)
        except ValueError:
            raise click.BadParameter(f"not ISO 8601 or unix seconds: {since!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        since_ns = int(when.timestamp() * 1e9)
    engine = store_engine.make_engine(settings.database_url)
    try:
        records, spans = replay(
            settings.spool_dir,
            engine,
            PriceTable.load(settings.prices),
            since_ns,
            capture_default=settings.capture_content,
            max_text_chars=settings.max_text_chars,
        )
    finally:
        engine.dispose()
    click.echo(f"replayed {records} requests, {spans} spans from {settings.spool_dir}")


@spool.command("process")
@click.option(
    "--spool-dir",
    "spool_dirs",
    type=click.Path(path_type=Path),
    multiple=True,
    help="A spool to drain (repeat for several collectors' spools); default DRIFTLINE_SPOOL_DIR.",
)
@click.option("--database-url", default=None)
@click.option(
    "--wait/--no-wait",
    default=False,
    help="When another processor consumes a spool: wait for it to stop (default: refuse).",
)
@click.option("--log-level", default="info", show_default=True)
def spool_process(
    spool_dirs: tuple[Path, ...], database_url: str | None, wait: bool, log_level: str
) -> None:
    """Normalise and write spooled requests into the store until SIGTERM / Ctrl-C.

    Run it beside collectors started with DRIFTLINE_SPOOL_PROCESSOR=external (each collector
    its own spool directory). Only one processor consumes a directory at a time.
    """
    import signal
    import threading

    from collector.spool.reader import SpoolLockedError, acquire_processor_lock
    from collector.spool.worker import run_processor

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = load_settings(database_url=database_url)
    dirs = [Path(d) for d in spool_dirs] or [settings.spool_dir]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    held: list[int] = []
    try:
        for d in dirs:  # refuse (or wait) up front; the processors take the lock again
            fd = acquire_processor_lock(d, wait=wait, stop=stop.is_set, on_wait=click.echo)
            if fd is None:
                return
            held.append(fd)
    except SpoolLockedError as exc:
        raise click.ClickException(f"{exc}; stop it first, or pass --wait") from None
    finally:
        for fd in held:
            os.close(fd)
    if settings.auto_migrate:
        store_engine.upgrade(settings.database_url)
    from collector.spool.processor import tune_gc as tune_processor_gc

    tune_processor_gc()  # as the supervised processor process (collector.spool.worker.child_main)
    run_processor(settings, dirs, stop.is_set)
