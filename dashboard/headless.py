"""Run the dashboard and look at it in headless Chromium: shared by the browser tests and
``docs/screenshots.py``. Needs the Debian packages ``chromium`` + ``chromium-driver`` and the
``selenium`` dev dependency (imported lazily, so the dashboard itself never needs them)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx


def chromium() -> tuple[str, str]:
    """Paths of the Chromium binary and its driver.

    Raises:
        RuntimeError: either is missing (naming the Debian packages to install).
    """
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (browser and driver):
        raise RuntimeError("install Debian packages chromium and chromium-driver")
    return browser, driver


@contextmanager
def serve(
    database_url: str, port: int, log: IO[bytes] | None = None, timeout_s: float = 60
) -> Iterator[str]:
    """``driftline dashboard --dev`` on 127.0.0.1:``port`` against ``database_url``; yields its
    base URL once ``/_stcore/health`` answers, stops its process group on exit.

    Raises:
        RuntimeError: the dashboard exited or did not answer within ``timeout_s`` seconds.
    """
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": database_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "driftline.cli", "dashboard", "--dev", "--port", str(port)],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{base}/_stcore/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the dashboard did not start")
            time.sleep(0.3)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)


@contextmanager
def browser(window: str = "1400,1000") -> Iterator[Any]:
    """A headless Chromium (selenium WebDriver) with a ``width,height`` window."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = chromium()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.add_argument(f"--window-size={window}")
    b = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        yield b
    finally:
        b.quit()


#: one look at the page in one WebDriver round trip: the h1 titles, whether Streamlit's
#: "running" widget is shown, and the main area's text (the DOM's own ``innerText``)
_LOOK_JS = """
const main = document.querySelector("[data-testid='stMain']");
return [
  Array.from(document.querySelectorAll("h1"), (e) => e.innerText.trim()),
  document.querySelector("[data-testid='stStatusWidget']") !== null,
  main ? main.innerText : "",
];
"""

#: how :func:`wait_rendered` looks at the page
PROBES = ("dom", "webdriver")


def _look(b: Any, probe: str) -> tuple[list[str], bool, str | None]:
    """(h1 texts, running widget shown, main text or None when re-drawn while read)."""
    if probe == "dom":
        h1, running, text = b.execute_script(_LOOK_JS)
        return list(h1), bool(running), str(text)
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        titles = [e.text for e in b.find_elements(By.CSS_SELECTOR, "h1")]
        shown = bool(b.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'))
        main = b.find_elements(By.CSS_SELECTOR, "[data-testid='stMain']")
        return titles, shown, main[0].text if main else ""
    except StaleElementReferenceException:  # re-drawn while read: still changing
        return [], False, None


def wait_rendered(
    b: Any,
    title: str,
    timeout_s: float = 60,
    settle_s: float = 1.5,
    poll_s: float = 0.3,
    probe: str = "dom",
) -> float:
    """Wait for the page title (h1), for Streamlit to stop running the script, and for the
    page's text to stay the same for ``settle_s`` seconds (Streamlit draws progressively and
    shows its "running" widget only after a delay, so a loaded machine can show the title
    before the rest); a page whose text keeps changing returns at ``timeout_s``. The page is
    looked at every ``poll_s`` seconds.

    ``probe`` is how: ``"dom"`` (default) reads titles, the running widget and the main area's
    ``innerText`` in one script, one WebDriver round trip; ``"webdriver"`` is the earlier look,
    3 + (one per h1) round trips and Selenium's visible-text atom over the main area, a script
    that walks every node and asks for its computed style: on a 2-core machine that look ran in
    the browser's renderer, the thread drawing the page being timed, every ``poll_s``.

    Returns:
        When (``time.monotonic()``) the page's text was last seen changing: the render's end,
        within ``poll_s`` plus the time one look takes.

    Raises:
        AssertionError: the title did not render within ``timeout_s`` seconds.
        ValueError: ``probe`` is not one of :data:`PROBES`.
    """
    if probe not in PROBES:
        raise ValueError(f"probe must be one of {PROBES}, got {probe!r}")
    deadline = time.monotonic() + timeout_s
    seen_title = False
    last_text: str | None = None
    stable_since = 0.0
    while time.monotonic() < deadline:
        h1, running, text = _look(b, probe)
        if title in h1 and not running:
            seen_title = True
            if text != last_text:
                last_text, stable_since = text, time.monotonic()
            elif time.monotonic() - stable_since >= settle_s:
                return stable_since
        time.sleep(poll_s)
    if seen_title:
        return stable_since
    raise AssertionError(f"page {title!r} did not render in {timeout_s} s")
