"""Dashboard render benchmark: each page's first render in headless Chromium over a store of
``--rows`` calls (default 1,000,000) spread over the 30 days ending now, its closed hours sealed
into the lake.

The dashboard opens on the shortest time range that holds the tenant's last 30 days of calls
(:func:`dashboard.ui.fitting_range`): here "Last 30 days", so the call-frame pages read all
``--rows`` calls (not the 1/30 of a "Last 24 hours" window, as an earlier version of this
docstring said).

The real dashboard (``driftline dashboard --dev``, :func:`dashboard.headless.serve`) runs with
the lake (the default read path) and, as the baseline, with ``DRIFTLINE_LAKE_ENABLED=false``
(every call frame from the store). One dashboard process per run: every page of
``dashboard.app.PAGES`` is first opened once, untimed (its imports, Streamlit's runtime); then,
per page, the benchmark waits until every data cache entry has expired (``CACHE_TTL_S`` + 1 s;
only the tenant list and the range's oldest call, cached 60 s, may still be warm) and opens it
``--repeats`` times, each a fresh page load. The first load is the page's cold render, later
ones hit the cache. A render is timed from navigation to the last change of the page's text
once the title is shown and Streamlit stopped running the script (looked at every 50 ms; over
once unchanged for 1 s: :func:`dashboard.headless.wait_rendered`). Each look is one script in
one WebDriver round trip reading the DOM's ``innerText`` (``--probe dom``); the earlier look
(``--probe webdriver``: 3 + one round trip per title and Selenium's visible-text atom, which
asks every node of the page for its computed style) ran every 50 ms in the renderer whose
drawing it timed, and on 2 cores took CPU from the render.

Fixed in this version (the earlier one under-measured): it stopped the clock as soon as the
title was drawn and Streamlit's "running" widget was not (yet) shown, i.e. possibly before the
page's charts, and a page's "cold" render could hit call frames cached by the page before.

    python benchmarks/dashboard_render.py --rows 100000
    python benchmarks/dashboard_render.py               # 1,000,000 calls

Prints ``RESULT dashboard_render_p95_s=<n> s`` (cold renders, lake) and the baseline's
``dashboard_render_store_p95_s``, plus the cached renders' p95.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stats import CHUNK, build_rows
from collector.lake.layout import default_lake_url, open_lake
from collector.lake.seal import seal_pending
from collector.store import bulk
from collector.store import engine as store_engine
from dashboard.app import PAGES
from dashboard.data import CACHE_TTL_S
from dashboard.headless import PROBES, browser, serve, wait_rendered

DAY_NS = 86_400 * 10**9


def ensure_data(url: str, rows: int, seed: int) -> None:
    """Load ``rows`` calls over the 30 days ending now (unless already there) and seal them."""
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    rng = np.random.default_rng(seed)
    try:
        with engine.connect() as conn:
            have = conn.execute(text("SELECT count(*) FROM llm_calls")).scalar_one()
        if have != rows:
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM llm_calls"))
            now = time.time_ns()
            starts = np.sort(now - 30 * DAY_NS + rng.integers(0, 30 * DAY_NS, rows))
            for start in range(0, rows, CHUNK):
                batch = build_rows(rng, start, starts[start : start + CHUNK])
                with engine.begin() as conn:
                    bulk.upsert(conn, bulk.CALLS, batch)
    finally:
        engine.dispose()
    t0 = time.perf_counter()
    report = seal_pending(url, open_lake(default_lake_url(url)), delay_s=0)
    print(f"sealed {len(report.sealed)} hours in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


#: a render ends when the page's text last changed; it is over once unchanged this long
SETTLE_S = 1.0
POLL_S = 0.05
#: waited before a page's cold load: every call-frame and chart cache entry has expired
EXPIRY_S = CACHE_TTL_S + 1


def render_times(
    url: str, port: int, repeats: int, probe: str = "dom"
) -> tuple[list[float], list[float]]:
    """(cold, cached) render seconds of every page: one dashboard process; every page opened
    once untimed (its imports, Streamlit's runtime), then per page: wait until the data caches
    expired (:data:`EXPIRY_S`), open it ``repeats`` times."""
    cold: list[float] = []
    cached: list[float] = []
    paths = [
        ("" if n == 0 else Path(file).stem, title) for n, (file, title, _i) in enumerate(PAGES)
    ]
    with serve(url, port) as base, browser() as b:
        for path, title in paths:
            b.get(f"{base}/{path}")
            wait_rendered(b, title, timeout_s=300, settle_s=SETTLE_S)
        for path, title in paths:
            time.sleep(EXPIRY_S)
            for r in range(repeats):
                t0 = time.monotonic()
                b.get(f"{base}/{path}")
                end = wait_rendered(
                    b, title, timeout_s=300, settle_s=SETTLE_S, poll_s=POLL_S, probe=probe
                )
                (cold if r == 0 else cached).append(end - t0)
            print(f"{title}: {cold[-1]:.2f} s cold, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return cold, cached


def main() -> None:
    """Run the benchmark and print ``RESULT`` lines."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    default_db = Path(tempfile.gettempdir()) / "driftline-bench-dashboard.db"
    ap.add_argument("--database-url", default=f"sqlite:///{default_db}")
    ap.add_argument("--rows", type=int, default=1_000_000, help="calls, up to 10,000,000")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--port", type=int, default=8599)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-baseline", action="store_true", help="skip the store-only run")
    ap.add_argument(
        "--probe",
        choices=PROBES,
        default="dom",
        help="how the page is looked at (dashboard.headless.wait_rendered); 'webdriver' is the "
        "earlier, heavier look, kept to compare",
    )
    args = ap.parse_args()
    if not 1 <= args.rows <= 10_000_000:
        raise SystemExit("--rows must be between 1 and 10,000,000")
    ensure_data(args.database_url, args.rows, args.seed)
    runs = [("dashboard_render", "true")] + (
        [] if args.no_baseline else [("dashboard_render_store", "false")]
    )
    for name, enabled in runs:
        os.environ["DRIFTLINE_LAKE_ENABLED"] = enabled  # read by the dashboard process
        cold, cached = render_times(args.database_url, args.port, args.repeats, args.probe)
        print(f"RESULT {name}_p95_s={np.percentile(cold, 95):.2f} s")
        if cached:
            print(f"RESULT {name}_cached_p95_s={np.percentile(cached, 95):.2f} s")


if __name__ == "__main__":
    main()
