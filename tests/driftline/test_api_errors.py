"""Errors raised while serving a REST request become ``{"error": {...}}`` JSON bodies."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from driftline.app import create_app
from tests.conftest import make_settings


def test_config_error_in_a_request_is_503_naming_the_variable(
    _sqlite_template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """POST /api/v1/scores reads DRIFTLINE_JUDGE_RUBRIC_DIR on each request; a rubric file
    that turns invalid after start-up is the operator's problem: 503, the variable named."""
    shutil.copyfile(_sqlite_template, tmp_path / "driftline.db")
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    monkeypatch.setenv("DRIFTLINE_JUDGE_RUBRIC_DIR", str(rubrics))
    settings = make_settings(f"sqlite:///{tmp_path}/driftline.db", grpc_enabled=False)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        score = {"session_id": "conv-1", "name": "helpfulness", "value": 4}
        assert client.post("/api/v1/scores", json=score).status_code == 201
        (rubrics / "broken.yaml").write_text("name: [unclosed\n")  # edited while running
        caplog.clear()
        with caplog.at_level(logging.INFO):
            r = client.post("/api/v1/scores", json=score)
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "server_misconfigured"
    assert error["message"].startswith("DRIFTLINE_JUDGE_RUBRIC_DIR: ")
    assert "broken.yaml" in error["message"]
    logged = [rec for rec in caplog.records if "DRIFTLINE_JUDGE_RUBRIC_DIR" in rec.getMessage()]
    assert len(logged) == 1, [rec.getMessage() for rec in caplog.records]
    assert logged[0].levelno == logging.ERROR and logged[0].exc_info is None
