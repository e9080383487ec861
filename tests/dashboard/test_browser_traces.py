"""Traces and Sessions pages in headless Chromium on a store holding agent runs (sent through
the real OTLP/HTTP route); screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from dashboard.headless import browser as headless_browser
from dashboard.headless import serve, wait_rendered
from driftline.app import create_app
from tests.conftest import REPO, free_port, make_settings
from tests.support.agent_traces import agent_run, orphan, record, send

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "test-artifacts" / "dashboard"


@pytest.fixture(scope="module")
def dashboard_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('browser')}/driftline.db"
    t0 = time.time_ns() - 120 * 10**9
    with TestClient(create_app(make_settings(url, grpc_enabled=False))) as client:
        spans = record(lambda p: agent_run(p, session="conv-1", user="alice", t0=t0 + 10**10))
        spans += record(lambda p: orphan(p, t0), service="rag")
        send(client, spans, expect_calls=2)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / "streamlit-traces.log").open("wb") as log, serve(url, free_port(), log) as b:
        yield b


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with headless_browser("1400,1200") as b:
        yield b


def _main_text(browser: object) -> str:
    from selenium.webdriver.common.by import By

    boxes = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')  # type: ignore[attr-defined]
    assert not boxes, [b.text for b in boxes]
    return str(browser.find_element(By.CSS_SELECTOR, "[data-testid='stMain']").text)  # type: ignore[attr-defined]


def test_traces_page_in_chromium(dashboard_url: str, browser: object) -> None:
    browser.get(f"{dashboard_url}/traces")  # type: ignore[attr-defined]
    wait_rendered(browser, "Traces")
    # Streamlit draws the page progressively and shows its "running" widget only after a delay:
    # on a loaded machine the last elements may still be on their way when the title is there
    deadline = time.monotonic() + 30
    while "Open call" not in (text := _main_text(browser)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "Trace " in text and "LLM calls" in text
    assert "Open call" in text  # the newest trace is the agent run: its LLM spans link out
    browser.save_screenshot(str(ARTIFACTS / "traces.png"))  # type: ignore[attr-defined]


def test_sessions_page_in_chromium(dashboard_url: str, browser: object) -> None:
    browser.get(f"{dashboard_url}/sessions")  # type: ignore[attr-defined]
    wait_rendered(browser, "Sessions")
    text = _main_text(browser)
    assert "Session conv-1" in text
    assert "Paris is the capital of France." in text
    browser.save_screenshot(str(ARTIFACTS / "sessions.png"))  # type: ignore[attr-defined]
