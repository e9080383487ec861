"""Benchmark: a full drift run over 1,000,000 calls (12 signals × 10 segments), and Evidently.

Data (generated once, cached in ``.cache/bench-drift/``; loaded by ``benchmarks/storeload.py``;
10 M calls: ~4 min, ~8 GB): 1,000,000 calls in a SQLite store (schema from the migrations),
500,000 in a 12 h reference window and 500,000 in the next 12 h; 10 segments = 5 models ×
2 variants; prompts are real Dolly prompts without context (tests/fixtures/data), outputs are short
English answers with ~3 % refusals and ~1 % empty outputs; 2 % of calls carry a thumbs vote.
Two segments drift: one answers longer (output_tokens, e2e_s), one refuses more.

``drift_run_s``: wall time of :func:`drift.runs.run_drift` as the scheduled job runs it, through
the lake (the 24 closed hours sealed into the Parquet lake beside the store once, with the
per-call text features refusal / empty output, reused; a lake sealed without the running
features' digest is re-sealed; reading both windows from Parquet through DuckDB, the language
sample's texts only for the sampled calls), DuckDB signal extraction, sampled language
identification, 120 tests with BH, effect sizes, histograms, and the stored run (embeddings and
judge scores are not among the 12 signals). ``drift_run_store_s``: the same run reading every
call from the store (ADBC / sqlite3 -> Arrow), the null baseline in the same run
(``--no-lake`` runs only that one).

``drift_speedup_vs_evidently``: Evidently (in its own venv ``.cache/bench-venv``, which this
script creates on first use, run as a subprocess) computing its DataDriftPreset on the same per-
call signal values, one report per segment, reference vs current — timed around ``Report.run``
only (its data is handed over already extracted, in pandas), divided by ``drift_run_s``. The two
language columns are not given to Evidently (it has no language detector), so it computes 10 of
the 12 columns.

Usage: ``.venv/bin/python benchmarks/drift.py [--calls 1000000] [--no-evidently] [--no-lake]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.storeload import fast_load  # noqa: E402
from collector.lake import manifest, textfeatures  # noqa: E402
from collector.lake.layout import Lake, default_lake_url, open_lake  # noqa: E402
from collector.lake.seal import seal_pending  # noqa: E402
from collector.store import analytics  # noqa: E402
from collector.store import engine as store_engine  # noqa: E402
from drift.callreaders import lake_reader  # noqa: E402
from drift.runs import DriftSettings, run_drift  # noqa: E402
from drift.signals import refusal_sql  # noqa: E402
from drift.windows import Windows  # noqa: E402
from tests.support.fixtures import dolly_rows  # noqa: E402

CACHE = REPO / ".cache" / "bench-drift"
VENV = REPO / ".cache" / "bench-venv"
BASE_NS = 1_780_000_000 * 10**9
HOUR_NS = 3600 * 10**9
MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "llama-3.1-8b", "qwen2.5-7b"]
SIGNALS = [
    "input_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s", "finish_reason", "refusal",
    "empty_output", "guardrail_hit", "thumbs_down", "prompt_language", "output_language",
]  # fmt: skip
ANSWERS = [
    "Here is a short answer to your question, with the key facts first.",
    "The main points are listed below, followed by a brief explanation of each.",
    "In short: it depends on the context, but the usual approach works well.",
    "Sure. The steps are simple: prepare, check the inputs, then run it.",
]
REFUSAL = "I'm sorry, but I can't help with that request."


def generate(path: Path, n: int, seed: int = 7) -> None:
    """Write ``n`` calls and their thumbs votes into a fresh SQLite store at ``path``.

    Vectorised per chunk of 100,000 calls (numpy; the same draws in the same order as the
    per-row loop it replaced, so a seed gives the same rows) and loaded with
    :func:`benchmarks.storeload.fast_load` (indexes and the full-text index built after the
    rows; the same store as the writer's).
    """
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    store_engine.upgrade(url)
    rng = np.random.default_rng(seed)
    prompts = [row["prompt"] for row in dolly_rows() if not row["has_context"]]
    prompt_arr = np.array(prompts, dtype=object)
    prompt_tokens = np.maximum(1, np.array([len(p) for p in prompts]) // 4)
    answers = np.array(ANSWERS, dtype=object)
    models = np.array(MODELS, dtype=object)
    half = n // 2
    chunk = 100_000
    with fast_load(path) as con:
        con.execute("BEGIN")
        for lo in range(0, n, chunk):
            m = min(chunk, n - lo)
            idx = np.arange(lo, lo + m)
            cur = idx >= half
            start = BASE_NS + np.where(cur, 12 * HOUR_NS, 0) + (idx % half) * (12 * HOUR_NS // half)
            seg = rng.integers(0, 10, m)
            model = seg // 2
            variant = seg % 2
            longer = cur & (seg == 3)  # segment 3 answers longer in the current window
            refuses = rng.random(m) < np.where(cur & (seg == 6), 0.12, 0.03)  # segment 6 refuses
            empty = ~refuses & (rng.random(m) < 0.01)
            out_tok = np.maximum(1, rng.lognormal(np.where(longer, 5.6, 5.0), 0.6, m)).astype(int)
            ttft = rng.gamma(4.0, 0.06, m)
            tpot = rng.gamma(9.0, 0.0025, m)
            e2e = ttft + tpot * (out_tok - 1)
            finish = np.where(
                rng.random(m) < 0.05,
                "length",
                np.where(rng.random(m) < 0.004, "content_filter", "stop"),
            )
            redactions = np.where(rng.random(m) < 0.01, 1, 0)
            p_idx = rng.integers(0, len(prompts), m)
            a_idx = rng.integers(0, len(ANSWERS), m)
            ids = idx.tolist()
            traces = [f"{i:032x}" for i in ids]
            spans = [f"{i + 1:016x}" for i in ids]
            texts = answers[a_idx]
            texts[refuses] = REFUSAL
            texts[empty] = ""
            tpot_col = tpot.astype(object)
            tpot_col[out_tok <= 1] = None
            con.executemany(
                "INSERT INTO llm_calls (tenant, trace_id, span_id, call_id, service_name, model, "
                "variant, start_unix_nano, end_unix_nano, input_tokens, output_tokens, ttft_s, "
                "e2e_s, tpot_s, finish_reason, status, flags, input_text, output_text, dialect, "
                "redactions) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                zip(
                    ["default"] * m, traces, spans,
                    [f"{t}:{s}" for t, s in zip(traces, spans, strict=True)],
                    ["chat-api"] * m, models[model].tolist(),
                    np.where(variant == 1, "v1", "v0").astype(object).tolist(), start.tolist(),
                    (start + e2e * 1e9).astype(np.int64).tolist(), prompt_tokens[p_idx].tolist(),
                    out_tok.tolist(), ttft.tolist(), e2e.tolist(), tpot_col.tolist(),
                    finish.astype(object).tolist(), ["ok"] * m, ["[]"] * m,
                    prompt_arr[p_idx].tolist(), texts.tolist(), ["semconv"] * m,
                    redactions.tolist(),
                    strict=True,
                ),
            )  # fmt: skip
            voted = np.flatnonzero(rng.random(m) < 0.02)
            down_p = np.where(refuses[voted] | empty[voted], 0.7, 0.15)
            down = rng.random(len(voted)) < down_p  # one draw per vote, in order, as before
            now = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")
            con.executemany(
                "INSERT INTO feedback (tenant, feedback_id, trace_id, span_id, kind, attributes, "
                "timestamp_unix_nano, received_at) VALUES (?,?,?,?,?,?,?,?)",
                [
                    ("default", f"fb-{int(idx[v])}", f"{int(idx[v]):032x}",
                     f"{int(idx[v]) + 1:016x}", "thumbs_down" if down[j] else "thumbs_up", "{}",
                     int(start[v]) + 60 * 10**9, now)
                    for j, v in enumerate(voted)
                ],
            )  # fmt: skip
        con.execute("COMMIT")


def export_for_evidently(url: str, out: Path) -> None:
    """Per-call signal values (the 10 full-data signals) of both windows, as Parquet."""
    import duckdb

    names = ["model", "variant", "input_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s",
             "finish_reason", "redactions", "output_text", "trace_id"]  # fmt: skip
    t = analytics.fetch_calls(url, "default", since_ns=BASE_NS, until_ns=BASE_NS + 24 * HOUR_NS,
                              columns=[*names, "start_unix_nano"])  # fmt: skip
    con = duckdb.connect()
    con.register("c", t)
    con.execute(
        f"COPY (SELECT model || '/' || variant AS segment, "
        f"CASE WHEN start_unix_nano >= {BASE_NS + 12 * HOUR_NS} THEN 1 ELSE 0 END AS win, "
        "CAST(input_tokens AS DOUBLE) input_tokens, CAST(output_tokens AS DOUBLE) output_tokens, "
        "ttft_s, tpot_s, e2e_s, finish_reason, "
        f"CAST({refusal_sql('output_text')} AS INTEGER) AS refusal, "
        "CAST(trim(output_text) = '' AS INTEGER) AS empty_output, "
        "CAST(finish_reason = 'content_filter' OR redactions > 0 AS INTEGER) AS guardrail_hit "
        f"FROM c) TO '{out}' (FORMAT parquet)"
    )
    con.close()


EVIDENTLY_SCRIPT = r"""
import sys, time, warnings
warnings.filterwarnings("ignore")
import pandas as pd
from evidently import DataDefinition, Dataset, Report
from evidently.presets import DataDriftPreset
df = pd.read_parquet(sys.argv[1])
num = ["input_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s"]
cat = ["finish_reason", "refusal", "empty_output", "guardrail_hit"]
definition = DataDefinition(numerical_columns=num, categorical_columns=cat)
t0 = time.perf_counter()
for seg, part in df.groupby("segment"):
    ref = Dataset.from_pandas(part[part.win == 0][num + cat], data_definition=definition)
    cur = Dataset.from_pandas(part[part.win == 1][num + cat], data_definition=definition)
    snap = Report([DataDriftPreset()]).run(current_data=cur, reference_data=ref)
    snap.dict()  # materialise every metric result
print(f"EVIDENTLY_S {time.perf_counter() - t0:.3f}")
"""


#: what the Evidently side needs (its own venv: Evidently pins versions driftline does not use)
EVIDENTLY_REQUIREMENTS = ("evidently", "pandas<3", "pyarrow")


def evidently_python(venv: Path = VENV) -> Path:
    """The interpreter of Evidently's own venv under ``.cache/``, created and installed on
    first use (PyPI; about a minute once), then reused. A venv left half-built by an
    interrupted install is rebuilt (the stamp file is written last).

    Raises:
        SystemExit: the venv could not be created or the install failed (pip's last lines).
    """
    py = venv / "bin" / "python"
    stamp = venv / ".installed"
    if py.exists() and stamp.exists():
        return py
    print(f"creating Evidently's venv in {venv} (first run only: ~1 min, PyPI)", flush=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(py), "-m", "pip", "install", "-q", *EVIDENTLY_REQUIREMENTS],
    ]
    for argv in steps:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:])
            raise SystemExit(f"could not build Evidently's venv: {' '.join(argv[:4])} failed")
    stamp.write_text(" ".join(EVIDENTLY_REQUIREMENTS) + "\n")
    return py


def ensure_sealed(url: str, calls: int) -> Lake:
    """The lake beside the store with every hour of both windows sealed (reused when its
    manifest already holds ``calls`` calls sealed with the running text-feature definitions);
    prints the seal rate when it seals."""
    lake = open_lake(default_lake_url(url))
    hours = manifest.load(lake, "default").hours
    if sum(e.rows for e in hours.values()) == calls and all(
        textfeatures.fresh(lake, lake.data_path("calls", "default", h)) for h in hours
    ):
        return lake
    if lake.fs.exists(lake.root):
        lake.fs.rm(lake.root, recursive=True)
    t = time.perf_counter()
    report = seal_pending(url, lake, now_ns=BASE_NS + 25 * HOUR_NS, delay_s=0, late_s=0)
    if report.failed:
        raise SystemExit(f"sealing failed: {report.failed[:3]}")
    print(f"sealed {report.rows} calls in {time.perf_counter() - t:.1f} s")
    return lake


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--rows", "--calls", dest="calls", type=int, default=1_000_000,
        help="calls in the store, 1 to 10,000,000",
    )  # fmt: skip
    ap.add_argument("--no-evidently", action="store_true")
    ap.add_argument("--no-lake", action="store_true", help="only the store-only run")
    ap.add_argument("--regenerate", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.calls <= 10_000_000:
        ap.error("--rows must be between 1 and 10,000,000")
    CACHE.mkdir(parents=True, exist_ok=True)
    db = CACHE / f"calls-{args.calls}.db"
    url = f"sqlite:///{db}"
    if args.regenerate or not db.exists():
        t = time.perf_counter()
        generate(db, args.calls)
        print(f"generated {args.calls} calls in {time.perf_counter() - t:.1f} s")
    engine = store_engine.make_engine(url)
    settings = DriftSettings(  # type: ignore[call-arg]
        signals=SIGNALS, segment_by=["model", "variant"], max_segments=10, include_all=False,
        seed=1, alert=False, text_sample=200,
    )  # fmt: skip
    windows = Windows(BASE_NS, BASE_NS + 12 * HOUR_NS, BASE_NS + 12 * HOUR_NS,
                      BASE_NS + 24 * HOUR_NS, "range", "bench")  # fmt: skip
    t0 = time.perf_counter()
    summary = run_drift(engine, url, "default", windows, settings, trigger="cli")
    run_s = store_s = time.perf_counter() - t0
    assert summary.status == "ok", summary.error
    print(
        f"results={summary.n_results} evaluated={summary.n_evaluated} "
        f"drifted={summary.n_drifted}: {sorted(set(summary.drifted))}"
    )
    print(f"RESULT drift_run_store_s={store_s:.3f} s")
    if not args.no_lake:
        lake = ensure_sealed(url, args.calls)
        t0 = time.perf_counter()
        lake_summary = run_drift(
            engine, url, "default", windows, settings, trigger="cli", read=lake_reader(lake)
        )
        run_s = time.perf_counter() - t0
        assert lake_summary.status == "ok", lake_summary.error
        assert sorted(lake_summary.drifted) == sorted(summary.drifted), "lake and store differ"
        print(f"RESULT drift_run_s={run_s:.3f} s")
        print(f"RESULT drift_lake_speedup_vs_store={store_s / run_s:.2f} x")
    if args.no_evidently:
        return
    py = evidently_python()
    parquet = CACHE / f"signals-{args.calls}.parquet"
    if not parquet.exists():
        export_for_evidently(url, parquet)
    script = CACHE / "evidently_run.py"
    script.write_text(EVIDENTLY_SCRIPT)
    proc = subprocess.run(
        [str(py), str(script), str(parquet)], capture_output=True, text=True, check=False
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("EVIDENTLY_S")]
    if proc.returncode != 0 or not line:
        print(proc.stdout[-2000:], proc.stderr[-4000:])
        raise SystemExit("evidently run failed")
    ev_s = float(line[0].split()[1])
    print(f"evidently_s={ev_s:.3f} (Report.run only, 10 segments x 10 columns)")
    print(f"RESULT drift_speedup_vs_evidently={ev_s / run_s:.2f} x")


if __name__ == "__main__":
    main()
