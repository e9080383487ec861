"""Stats benchmark: ``GET /api/v1/stats?group_by=model,bucket&bucket=1h`` over 30 days of calls.

Synthetic calls (4 models, 2 variants, 30 days, ~5 % errors, realistic nulls; generated with
numpy, vectorised) are loaded into a fresh SQLite store by ``benchmarks/storeload.py`` (indexes
and the full-text index built after the rows: the same store as the writer's, checked), into
another store with ``collector.store.bulk.upsert`` (the writer's fast path); the store is kept
and reused when it already holds the rows (10 M calls: ~6 min to generate, a ~5 GB file). The
closed hours are then sealed into the Parquet lake next to it (``collector.lake.seal``, reused
when the manifest already holds every row), measuring the seal rate and the process's memory
growth while sealing (it should be flat: one hour in memory at a time).

The real collector app (``create_app``, lifespan running, in-process ``TestClient``) answers the
stats request ``--requests`` times over the whole range (no answer is cached between requests;
the app keeps sealed summary / rollup month files in memory until they are replaced, so the
first, unmeasured warm-up request pays their read, ~50-100 ms at 1 M calls):

* ``stats_*``: the default (``source=auto``; for hourly buckets that is the exact per-hour
  rollups of the sealed hours, plus a raw read of any other hour);
* ``stats_raw_*``: ``source=raw`` (every call from the lake's Parquet through DuckDB, exact),
  ``--raw-requests`` times;
* ``stats_summary_*``: ``source=summary`` (per-hour summaries merged, percentiles within 1 %);
* ``stats_store_*``: the null baseline in the same run, the lake switched off (every call read
  from the store: ADBC → Arrow → DuckDB), ``--store-requests`` times.

    python benchmarks/stats.py                      # 1,000,000 calls
    python benchmarks/stats.py --rows 200000 --requests 50
    python benchmarks/stats.py --rows 10000000 --store-requests 1
    python benchmarks/stats.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Prints ``RESULT stats_p95_ms=<n> ms`` (and p50, raw, store, seal lines).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.storeload import fast_load
from collector.lake import manifest
from collector.lake.layout import default_lake_url, open_lake
from collector.lake.seal import seal_pending
from collector.settings import load_settings
from collector.store import bulk
from collector.store import engine as store_engine
from driftline.app import create_app

T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
DAYS = 30
MODELS = ("gpt-4o", "gpt-4o-mini", "llama-3.1-8b", "qwen2.5-7b")
PRICES = {"gpt-4o": (2.5e-6, 10e-6), "gpt-4o-mini": (0.15e-6, 0.6e-6)}  # USD per token
CHUNK = 50_000


def build_columns(
    rng: np.random.Generator, start: int, starts: np.ndarray[Any, Any], *, json_text: bool = False
) -> dict[str, list[Any]]:
    """Synthetic ``llm_calls`` columns for tenant default, one row per start time (unix ns):
    column name → Python values (None for null); ``start`` numbers the first row's ids. Columns
    not named are null. JSON columns hold Python lists, or with ``json_text`` the text the
    writer stores for them.

    Vectorised (numpy); the same draws in the same order as the per-row loop it replaced, so a
    seed gives the same rows as before.
    """
    n = len(starts)
    model_idx = rng.integers(0, len(MODELS), n)
    ttft = rng.lognormal(-1.6, 0.7, n)
    out_tok = rng.integers(1, 700, n)
    in_tok = rng.integers(20, 4000, n)
    tpot = rng.lognormal(-3.7, 0.3, n)
    e2e = ttft + tpot * np.maximum(out_tok - 1, 0)
    queue = rng.exponential(0.05, n)
    u = rng.random((n, 4))
    error = u[:, 0] < 0.05
    known_ttft = (u[:, 1] > 0.1) & ~error
    self_hosted = np.array([m.startswith(("llama", "qwen")) for m in MODELS])[model_idx]
    known_queue = self_hosted & (u[:, 2] > 0.05)
    p_in = np.array([PRICES.get(m, (np.nan, np.nan))[0] for m in MODELS])[model_idx]
    p_out = np.array([PRICES.get(m, (np.nan, np.nan))[1] for m in MODELS])[model_idx]
    priced = np.array([m in PRICES for m in MODELS])[model_idx]
    cost = in_tok * p_in + out_tok * p_out
    gpu = (in_tok + out_tok) * 4e-7

    def nullable(values: np.ndarray[Any, Any], known: np.ndarray[Any, Any]) -> list[Any]:
        out = values.astype(object)
        out[~known] = None
        return list(out.tolist())

    ids = range(start, start + n)
    models = np.array(MODELS, dtype=object)[model_idx].tolist()
    status = np.where(error, "error", "ok").astype(object)
    error_type = np.where(u[:, 2] < 0.5, "429", "timeout").astype(object)
    error_type[~error] = None
    if json_text:
        reasons: list[Any] = np.where(error, '["error"]', '["stop"]').astype(object).tolist()
        flags: list[Any] = ["[]"] * n
    else:
        reasons = [["error"] if e else ["stop"] for e in error.tolist()]
        flags = [[] for _ in range(n)]  # every call is priced or has a GPU cost
    return {
        "tenant": ["default"] * n,
        "trace_id": [f"{k:032x}" for k in ids],
        "span_id": [f"{k:016x}" for k in ids],
        "call_id": [f"chatcmpl-{k}" for k in ids],
        "service_name": ["chat-api"] * n,
        "operation": ["chat"] * n,
        "model": models,
        "request_model": models,
        "response_model": models,
        "variant": np.where(u[:, 3] < 0.2, "candidate", "baseline").astype(object).tolist(),
        "rollout": ["r1"] * n,
        "start_unix_nano": starts.astype(np.int64).tolist(),
        "end_unix_nano": (starts + e2e * 1e9).astype(np.int64).tolist(),
        "input_tokens": in_tok.tolist(),
        "output_tokens": nullable(out_tok, ~error),
        "queue_s": nullable(queue, known_queue),
        "ttft_s": nullable(ttft, known_ttft),
        "e2e_s": e2e.tolist(),
        "tpot_s": nullable(tpot, known_ttft),
        "finish_reasons": reasons,
        "finish_reason": np.where(error, "error", "stop").astype(object).tolist(),
        "status": status.tolist(),
        "error_type": error_type.tolist(),
        "flags": flags,
        "cost_usd": nullable(cost, priced & ~error),
        "gpu_cost_usd": nullable(gpu, ~priced & ~error),
        "dialect": ["semconv"] * n,
    }


def build_rows(
    rng: np.random.Generator, start: int, starts: np.ndarray[Any, Any]
) -> list[tuple[Any, ...]]:
    """Synthetic ``llm_calls`` rows (tuples in table column order, for ``bulk.upsert``) for
    tenant default, one per start time (unix ns); ``start`` numbers the first row's ids
    (:func:`build_columns`)."""
    cols = build_columns(rng, start, starts)
    n = len(starts)
    nulls = [None] * n
    return list(zip(*(cols.get(c.name, nulls) for c in bulk.CALLS.columns), strict=True))


def _load_sqlite(path: Path, rows: int, rng: np.random.Generator, days: int) -> None:
    """Fill the migrated, empty SQLite store at ``path`` (:func:`benchmarks.storeload.fast_load`;
    one transaction per 1,000,000 rows)."""
    starts = np.sort(T0_NS + rng.integers(0, days * 86_400 * 10**9, rows))
    with fast_load(path, ("llm_calls",)) as con:
        for start in range(0, rows, CHUNK):
            cols = build_columns(rng, start, starts[start : start + CHUNK], json_text=True)
            names = ", ".join(cols)
            marks = ", ".join("?" * len(cols))
            if start % 1_000_000 == 0:
                con.execute("BEGIN")
            con.executemany(
                f"INSERT INTO llm_calls ({names}) VALUES ({marks})",
                zip(*cols.values(), strict=True),
            )
            if (start + CHUNK) % 1_000_000 == 0 or start + CHUNK >= rows:
                con.execute("COMMIT")


def ensure_data(url: str, rows: int, rng: np.random.Generator, days: int = DAYS) -> None:
    """Migrate and load ``rows`` calls over ``days`` days from :data:`T0_NS` unless the store
    already holds exactly that many. A SQLite store is filled by :func:`_load_sqlite`, another
    by ``bulk.upsert`` (the writer's fast path) in batches of :data:`CHUNK`: the same rows."""
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    try:
        with engine.connect() as conn:
            have = conn.execute(text("SELECT count(*) FROM llm_calls")).scalar_one()
        if have == rows:
            print(f"reusing {have} stored calls", file=sys.stderr)
            return
        t0 = time.perf_counter()
        db = make_url(url).database
        if store_engine.is_sqlite(url) and db and db != ":memory:" and not db.startswith("file:"):
            engine.dispose()
            if have:  # a fresh file: cheaper than deleting the rows
                for suffix in ("", "-wal", "-shm"):
                    Path(db + suffix).unlink(missing_ok=True)
                store_engine.upgrade(url)
            _load_sqlite(Path(db), rows, rng, days)
        else:
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM llm_calls"))
            # Calls arrive roughly in time order, so rows are stored in start order.
            starts = np.sort(T0_NS + rng.integers(0, days * 86_400 * 10**9, rows))
            for start in range(0, rows, CHUNK):
                batch = build_rows(rng, start, starts[start : start + CHUNK])
                with engine.begin() as conn:
                    bulk.upsert(conn, bulk.CALLS, batch)
        print(f"loaded {rows} calls in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    finally:
        engine.dispose()


def _rss_mb() -> float:
    """Resident set size now (MiB), from /proc (Linux)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def ensure_sealed(url: str, lake_url: str, rows: int) -> None:
    """Seal every hour of the 30 days into the lake unless its manifests already hold ``rows``
    calls; prints the seal rate and the memory growth between day 1 and day 30."""
    lake = open_lake(lake_url)
    hours = manifest.load(lake, "default").hours
    have = sum(e.rows for e in hours.values())
    months = {lake.rollup_path("default", h) for h in hours}
    if have == rows and all(lake.fs.exists(p) for p in months):
        print(f"reusing the lake at {lake_url} ({have} calls)", file=sys.stderr)
        return
    if lake.fs.exists(lake.root):
        lake.fs.rm(lake.root, recursive=True)
    t0 = time.perf_counter()
    seal_pending(url, lake, now_ns=T0_NS + 86_400 * 10**9, delay_s=0, late_s=0)
    rss_day1 = _rss_mb()
    end = T0_NS + (DAYS + 1) * 86_400 * 10**9
    report = seal_pending(url, lake, now_ns=end, delay_s=0, late_s=0)
    elapsed = time.perf_counter() - t0
    rss_end = _rss_mb()
    print(f"RESULT seal_calls_per_s={rows / elapsed:.0f} calls/s")
    print(f"RESULT seal_rss_growth_mb={rss_end - rss_day1:.1f} MiB (day 1 -> day {DAYS})")
    if report.failed:
        raise SystemExit(f"sealing failed: {report.failed[:3]}")


def _measure(
    client: TestClient, params: dict[str, str], n: int, warmup: int
) -> tuple[list[float], Any]:
    times_ms = []
    r = None
    for i in range(warmup + n):
        t0 = time.perf_counter()
        r = client.get("/api/v1/stats", params=params)
        elapsed = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            raise SystemExit(f"stats answered {r.status_code}: {r.text[:500]}")
        if i >= warmup:
            times_ms.append(elapsed)
    assert r is not None
    return times_ms, r.json()["items"]


def main() -> None:
    """Run the benchmark and print ``RESULT`` lines."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    default_db = Path(tempfile.gettempdir()) / "driftline-bench-stats.db"
    ap.add_argument("--database-url", default=f"sqlite:///{default_db}")
    ap.add_argument("--lake-url", default=None, help="default: a lake folder next to the store")
    ap.add_argument("--rows", type=int, default=1_000_000, help="calls, up to 10,000,000")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--raw-requests", type=int, default=5, help="requests of source=raw")
    ap.add_argument("--store-requests", type=int, default=3, help="requests of the baseline")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not 1 <= args.rows <= 10_000_000:
        raise SystemExit("--rows must be between 1 and 10,000,000")
    ensure_data(args.database_url, args.rows, np.random.default_rng(args.seed))
    lake_url = args.lake_url or default_lake_url(args.database_url)
    ensure_sealed(args.database_url, lake_url, args.rows)
    params = {
        "group_by": "model,bucket",
        "bucket": "1h",
        "since": str(T0_NS // 10**9),
        "until": str(T0_NS // 10**9 + DAYS * 86_400),
    }
    runs: list[tuple[str, dict[str, Any], dict[str, str], int, str]] = [
        ("stats", dict(lake_url=lake_url), {}, args.requests, "rollup"),
        ("stats_raw", dict(lake_url=lake_url), {"source": "raw"}, args.raw_requests, "raw"),
        ("stats_summary", dict(lake_url=lake_url), {"source": "summary"}, args.requests, "summary"),
        ("stats_store", dict(lake_enabled=False), {}, args.store_requests, "raw"),
    ]
    for name, extra, more, n, want_source in runs:
        if n < 1:
            continue
        settings = load_settings(
            database_url=args.database_url,
            dev=True,
            grpc_enabled=False,
            scheduler_enabled=False,
            auto_migrate=False,
            **extra,
        )
        with TestClient(create_app(settings)) as client:
            times_ms, items = _measure(client, params | more, n, args.warmup)
        total = sum(item["count"] for item in items)
        if total != args.rows:
            raise SystemExit(f"{name}: counted {total} calls, expected {args.rows}")
        sources = {item.get("source", "raw") for item in items}
        if sources != {want_source}:
            raise SystemExit(f"{name}: answered from {sources}, expected {want_source}")
        print(f"{name}: {len(items)} groups, {total} calls, source {sources}", file=sys.stderr)
        print(f"RESULT {name}_p50_ms={np.percentile(times_ms, 50):.0f} ms")
        print(f"RESULT {name}_p95_ms={np.percentile(times_ms, 95):.0f} ms")


if __name__ == "__main__":
    main()
