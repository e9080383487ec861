"""Screenshots of dashboard pages for the README, taken from a real database (e.g. a demo run).

    python docs/screenshots.py --database-url sqlite:///driftline-data/driftline.db \\
        --page overview.py=docs/img/overview.png --page canary.py=docs/img/canary.png

Starts ``driftline dashboard --dev`` on a free port against ``--database-url``, opens each page
in headless Chromium (Debian packages ``chromium`` + ``chromium-driver``), waits until Streamlit
has finished rendering, and saves a PNG. Exits 1 when a page shows an exception box.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dashboard.app import PAGES  # noqa: E402
from dashboard.headless import browser, serve, wait_rendered  # noqa: E402
from driftline.demo.processes import free_port  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--page", action="append", required=True, help="FILE.py[?QUERY]=OUT.png")
    ap.add_argument("--window", default="1400,1000", help="width,height in pixels")
    args = ap.parse_args()
    from selenium.webdriver.common.by import By

    titles = {f: t for f, t, _ in PAGES}
    failed = 0
    with serve(args.database_url, free_port()) as base, browser(args.window) as b:
        for spec in args.page:
            file, out = spec.rsplit("=", 1)
            file, _, query = file.partition("?")  # e.g. traces.py?trace_id=...
            path = "" if file == PAGES[0][0] else file.removesuffix(".py")
            b.get(f"{base}/{path}" + (f"?{query}" if query else ""))
            wait_rendered(b, titles[file], timeout_s=90, settle_s=2.0)
            boxes = b.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            b.save_screenshot(out)
            print(f"{out}: {titles[file]}" + (" (EXCEPTION shown)" if boxes else ""))
            failed += bool(boxes)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
