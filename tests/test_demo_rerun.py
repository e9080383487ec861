"""`driftline demo` twice on one data folder: the second run works (rules upserted; the story's
database moved aside; --reset deletes), and the replay demo reruns end to end."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from driftline.demo.api_client import Api, upsert_rules
from driftline.demo.datadir import prepare_data_dir
from driftline.demo.story import ALERT_RULES
from tests.conftest import LiveCollector, free_port


def test_alert_rules_are_upserted_on_a_rerun(live_collector: LiveCollector) -> None:
    api = Api(live_collector.http_url)
    upsert_rules(api, ALERT_RULES)
    changed = [{**ALERT_RULES[0], "severity": "warning"}, *ALERT_RULES[1:]]
    upsert_rules(api, changed)  # a second demo run: 409 on POST, replaced by PUT
    rules = {r["name"]: r for r in api.get("/api/v1/alerts/rules")["items"]}
    assert set(rules) == {r["name"] for r in ALERT_RULES}
    assert rules[ALERT_RULES[0]["name"]]["severity"] == "warning"


def _db(path: Path, marker: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (v TEXT)")
        db.execute("INSERT INTO t VALUES (?)", (marker,))


def test_story_rerun_keeps_the_previous_database_and_reset_deletes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert "new database" in prepare_data_dir(data, reset=False, fresh_store=True)
    _db(data / "driftline.db", "run-1")
    (data / "driftline.db-lake" / "calls").mkdir(parents=True)  # run 1's sealed hours
    line = prepare_data_dir(data, reset=False, fresh_store=True)
    assert "driftline.previous.db" in line and not (data / "driftline.db").exists()
    # the lake goes with its database: run 2 must not read run 1's hours
    assert not (data / "driftline.db-lake").exists()
    assert (data / "driftline.previous.db-lake" / "calls").is_dir()
    with sqlite3.connect(data / "driftline.previous.db") as db:
        assert db.execute("SELECT v FROM t").fetchone() == ("run-1",)
    _db(data / "driftline.db", "run-2")
    (data / "logs").mkdir()
    (data / "logs" / "vllm.log").write_text("x")
    (data / "demo-summary.json").write_text("{}")
    assert "--reset" in prepare_data_dir(data, reset=True, fresh_store=True)
    assert sorted(p.name for p in data.iterdir()) == []


def _replay(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "driftline.cli", "demo", "--replay", "--headless"]
    argv += ["--duration", "5", "--rate", "10", "--data-dir", str(data)]
    argv += ["--port", str(free_port()), "--grpc-port", str(free_port()), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def test_replay_demo_twice_then_reset(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _replay(data)
    assert first.returncode == 0, first.stdout + first.stderr
    second = _replay(data)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "reusing" in second.stdout
    third = _replay(data, "--reset")
    assert third.returncode == 0, third.stdout + third.stderr
    assert "--reset: deleted" in third.stdout
    with sqlite3.connect(data / "driftline.db") as db:
        stored = db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    assert stored > 0
