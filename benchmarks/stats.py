"""Stats benchmark: ``GET /api/v1/stats?group_by=model,bucket&bucket=1h`` over 1,000,000 calls.

Synthetic calls (4 models, 2 variants, 30 days, ~5 % errors, realistic nulls) are bulk-loaded
into a SQLite store with ``collector.store.bulk.upsert`` (rows in ``llm_calls`` column order,
the writer's own fast path); the store is kept and reused when it already holds the rows. Then
the real collector app (``create_app``, lifespan running, in-process ``TestClient``) answers the
stats request ``--requests`` times over the whole range: ADBC read → Arrow → DuckDB per request,
nothing cached between requests.

    python benchmarks/stats.py                      # build (~1 min, once) + 20 requests
    python benchmarks/stats.py --rows 200000 --requests 50
    python benchmarks/stats.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Prints ``RESULT stats_p95_ms=<n> ms`` (and p50).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.settings import load_settings
from collector.store import bulk
from collector.store import engine as store_engine
from driftline.app import create_app

T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
DAYS = 30
MODELS = ("gpt-4o", "gpt-4o-mini", "llama-3.1-8b", "qwen2.5-7b")
PRICES = {"gpt-4o": (2.5e-6, 10e-6), "gpt-4o-mini": (0.15e-6, 0.6e-6)}  # USD per token
CHUNK = 50_000


def build_rows(
    rng: np.random.Generator, start: int, starts: np.ndarray[Any, Any]
) -> list[tuple[Any, ...]]:
    """Synthetic ``llm_calls`` rows (tuples in table column order) for tenant default, one per
    start time (unix ns); ``start`` numbers the first row's ids."""
    n = len(starts)
    model_idx = rng.integers(0, len(MODELS), n)
    ttft = rng.lognormal(-1.6, 0.7, n)
    out_tok = rng.integers(1, 700, n)
    in_tok = rng.integers(20, 4000, n)
    tpot = rng.lognormal(-3.7, 0.3, n)
    e2e = ttft + tpot * np.maximum(out_tok - 1, 0)
    queue = rng.exponential(0.05, n)
    u = rng.random((n, 4))
    names = [c.name for c in bulk.CALLS.columns]
    rows = []
    for i in range(n):
        model = MODELS[model_idx[i]]
        error = u[i, 0] < 0.05
        known_ttft = u[i, 1] > 0.1
        known_queue = model.startswith(("llama", "qwen")) and u[i, 2] > 0.05
        price = PRICES.get(model)
        cost = None if price is None else float(in_tok[i] * price[0] + out_tok[i] * price[1])
        gpu = None if price is not None else float((in_tok[i] + out_tok[i]) * 4e-7)
        k = start + i
        rec = {
            "tenant": "default",
            "trace_id": f"{k:032x}",
            "span_id": f"{k:016x}",
            "call_id": f"chatcmpl-{k}",
            "service_name": "chat-api",
            "operation": "chat",
            "model": model,
            "request_model": model,
            "response_model": model,
            "variant": "candidate" if u[i, 3] < 0.2 else "baseline",
            "rollout": "r1",
            "start_unix_nano": int(starts[i]),
            "end_unix_nano": int(starts[i] + e2e[i] * 1e9),
            "input_tokens": int(in_tok[i]),
            "output_tokens": None if error else int(out_tok[i]),
            "queue_s": float(queue[i]) if known_queue else None,
            "ttft_s": float(ttft[i]) if known_ttft and not error else None,
            "e2e_s": float(e2e[i]),
            "tpot_s": float(tpot[i]) if known_ttft and not error else None,
            "finish_reasons": ["error"] if error else ["stop"],
            "finish_reason": "error" if error else "stop",
            "status": "error" if error else "ok",
            "error_type": ("429" if u[i, 2] < 0.5 else "timeout") if error else None,
            "flags": [] if price is not None or gpu is not None else ["unpriced"],
            "cost_usd": None if error else cost,
            "gpu_cost_usd": None if error else gpu,
            "dialect": "semconv",
        }
        rows.append(tuple(rec.get(name) for name in names))
    return rows


def ensure_data(url: str, rows: int, rng: np.random.Generator) -> None:
    """Migrate and load ``rows`` calls unless the store already holds exactly that many."""
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    try:
        with engine.connect() as conn:
            have = conn.execute(text("SELECT count(*) FROM llm_calls")).scalar_one()
        if have == rows:
            print(f"reusing {have} stored calls", file=sys.stderr)
            return
        t0 = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM llm_calls"))
        # Calls arrive roughly in time order, so rows are stored in start order.
        starts = np.sort(T0_NS + rng.integers(0, DAYS * 86_400 * 10**9, rows))
        for start in range(0, rows, CHUNK):
            batch = build_rows(rng, start, starts[start : start + CHUNK])
            with engine.begin() as conn:
                bulk.upsert(conn, bulk.CALLS, batch)
        print(f"loaded {rows} calls in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    finally:
        engine.dispose()


def main() -> None:
    """Run the benchmark and print ``RESULT`` lines."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    default_db = Path(tempfile.gettempdir()) / "driftline-bench-stats.db"
    ap.add_argument("--database-url", default=f"sqlite:///{default_db}")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ensure_data(args.database_url, args.rows, np.random.default_rng(args.seed))
    settings = load_settings(
        database_url=args.database_url,
        dev=True,
        grpc_enabled=False,
        scheduler_enabled=False,
        auto_migrate=False,
    )
    params = {
        "group_by": "model,bucket",
        "bucket": "1h",
        "since": str(T0_NS // 10**9),
        "until": str(T0_NS // 10**9 + DAYS * 86_400),
    }
    times_ms = []
    with TestClient(create_app(settings)) as client:
        for i in range(args.warmup + args.requests):
            t0 = time.perf_counter()
            r = client.get("/api/v1/stats", params=params)
            elapsed = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            if i >= args.warmup:
                times_ms.append(elapsed)
        items = r.json()["items"]
    total = sum(item["count"] for item in items)
    if total != args.rows:
        raise SystemExit(f"stats counted {total} calls, expected {args.rows}")
    print(f"{len(items)} groups, {total} calls per request", file=sys.stderr)
    print(f"RESULT stats_p50_ms={np.percentile(times_ms, 50):.0f} ms")
    print(f"RESULT stats_p95_ms={np.percentile(times_ms, 95):.0f} ms")


if __name__ == "__main__":
    main()
