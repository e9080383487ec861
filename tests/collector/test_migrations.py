"""alembic: base -> head -> base on SQLite and PostgreSQL; migrations equal models.py."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from collector.store import engine as store_engine
from collector.store import search
from collector.store.models import Base


def test_roundtrip_and_schema_matches_models(db_url: str) -> None:
    store_engine.upgrade(db_url)
    assert store_engine.current(db_url) is not None
    eng = store_engine.make_engine(db_url)
    try:
        with eng.connect() as conn:
            opts = {"compare_type": True, "include_name": search.include_name}
            ctx = MigrationContext.configure(conn, opts=opts)
            diff = compare_metadata(ctx, Base.metadata)
            assert diff == [], diff
    finally:
        eng.dispose()
    store_engine.downgrade(db_url, "base")
    assert store_engine.current(db_url) is None
    eng = store_engine.make_engine(db_url)
    try:
        tables = set(inspect(eng).get_table_names()) - {"alembic_version"}
        assert tables == set()
    finally:
        eng.dispose()
    store_engine.upgrade(db_url)  # and up again
    assert store_engine.current(db_url) is not None


def test_sqlite_folder_created_on_first_use(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path}/a/b/c/driftline.db"
    store_engine.upgrade(url)
    assert (tmp_path / "a" / "b" / "c" / "driftline.db").exists()
