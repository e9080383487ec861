"""The Capacity page in headless Chromium against the seeded store (engine samples) and a real
gateway in front of two echo engines (its /metrics read over HTTP by the page)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from dashboard.headless import browser as headless_browser
from dashboard.headless import serve, wait_rendered
from driftline.demo.seed_demo import DemoSeed
from tests.conftest import REPO, free_port
from tests.serving.fleet_support import chat, fleet_rig

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "test-artifacts" / "dashboard"


@pytest.fixture(scope="module")
def dashboard_url(seeded_sqlite: tuple[str, DemoSeed]) -> Iterator[str]:
    url, _ = seeded_sqlite
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # the gateway rig listens on loopback: allowed as an operator would (DRIFTLINE_EGRESS_ALLOW)
    mp = pytest.MonkeyPatch()
    mp.setenv("DRIFTLINE_EGRESS_ALLOW", "127.0.0.1/32")
    with (
        (ARTIFACTS / "streamlit-capacity.log").open("wb") as log,
        serve(url, free_port(), log) as base,
    ):
        yield base
    mp.undo()


def test_capacity_page_shows_replicas_scaling_cost_and_advice(dashboard_url: str) -> None:
    from selenium.webdriver.common.by import By

    config = {"autoscale": {"warm_buffer": 1, "min_replicas": 1}}
    with fleet_rig([{"models": ["base"]}, {"models": ["base"]}], config) as rig:
        assert httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", "hi")).is_success
        with headless_browser("1400,1400") as b:
            b.get(f"{dashboard_url}/capacity?gateway={rig.url}&usd_per_hour=2.5")
            wait_rendered(b, "Capacity")
            b.save_screenshot(str(ARTIFACTS / "capacity.png"))
            assert not b.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
            text = b.find_element(By.CSS_SELECTOR, "section.main, [data-testid='stMain']").text
    assert "Replicas (engine samples)" in text and "Peak KV cache" in text
    assert "Queued at the gateway" in text
    # the idle gateway wants 0 + warm buffer 1 replica and has 2 healthy ones
    assert "base can shrink from 2 to 1 replicas." in text
    assert "Desired vs actual replicas" in text and "No scaling signal" not in text
    assert "USD / 1k tokens" in text and "KV cache %" in text
    assert "No engine samples" not in text
