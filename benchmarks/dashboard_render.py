"""Dashboard render benchmark: each page's first render in headless Chromium over a store of
``--rows`` calls (default 1,000,000: 30 days ending now, so the default "Last 24 hours" window
holds 1/30 of them), its closed hours sealed into the lake.

The real dashboard (``driftline dashboard --dev``, :func:`dashboard.headless.serve`) is started
twice in the same run: with the lake (the default read path) and, as the baseline, with
``DRIFTLINE_LAKE_ENABLED=false`` (every call frame from the store). For each, every page of
``dashboard.app.PAGES`` is opened ``--repeats`` times in a fresh page load; a render is timed
from navigation until the page title is shown and Streamlit stopped running the script
(:func:`dashboard.headless.wait_rendered`, no settle time). The first load of a page is its
cold render (Streamlit's data cache empty for that page's queries); later loads hit the cache.

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
from dashboard.headless import browser, serve, wait_rendered

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


def render_times(url: str, port: int, repeats: int) -> tuple[list[float], list[float]]:
    """(cold, cached) render seconds of every page."""
    cold: list[float] = []
    cached: list[float] = []
    with serve(url, port) as base, browser() as b:
        for n, (file, title, _icon) in enumerate(PAGES):
            path = "" if n == 0 else Path(file).stem
            for r in range(repeats):
                t0 = time.perf_counter()
                b.get(f"{base}/{path}")
                wait_rendered(b, title, timeout_s=300, settle_s=0)
                (cold if r == 0 else cached).append(time.perf_counter() - t0)
            print(f"{title}: {cold[-1]:.2f} s cold", file=sys.stderr)
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
    args = ap.parse_args()
    if not 1 <= args.rows <= 10_000_000:
        raise SystemExit("--rows must be between 1 and 10,000,000")
    ensure_data(args.database_url, args.rows, args.seed)
    runs = [("dashboard_render", "true")] + (
        [] if args.no_baseline else [("dashboard_render_store", "false")]
    )
    for name, enabled in runs:
        os.environ["DRIFTLINE_LAKE_ENABLED"] = enabled  # read by the dashboard process
        cold, cached = render_times(args.database_url, args.port, args.repeats)
        print(f"RESULT {name}_p95_s={np.percentile(cold, 95):.2f} s")
        if cached:
            print(f"RESULT {name}_cached_p95_s={np.percentile(cached, 95):.2f} s")


if __name__ == "__main__":
    main()
