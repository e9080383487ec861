"""``driftline keys list``: every key's tenant, id, role, name, created and revoked times,
never a secret (attack report, "Smaller": the keys CLI could create and revoke, not list)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from collector.auth import create_key, revoke_key
from collector.store import engine as store_engine
from driftline.cli import cli


def test_keys_list_shows_keys_without_secrets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    store_engine.upgrade(url)
    eng = store_engine.make_engine(url)
    acme_read = create_key(eng, "acme", "read", "dash\tboard\nkey")
    acme_admin = create_key(eng, "acme", "admin")
    other = create_key(eng, "other", "ingest", "otel")
    assert revoke_key(eng, acme_read.split("_")[1])
    eng.dispose()

    out = CliRunner().invoke(cli, ["keys", "list", "--database-url", url])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split("\t") == ["tenant", "key_id", "role", "name", "created", "revoked"]
    rows = {r[1]: r for r in (line.split("\t") for line in lines[1:])}
    assert len(rows) == 3 and all(len(r) == 6 for r in rows.values())
    read_id, admin_id, other_id = (k.split("_")[1] for k in (acme_read, acme_admin, other))
    assert rows[read_id][:4] == ["acme", read_id, "read", "dash board key"]
    assert rows[read_id][5].startswith("20")  # revoked: when
    assert rows[admin_id][:4] == ["acme", admin_id, "admin", ""] and rows[admin_id][5] == ""
    assert rows[other_id][:4] == ["other", other_id, "ingest", "otel"]
    for key in (acme_read, acme_admin, other):
        assert key.split("_", 2)[2] not in out.output  # the secret part is never shown

    only = CliRunner().invoke(cli, ["keys", "list", "--tenant", "other", "--database-url", url])
    assert only.exit_code == 0, only.output
    assert [line.split("\t")[1] for line in only.output.splitlines()[1:]] == [other_id]
