"""Database engines and schema migrations.

``make_engine`` dispatches on the URL's dialect; ``upgrade``/``downgrade``/``current`` drive
alembic programmatically against ``migrations/`` (which never imports project code).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.util import CommandError
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

import migrations
from collector.errors import MigrationError


def _json_dumps(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``).

    SQLite: the database file's folder is created on first use, and each connection gets the
    pragmas below. PostgreSQL: a pre-pinged pool whose sessions wait at most 2 s for a lock.
    """
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        db = u.database
        if db and db != ":memory:" and not db.startswith("file:"):
            Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            echo=echo,
            json_serializer=_json_dumps,
            connect_args={"timeout": 30, "check_same_thread": False},
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            # WAL: readers (API, drift, dashboard) never block the single writer.
            cur.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is fsynced, so an acknowledged span survives kill -9 and power loss.
            cur.execute("PRAGMA synchronous=FULL")
            # Wait for the write lock (other processes, e.g. the CLI) instead of failing at once.
            cur.execute("PRAGMA busy_timeout=30000")
            # SQLite ignores foreign keys unless asked per connection.
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    engine = create_engine(url, echo=echo, pool_pre_ping=True, json_serializer=_json_dumps)

    @event.listens_for(engine, "connect")
    def _pg_session(dbapi_conn: Any, _record: Any) -> None:
        # A statement blocked by another session's lock (e.g. LOCK TABLE, DDL) fails after 2 s
        # (OperationalError -> 503 + Retry-After) instead of holding exporters past their 10 s
        # timeout; migrations stop instead of queueing every reader behind them.
        with dbapi_conn.cursor() as cur:
            cur.execute("SET lock_timeout = '2s'")
        dbapi_conn.commit()

    return engine


def alembic_config(url: str) -> Config:
    """An alembic ``Config`` for ``url`` pointing at the shipped ``migrations`` folder."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


#: ``-N`` with no revision or branch before it: relative to *the* current revision (alembic's
#: ``_relative_destination`` with neither ``branch@`` nor a symbol)
_BARE_RELATIVE = re.compile(r"-\d+")


def upgrade(url: str, revision: str = "heads") -> None:
    """Migrate the database at ``url`` up to ``revision`` (default: every branch head).

    Raises:
        MigrationError: alembic cannot resolve ``revision`` (its message, no traceback).
    """
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    except CommandError as exc:
        raise MigrationError(f"cannot upgrade to {revision!r}: {exc}") from None
    finally:
        engine.dispose()


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision``: a revision id (everything above
    it on its branch is removed), ``base`` (everything), ``<revision>-N`` or ``<branch>@-N``.

    A bare ``-N`` is accepted only while one head is applied: the history has one branch per
    package (``alerts``, ``calls``, ``search``, ...), and alembic would pick one of them.

    Raises:
        MigrationError: ``-N`` while several heads are applied (the message lists them), or a
            revision alembic cannot resolve.
    """
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            applied = sorted(MigrationContext.configure(conn).get_current_heads())
            if _BARE_RELATIVE.fullmatch(revision) and len(applied) > 1:
                raise MigrationError(
                    f"downgrade {revision} is ambiguous: {len(applied)} heads are applied "
                    f"({', '.join(applied)}); give a revision id, `<head>{revision}` "
                    f"(e.g. {applied[-1]}{revision}) or `base`"
                )
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
    except CommandError as exc:
        raise MigrationError(f"cannot downgrade to {revision!r}: {exc}") from None
    finally:
        engine.dispose()


def current(url: str) -> str | None:
    """The revision(s) the database at ``url`` is at (comma separated when several branches
    are applied), or None when it has none."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            heads = MigrationContext.configure(conn).get_current_heads()
            return ",".join(sorted(heads)) or None
    finally:
        engine.dispose()
