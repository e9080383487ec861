"""Default side folders (spool, lake) follow the store: one per store, never shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.lake.layout import default_lake_url
from collector.settings import Settings, load_settings
from collector.sidecar import store_sidecar

PG = "postgresql+psycopg://127.0.0.1:5432/"


def test_sqlite_side_folders_sit_beside_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    assert store_sidecar(url, "spool") == f"{tmp_path}/x.db-spool"
    assert default_lake_url(url) == store_sidecar(url, "lake") == f"{tmp_path}/x.db-lake"
    assert store_sidecar("sqlite://", "spool").endswith("/driftline-data/spool")  # in-memory


def test_postgresql_side_folders_differ_per_database_and_schema() -> None:
    a, b = store_sidecar(PG + "a", "spool"), store_sidecar(PG + "b", "spool")
    assert a != b and a.endswith("driftline-data/spool-127.0.0.1-5432-a")
    schema = store_sidecar(PG + "a?options=-csearch_path%3Ds2", "spool")
    assert schema not in (a, b)
    assert default_lake_url(PG + "a") == store_sidecar(PG + "a", "lake")


def test_spool_on_by_default_beside_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DRIFTLINE_SPOOL_DIR", raising=False)
    monkeypatch.delenv("DRIFTLINE_SPOOL_ENABLED", raising=False)
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    s = Settings()
    assert s.spool_enabled is True
    assert s.spool_dir == Path(f"{tmp_path}/env.db-spool")
    assert Settings(database_url=f"sqlite:///{tmp_path}/y.db").spool_dir == tmp_path / "y.db-spool"
    monkeypatch.setenv("DRIFTLINE_SPOOL_DIR", str(tmp_path / "mine"))
    assert Settings().spool_dir == tmp_path / "mine"  # an explicit directory wins


def test_empty_spool_dir_means_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRIFTLINE_SPOOL_DIR", "")  # not the working directory
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", f"sqlite:///{tmp_path}/z.db")
    assert load_settings().spool_dir == tmp_path / "z.db-spool"
