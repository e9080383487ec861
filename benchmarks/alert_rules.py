"""Alert-rule benchmark: one evaluation of 7-day threshold rules over 8 days of calls.

Synthetic calls as ``benchmarks/stats.py`` makes them (4 models, 2 variants, ~5 % errors,
realistic nulls), spread over ``--days`` days, are bulk-loaded into a SQLite store and every
hour but the last is sealed into the Parquet lake beside it (both reused when they already
hold the rows); the last hour is the hot tail, read from the store. Half an hour after the last
call, :func:`alerts.series.rule_series` computes these rules over 7-day windows (7/8 of the
calls at the default ``--days 8``):

* ``ttft_p99``: p99 ``ttft_s`` per model;
* ``error_rate``: per model and variant;
* ``rejection``: ``rejection_rate_429`` of service ``chat-api``;
* ``cost``: ``cost_per_1k_tokens_usd`` per model.

Each rule is computed through the lake (sealed hours from Parquet + the store's hot tail), with
the lake off (the store alone, ADBC → Arrow → DuckDB), and by the previous implementation
(``--baseline-commit``: ``alerts/series.py`` as it was, SQLAlchemy Core row fetches aggregated
in Python) as the null baseline; the three must agree. ``--repeat`` evaluations each, the median
is reported.

    python benchmarks/alert_rules.py                # 1,000,000 calls (~875,000 in 7 days)
    python benchmarks/alert_rules.py --rows 200000

Prints ``RESULT alerts_<rule>_<path>_ms=<n> ms`` lines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alerts.rules import ThresholdRule  # noqa: E402
from alerts.series import rule_series  # noqa: E402
from benchmarks.stats import T0_NS, ensure_data  # noqa: E402
from collector.lake import manifest  # noqa: E402
from collector.lake.layout import HOUR_NS, Lake, default_lake_url, open_lake  # noqa: E402
from collector.lake.seal import seal_pending  # noqa: E402
from collector.store import engine as store_engine  # noqa: E402

WEEK_S = 7 * 86_400.0


def _rule(name: str, stat: str, **kw: Any) -> ThresholdRule:
    return ThresholdRule.model_validate(
        {"name": name, "stat": stat, "threshold": 1.0, "receivers": ["x"], "window_s": WEEK_S} | kw
    )


RULES = [
    _rule("ttft_p99", "ttft_s", quantile=0.99, group_labels=["model"]),
    _rule("error_rate", "error_rate", group_labels=["model", "variant"]),
    _rule("rejection", "rejection_rate_429", filters={"service_name": "chat-api"}),
    _rule("cost", "cost_per_1k_tokens_usd", group_labels=["model"]),
]


def ensure_sealed(url: str, lake: Lake, days: int) -> None:
    """Seal every hour but the last (the hot tail, as in production a seal interval after an
    hour closes), unless the manifest already holds those calls."""
    cutoff = T0_NS + days * 86_400 * 10**9 - HOUR_NS
    engine = store_engine.make_engine(url)
    try:
        with engine.connect() as conn:
            sql = "SELECT count(*) FROM llm_calls WHERE start_unix_nano < :c"
            want = conn.execute(text(sql), {"c": cutoff}).scalar_one()
    finally:
        engine.dispose()
    have = sum(e.rows for e in manifest.load(lake, "default").hours.values())
    if have == want:
        print(f"reusing the lake at {lake.url} ({have} calls)", file=sys.stderr)
        return
    if lake.fs.exists(lake.root):
        lake.fs.rm(lake.root, recursive=True)
    t0 = time.perf_counter()
    report = seal_pending(url, lake, now_ns=cutoff, delay_s=0, late_s=0)
    if report.failed:
        raise SystemExit(f"sealing failed: {report.failed[:3]}")
    print(f"sealed {report.rows} calls in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def _old_rule_series(commit: str) -> Callable[..., Any]:
    """``rule_series`` of ``alerts/series.py`` at ``commit`` (the SQLAlchemy Core version)."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:alerts/series.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    mod = types.ModuleType("alerts_series_baseline")
    exec(compile(src, "alerts_series_baseline.py", "exec"), mod.__dict__)
    fn: Callable[..., Any] = mod.rule_series
    return fn


def _values(series: list[Any]) -> dict[str, float | None]:
    return {repr(sorted(s.labels.items())): s.samples[0].value for s in series}


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9 * abs(b)


def main() -> None:
    """Run the benchmark and print ``RESULT`` lines."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    default_db = Path(tempfile.gettempdir()) / "driftline-bench-alerts.db"
    ap.add_argument("--database-url", default=f"sqlite:///{default_db}")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline-repeat", type=int, default=1)
    ap.add_argument("--baseline-commit", default="8af2c64")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prepare-only", action="store_true", help="load and seal, measure nothing")
    args = ap.parse_args()
    if args.days < 8:
        raise SystemExit("--days must be at least 8 (a 7-day window plus a day)")
    ensure_data(args.database_url, args.rows, np.random.default_rng(args.seed), days=args.days)
    lake = open_lake(default_lake_url(args.database_url))
    ensure_sealed(args.database_url, lake, args.days)
    if args.prepare_only:
        return
    now = T0_NS / 1e9 + args.days * 86_400 + 1800  # half an hour after the last call
    old = _old_rule_series(args.baseline_commit)
    engine = store_engine.make_engine(args.database_url)
    try:
        with engine.connect() as conn:
            for rule in RULES:
                answers = {}
                paths: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
                    ("lake", rule_series, {"lake": lake}),
                    ("store", rule_series, {}),
                    ("sqlalchemy", old, {}),
                ]
                for path, fn, kw in paths:
                    n, warm = (args.baseline_repeat, 0) if fn is old else (args.repeat, 1)
                    times = []
                    for i in range(warm + n):
                        t0 = time.perf_counter()
                        answers[path] = _values(fn(conn, "default", rule, now, **kw))
                        if i >= warm:
                            times.append((time.perf_counter() - t0) * 1000)
                    print(f"RESULT alerts_{rule.name}_{path}_ms={np.median(times):.0f} ms")
                want = answers["sqlalchemy"]
                for path in ("lake", "store"):
                    got = answers[path]
                    ok = got.keys() == want.keys() and all(_close(got[k], want[k]) for k in want)
                    if not ok:
                        raise SystemExit(f"{rule.name}: {path} {got} != sqlalchemy {want}")
                print(f"{rule.name}: {want}", file=sys.stderr)
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
