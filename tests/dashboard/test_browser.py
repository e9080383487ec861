"""Start ``driftline dashboard --dev`` on a seeded store and open every page in headless
Chromium (selenium); screenshots go to test-artifacts/dashboard/. Any Streamlit exception box
fails the test. On the Review page a sample is labelled end to end: the judge's verdict is
absent before, a rubric button is clicked, the label is read back from the database.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from collector.store.engine import make_engine
from collector.store.models.judges import HumanLabel, ReviewItem
from dashboard.app import PAGES
from dashboard.seed_demo import DemoSeed
from tests.conftest import REPO, free_port

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
#: text each page shows only when its seeded data is there
SEEDED_TEXT = {
    "review.py": "rubric helpfulness",
    "drift.py": "DRIFTED",
    "quality.py": "Judge vs human κ",
    "canary.py": "running",
}


def chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (browser and driver):
        raise RuntimeError("install Debian packages chromium and chromium-driver")
    return browser, driver


@pytest.fixture(scope="module")
def dashboard_url(seeded_sqlite: tuple[str, DemoSeed]) -> Iterator[str]:
    url, _ = seeded_sqlite
    port = free_port()
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": url}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / "streamlit.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector.cli", "dashboard", "--dev", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/_stcore/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dashboard did not start (see {ARTIFACTS}/streamlit.log)")
            time.sleep(0.3)
        yield base
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(20)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = chromium()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        opts.add_argument(arg)
    b = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        yield b
    finally:
        b.quit()


def wait_rendered(b: object, title: str, timeout_s: float = 60) -> None:
    """Wait for the page title (h1) and for Streamlit to stop running the script."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        h1 = [e.text for e in b.find_elements(By.CSS_SELECTOR, "h1")]  # type: ignore[attr-defined]
        running = b.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')  # type: ignore[attr-defined]
        if title in h1 and not running:
            time.sleep(1.5)  # charts draw after the script finished
            return
        time.sleep(0.3)
    raise AssertionError(f"page {title!r} did not render in {timeout_s} s")


def test_deep_link_on_a_fresh_server_keeps_the_menu(dashboard_url: str, browser: object) -> None:
    """The first session of a just-started dashboard opens /canary (a bookmark, a reconnecting
    tab): it must get the app's own menu, not Streamlit's auto-discovered file list. Runs
    first in this module, while the server is fresh."""
    from selenium.webdriver.common.by import By

    browser.get(f"{dashboard_url}/canary")  # type: ignore[attr-defined]
    wait_rendered(browser, "Canary")
    nav = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"] a')  # type: ignore[attr-defined]
    labels = [a.text.splitlines()[-1] for a in nav if a.text]  # icon name, then label
    assert "Overview" in labels and "Calls explorer" in labels, labels
    assert "app" not in labels, labels


@pytest.mark.parametrize(("file", "title"), [(f, t) for f, t, _ in PAGES])
def test_page_in_chromium(dashboard_url: str, browser: object, file: str, title: str) -> None:
    from selenium.webdriver.common.by import By

    path = "" if file == PAGES[0][0] else file.removesuffix(".py")
    browser.get(f"{dashboard_url}/{path}")  # type: ignore[attr-defined]
    wait_rendered(browser, title)
    boxes = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')  # type: ignore[attr-defined]
    browser.save_screenshot(str(ARTIFACTS / f"{file.removesuffix('.py')}.png"))  # type: ignore[attr-defined]
    assert not boxes, [b.text for b in boxes]
    text = browser.find_element(By.CSS_SELECTOR, "section.main, [data-testid='stMain']").text  # type: ignore[attr-defined]
    assert any(ch.isdigit() for ch in text), f"no number on {title}"
    assert "No " not in text.split("\n")[0]
    if file in SEEDED_TEXT:
        assert SEEDED_TEXT[file] in text, f"{title}: {SEEDED_TEXT[file]!r} not shown"
    if file == "review.py":
        assert "reviewer grade" not in text  # the judge's verdict is hidden before labelling


def test_review_labels_a_sample_in_chromium(
    dashboard_url: str, browser: object, seeded_sqlite: tuple[str, DemoSeed]
) -> None:
    """Open the Review page, click "4 · helpful", and find that label in the database."""
    from selenium.webdriver.common.by import By

    url, _ = seeded_sqlite
    browser.get(f"{dashboard_url}/review")  # type: ignore[attr-defined]
    wait_rendered(browser, "Review queue")
    main = "section.main, [data-testid='stMain']"
    text = browser.find_element(By.CSS_SELECTOR, main).text  # type: ignore[attr-defined]
    assert "reviewer grade" not in text and "Judge verdict" not in text
    shown = re.search(r"Item (\d+) · rubric", text)
    assert shown, text
    item_id = int(shown.group(1))
    buttons = browser.find_elements(By.CSS_SELECTOR, "button")  # type: ignore[attr-defined]
    matching = [b for b in buttons if b.text.strip().startswith("4 · helpful")]
    assert len(matching) == 1, [b.text for b in buttons]
    button = matching[0]
    button.click()
    done = f"Item {item_id}: labelled 4 (helpful)"
    deadline = time.monotonic() + 60
    while done not in browser.find_element(By.CSS_SELECTOR, main).text:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"{done!r} never shown"
        time.sleep(0.3)
    wait_rendered(browser, "Review queue")
    text = browser.find_element(By.CSS_SELECTOR, main).text  # type: ignore[attr-defined]
    browser.save_screenshot(str(ARTIFACTS / "review-labelled.png"))  # type: ignore[attr-defined]
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')  # type: ignore[attr-defined]
    assert "Judge verdict on the sample you just labelled" in text
    assert f"Item {item_id} · rubric" not in text  # the next sample is shown
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            status = conn.execute(
                select(ReviewItem.status).where(ReviewItem.id == item_id)
            ).scalar_one()
            labels = conn.execute(
                select(
                    HumanLabel.reviewer, HumanLabel.score, HumanLabel.label, HumanLabel.skipped
                ).where(HumanLabel.review_item_id == item_id)
            ).all()
    finally:
        engine.dispose()
    assert status == "labelled"
    assert [tuple(r) for r in labels] == [("dashboard-dev", 4.0, "helpful", False)]
