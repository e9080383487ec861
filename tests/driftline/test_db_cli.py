"""``driftline db upgrade/downgrade/current`` on a real SQLite file store."""

from __future__ import annotations

from pathlib import Path

from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import inspect

from collector.store import engine as store_engine
from driftline.cli import cli


def _db(runner: CliRunner, url: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(cli, ["db", *args, "--database-url", url])
    return result.exit_code, result.output


def _tables(url: str) -> set[str]:
    eng = store_engine.make_engine(url)
    try:
        return set(inspect(eng).get_table_names()) - {"alembic_version"}
    finally:
        eng.dispose()


def test_upgrade_downgrade_to_base_and_up_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/driftline.db"
    heads = ScriptDirectory.from_config(store_engine.alembic_config(url)).get_heads()
    assert len(heads) > 1  # one branch per package: what makes a bare `-1` ambiguous
    runner = CliRunner()
    code, out = _db(runner, url, "upgrade")
    assert code == 0, out
    assert out.strip() == f"at revision {','.join(sorted(heads))}"
    assert "spans" in _tables(url)

    code, out = _db(runner, url, "downgrade", "base")
    assert code == 0, out
    assert out.strip() == "at revision None"
    assert _tables(url) == set()
    assert _db(runner, url, "current") == (0, "none (empty database)\n")

    code, out = _db(runner, url, "upgrade")
    assert code == 0, out
    assert store_engine.current(url) == ",".join(sorted(heads))


def test_downgrade_needs_a_target_and_refuses_an_ambiguous_relative_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/driftline.db"
    runner = CliRunner()
    assert _db(runner, url, "upgrade")[0] == 0
    before = store_engine.current(url)
    assert before is not None
    heads = before.split(",")

    code, out = _db(runner, url, "downgrade")
    assert code == 2 and "Missing argument 'REVISION'" in out

    code, out = _db(runner, url, "downgrade", "-1")
    assert code != 0
    assert "Traceback" not in out
    assert "ambiguous" in out and all(h in out for h in heads), out
    assert store_engine.current(url) == before  # nothing was touched

    code, out = _db(runner, url, "downgrade", "nosuch")
    assert code != 0 and "Can't locate revision identified by 'nosuch'" in out

    code, out = _db(runner, url, "downgrade", "search_0003-1")  # relative to a named head
    assert code == 0, out
    assert store_engine.current(url) == before.replace("search_0003", "search_0002")

    assert _db(runner, url, "downgrade", "0003")[0] == 0  # below the branch point: one head
    code, out = _db(runner, url, "downgrade", "-1")
    assert code == 0, out
    assert store_engine.current(url) == "0002"
