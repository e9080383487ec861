"""Screenshots of dashboard pages for the README, taken from a real database (e.g. a demo run).

    python docs/screenshots.py --database-url sqlite:///driftline-data/driftline.db \\
        --page overview.py=docs/img/overview.png --page canary.py=docs/img/canary.png

Starts ``driftline dashboard --dev`` on a free port against ``--database-url``, opens each page
in headless Chromium (Debian packages ``chromium`` + ``chromium-driver``), waits until Streamlit
has finished rendering, and saves a PNG. Exits non-zero when a page shows an exception box.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dashboard.app import PAGES  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_rendered(browser: object, title: str, timeout_s: float = 90) -> None:
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        h1 = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "h1")]  # type: ignore[attr-defined]
        running = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')  # type: ignore[attr-defined]
        if title in h1 and not running:
            time.sleep(2.0)  # charts draw after the script finished
            return
        time.sleep(0.3)
    raise RuntimeError(f"page {title!r} did not render in {timeout_s} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--page", action="append", required=True, help="FILE.py=OUT.png")
    ap.add_argument("--window", default="1400,1000", help="width,height in pixels")
    args = ap.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (binary and driver):
        sys.exit("install Debian packages chromium and chromium-driver")
    titles = {f: t for f, t, _ in PAGES}
    port = _free_port()
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": args.database_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector.cli", "dashboard", "--dev", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    failed = 0
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/_stcore/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("the dashboard did not start")
            time.sleep(0.3)
        opts = webdriver.ChromeOptions()
        opts.binary_location = binary
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
            opts.add_argument(arg)
        opts.add_argument(f"--window-size={args.window}")
        browser = webdriver.Chrome(service=Service(driver), options=opts)
        try:
            for spec in args.page:
                file, out = spec.split("=", 1)
                path = "" if file == PAGES[0][0] else file.removesuffix(".py")
                browser.get(f"{base}/{path}")
                _wait_rendered(browser, titles[file])
                boxes = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
                Path(out).parent.mkdir(parents=True, exist_ok=True)
                browser.save_screenshot(out)
                print(f"{out}: {titles[file]}" + (" (EXCEPTION shown)" if boxes else ""))
                failed += bool(boxes)
        finally:
            browser.quit()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
