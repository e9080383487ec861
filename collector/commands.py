"""``driftline collector`` and ``driftline db`` commands."""

from __future__ import annotations

import logging

import click

from collector.settings import load_settings
from collector.store import engine as store_engine


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

    from collector.app import create_app

    settings = load_settings(
        host=host, http_port=http_port, grpc_port=grpc_port, database_url=database_url, dev=dev
    )
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    click.echo(
        f"driftline collector: OTLP/HTTP + API http://{settings.host}:{settings.http_port} "
        f"(docs /docs), OTLP/gRPC {settings.host}:{settings.grpc_port}, "
        f"store {settings.database_url}"
    )
    uvicorn.run(
        app, host=settings.host, port=settings.http_port, log_level=log_level, access_log=False
    )


@click.group("db")
def db() -> None:
    """Schema migrations of the store (alembic)."""


@db.command("upgrade")
@click.argument("revision", default="heads")
@click.option("--database-url", default=None)
def db_upgrade(revision: str, database_url: str | None) -> None:
    """Migrate the store up to REVISION (default: all heads)."""
    settings = load_settings(database_url=database_url)
    store_engine.upgrade(settings.database_url, revision)
    click.echo(f"at revision {store_engine.current(settings.database_url)}")


@db.command("downgrade")
@click.argument("revision", default="-1")
@click.option("--database-url", default=None)
def db_downgrade(revision: str, database_url: str | None) -> None:
    """Migrate the store down to REVISION (default: one step; `base` drops everything)."""
    settings = load_settings(database_url=database_url)
    store_engine.downgrade(settings.database_url, revision)
    click.echo(f"at revision {store_engine.current(settings.database_url)}")


@db.command("current")
@click.option("--database-url", default=None)
def db_current(database_url: str | None) -> None:
    """Print the store's current revision."""
    settings = load_settings(database_url=database_url)
    click.echo(store_engine.current(settings.database_url) or "none (empty database)")
