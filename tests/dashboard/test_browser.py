"""Start ``driftline dashboard --dev`` on a seeded store and open every page in headless
Chromium (selenium); screenshots go to test-artifacts/dashboard/. Any Streamlit exception box
fails the test. On the Review page a sample is labelled end to end: the judge's verdict is
absent before, a rubric button is clicked, the label is read back from the database.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from collector.store.engine import make_engine
from collector.store.models.judges import HumanLabel, ReviewItem
from dashboard.app import PAGES
from dashboard.headless import browser as headless_browser
from dashboard.headless import serve, wait_rendered
from driftline.demo.seed_demo import DemoSeed
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


@pytest.fixture(scope="module")
def dashboard_url(seeded_sqlite: tuple[str, DemoSeed]) -> Iterator[str]:
    url, _ = seeded_sqlite
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / "streamlit.log").open("wb") as log, serve(url, free_port(), log) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with headless_browser("1400,1000") as b:
        yield b


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
    words = set(re.findall(r"[A-Za-z<>]+", text))
    assert not words & {"None", "nan", "NaN", "NaT", "<NA>"}, f"{title} shows None/nan"
    # every chart has a titled axis (Vega draws axis titles as role-axis-title marks)
    for chart in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]'):  # type: ignore[attr-defined]
        axis_titles = chart.find_elements(By.CSS_SELECTOR, ".role-axis-title text")
        canvas = chart.find_elements(By.CSS_SELECTOR, "canvas")
        if not canvas and chart.is_displayed():  # a chart in a hidden tab draws nothing yet
            assert axis_titles, f"{title}: a chart without an axis title"
    # viewer mode: Streamlit's developer menu ("Deploy") is not offered to users
    deploy = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stAppDeployButton"]')  # type: ignore[attr-defined]
    assert not deploy, f"{title}: the Deploy button is shown"
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
