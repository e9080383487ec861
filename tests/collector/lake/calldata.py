"""Synthetic calls for the lake tests, bulk-loaded into a real store (the writer's fast path)."""

from __future__ import annotations

from typing import Any

import numpy as np

from collector.store import bulk
from collector.store import engine as store_engine

HOUR_NS = 3600 * 10**9
T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
MODELS = ("gpt-4o", "llama-3.1-8b", None)


def rows(
    rng: np.random.Generator,
    n: int,
    *,
    tenant: str = "default",
    first_id: int = 0,
    start_ns: int = T0_NS,
    span_ns: int = 6 * HOUR_NS,
    null_starts: int = 0,
) -> list[tuple[Any, ...]]:
    """``n`` calls (tuples in ``llm_calls`` column order) over ``[start_ns, start_ns+span_ns)``,
    with realistic nulls, errors, both variants; the last ``null_starts`` have no start time."""
    names = [c.name for c in bulk.CALLS.columns]
    starts = start_ns + rng.integers(0, span_ns, n)
    out = []
    for i in range(n):
        k = first_id + i
        model = MODELS[int(rng.integers(0, len(MODELS)))]
        error = rng.random() < 0.08
        ttft = float(rng.lognormal(-1.6, 0.7))
        out_tok = int(rng.integers(1, 600))
        e2e = ttft + 0.02 * out_tok
        no_start = i >= n - null_starts
        rec = {
            "tenant": tenant,
            "trace_id": f"{k:032x}",
            "span_id": f"{k:016x}",
            "call_id": f"c-{k}",
            "service_name": "chat-api" if rng.random() < 0.7 else "batch",
            "operation": "chat",
            "model": model,
            "variant": "candidate" if rng.random() < 0.3 else "baseline",
            "rollout": "r1",
            "start_unix_nano": None if no_start else int(starts[i]),
            "end_unix_nano": None if no_start else int(starts[i] + e2e * 1e9),
            "input_tokens": int(rng.integers(5, 3000)) if rng.random() < 0.95 else None,
            "output_tokens": None if error else out_tok,
            "queue_s": float(rng.exponential(0.05)) if rng.random() < 0.5 else None,
            "ttft_s": None if error or rng.random() < 0.1 else ttft,
            "e2e_s": e2e,
            "tpot_s": None if error else 0.02,
            "finish_reasons": ["error"] if error else ["stop"],
            "finish_reason": "error" if error else "stop",
            "status": "error" if error else "ok",
            "error_type": ("429" if rng.random() < 0.5 else "timeout") if error else None,
            "flags": ["unpriced"] if model is None else [],
            "cost_usd": None if model is None or error else float(out_tok * 1e-5),
            "gpu_cost_usd": None,
            "input_text": f"question {k}",
            "output_text": None if error else f"answer {k}",
            "dialect": "semconv",
        }
        out.append(tuple(rec.get(name) for name in names))
    return out


def load(url: str, batch: list[tuple[Any, ...]]) -> None:
    """Migrate the store at ``url`` (idempotent) and upsert ``batch``."""
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    try:
        with engine.begin() as conn:
            bulk.upsert(conn, bulk.CALLS, batch)
    finally:
        engine.dispose()


REFUSAL = "I'm sorry, but I can't help with that."


def drifting_history(seed: int = 11) -> list[tuple[Any, ...]]:
    """6.5 hours of calls for drift runs over the lake: hours 0-3 as :func:`rows` makes them
    (the reference), then 2.5 hours (the current window) whose TTFT is 1.6x slower and where
    one answer in ten is a refusal: some signals drift, others do not."""
    rng = np.random.default_rng(seed)
    names = [c.name for c in bulk.CALLS.columns]
    ttft, text = names.index("ttft_s"), names.index("output_text")
    ref = rows(rng, 1600, span_ns=4 * HOUR_NS)
    cur = []
    for r in rows(
        rng, 1000, first_id=5000, start_ns=T0_NS + 4 * HOUR_NS, span_ns=int(2.5 * HOUR_NS)
    ):
        rec = list(r)
        if rec[ttft] is not None:
            rec[ttft] *= 1.6
        if rec[text] is not None and rng.random() < 0.1:
            rec[text] = REFUSAL
        cur.append(tuple(rec))
    return ref + cur
