"""Start-up checks of ``driftline collector``: each failure is one or two lines that name the
setting or port and say what to do (instead of a traceback from inside the server's start-up)."""

from __future__ import annotations

import socket

import click
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from collector.store import engine as store_engine


def port_in_use(host: str, port: int) -> bool:
    """True when ``host:port`` cannot be bound (something listens there)."""
    if port == 0:
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def check_ports(host: str, ports: dict[str, tuple[int, str]]) -> None:
    """Raise ClickException for the first of ``ports`` ({what: (port, setting)}) in use."""
    for what, (port, setting) in ports.items():
        if port_in_use(host, port):
            raise click.ClickException(
                f"port {port} ({what}) on {host} is in use by another process.\n"
                f"Stop it, or choose another port with {setting}."
            )


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return lines[0] if lines else type(orig).__name__


def check_database(url: str) -> None:
    """Connect once to ``url``; raise ClickException naming DRIFTLINE_DATABASE_URL (password
    hidden) with the driver's reason and the likely fix."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError as exc:
        raise click.ClickException(
            f"DRIFTLINE_DATABASE_URL is not a database URL ({exc}).\n"
            "Use sqlite:///path/driftline.db or postgresql+psycopg://user@host:5432/name."
        ) from None
    try:
        engine = store_engine.make_engine(url)
    except (NoSuchModuleError, ArgumentError, ImportError) as exc:
        raise click.ClickException(
            f"DRIFTLINE_DATABASE_URL={shown}: unsupported ({_first_line(exc)})."
        ) from None
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as exc:
        reason = _first_line(exc)
        if "does not exist" in reason:
            hint = "create it (e.g. `createdb NAME`) or point DRIFTLINE_DATABASE_URL elsewhere"
        elif "refused" in reason or "timeout" in reason.lower() or "resolve" in reason:
            hint = "start PostgreSQL there, or fix host/port in DRIFTLINE_DATABASE_URL"
        else:
            hint = "fix DRIFTLINE_DATABASE_URL (or --database-url)"
        raise click.ClickException(
            f"cannot open the database DRIFTLINE_DATABASE_URL={shown}: {reason}\n{hint}."
        ) from None
    except SQLAlchemyError as exc:
        raise click.ClickException(
            f"cannot open the database DRIFTLINE_DATABASE_URL={shown}: {_first_line(exc)}"
        ) from None
    finally:
        engine.dispose()
