"""The demo's data folder on a rerun: what is kept, moved aside or deleted (said in one line).

The story demo (real vLLM) creates rollouts, whose decision history is immutable: a rerun cannot
reuse them, so each story run starts from a fresh SQLite database of its own and keeps the
previous one as ``driftline.previous.db`` (alert rules are upserted either way). The replay demo
creates no objects and reuses the database (its summary counts only this run's calls).
``--reset`` deletes the previous run's database, logs and summary first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

DB = "driftline.db"
PREVIOUS = "driftline.previous.db"
#: SQLite's side files of a database (write-ahead log, shared memory) and its lake (a folder
#: of sealed hours: collector.lake.layout.default_lake_url) and its spool (collector.sidecar)
_SIDES = ("", "-wal", "-shm", "-journal", "-lake", "-spool")
#: what a demo run writes into its data folder, besides the databases
_RUN_FILES = ("demo-summary.json", "gateway.yaml", "receivers.toml", "collector.log")


def _db_files(data_dir: Path, name: str) -> list[Path]:
    return [data_dir / f"{name}{side}" for side in _SIDES if (data_dir / f"{name}{side}").exists()]


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


def prepare_data_dir(data_dir: Path, *, reset: bool, fresh_store: bool) -> str:
    """Make ``data_dir`` ready for a run; returns the line that tells the user what happened.

    Args:
        data_dir: the demo's data folder (created when absent).
        reset: delete the previous run's databases, logs and summary.
        fresh_store: start from an empty database, keeping an existing one as
            ``driftline.previous.db`` (replacing an older copy).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    if reset:
        for path in _db_files(data_dir, DB) + _db_files(data_dir, PREVIOUS):
            _remove(path)
        for name in _RUN_FILES:
            (data_dir / name).unlink(missing_ok=True)
        shutil.rmtree(data_dir / "logs", ignore_errors=True)
        return f"--reset: deleted the previous demo's database, logs and summary in {data_dir}"
    existing = _db_files(data_dir, DB)
    if not existing:
        return f"data folder {data_dir}: new database {data_dir / DB}"
    if not fresh_store:
        return (
            f"reusing {data_dir / DB} (earlier runs' calls stay; the summary counts this run's; "
            "--reset starts empty)"
        )
    for path in _db_files(data_dir, PREVIOUS):
        _remove(path)
    for path in existing:
        path.rename(data_dir / path.name.replace(DB, PREVIOUS, 1))
    return (
        f"a previous demo's database is kept as {data_dir / PREVIOUS}; this run starts from a "
        "fresh one (its rollouts are new; --reset deletes the old one instead)"
    )
