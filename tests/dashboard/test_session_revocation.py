"""An open dashboard session ends when its key is revoked (it used to work until logout).

Streamlit's AppTest runs the real app against a real SQLite store: log in with a key, revoke
the key from another process (``driftline keys revoke``), and the next run shows the login form.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from collector.auth import create_key
from collector.store import engine as store_engine
from tests.dashboard.conftest import APP


def test_revoked_key_ends_the_open_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    store_engine.upgrade(url)
    eng = store_engine.make_engine(url)
    key = create_key(eng, "acme", "read")
    eng.dispose()
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "false")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    assert [t.label for t in at.text_input] == ["API key"]  # the login form
    at.text_input[0].input(key)
    at.button[0].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "driftline_principal" in at.session_state
    assert not [t for t in at.text_input if t.label == "API key"]  # logged in

    cli = [sys.executable, "-m", "driftline.cli", "keys", "revoke", key.split("_")[1]]
    out = subprocess.run([*cli, "--database-url", url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr

    at.run()
    assert "driftline_principal" not in at.session_state
    assert [t.label for t in at.text_input] == ["API key"]
    assert any("revoked" in w.value for w in at.warning)
