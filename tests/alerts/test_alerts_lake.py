"""Threshold rules read calls through the lake's query layer: over sealed hours plus the hot
tail they give the store's own answer, on SQLite and PostgreSQL; the sealed part really comes
from the Parquet files; rate-limit classification is the one definition in
``collector.store.callstats``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import delete
from sqlalchemy.orm import Session

from alerts import store as alert_store
from alerts.callseries import rate_limited_types
from alerts.jobs import jobs
from alerts.receivers import Receiver, StaticReceivers
from alerts.rules import ThresholdRule
from alerts.runtime import evaluate_tenant
from alerts.series import rule_series
from collector.lake import layout, seal
from collector.scheduler import JobContext
from collector.store import bulk
from collector.store.callstats import is_rate_limited
from collector.store.engine import make_engine
from collector.store.models import LLMCall
from tests.collector.lake import calldata
from tests.conftest import make_settings

HOUR = calldata.HOUR_NS
T0 = calldata.T0_NS
#: hours 0..5 are closed and sealed; hour 6 (calls up to 6.5 h) stays in the store
NOW_NS = T0 + 6 * HOUR + 3 * HOUR // 4
NOW = NOW_NS / 1e9
ODD_ERRORS = (" 429 ", "RateLimitError", "QUEUE_FULL", "rate_limit_exceeded\n", "ratelimit", "")
NAMES = [c.name for c in bulk.CALLS.columns]


def _call(k: int, start_ns: int, **fields: Any) -> tuple[Any, ...]:
    rec = {
        "tenant": "default",
        "trace_id": f"{k:032x}",
        "span_id": f"{k:016x}",
        "call_id": f"c-{k}",
        "start_unix_nano": start_ns,
        "status": "ok",
        "flags": [],
        "dialect": "semconv",
        **fields,
    }
    return tuple(rec.get(n) for n in NAMES)


def _extra_calls() -> list[tuple[Any, ...]]:
    """Odd error types and request/response models (not pushed-down filters), in a sealed
    hour (1) and in the hot tail (6)."""
    out = []
    for i, et in enumerate(ODD_ERRORS * 2):
        hour = 1 if i < len(ODD_ERRORS) else 6
        out.append(
            _call(
                90_000 + i,
                T0 + hour * HOUR + (i + 1) * 10**9,
                status="error",
                error_type=et,
                model="gpt-4o",
                request_model="gpt-4o" if i % 2 else "gpt-4o-mini",
                response_model="gpt-4o-2024",
                ttft_s=0.1 * (i + 1),
            )
        )
    return out


def _batch() -> list[tuple[Any, ...]]:
    """The default tenant's calls (10 of unknown start), then 200 of another tenant."""
    rng = np.random.default_rng(5)
    batch = calldata.rows(rng, 2000, span_ns=int(6.5 * HOUR), null_starts=10)
    batch += _extra_calls()
    return batch + calldata.rows(rng, 200, tenant="acme", first_id=20_000, span_ns=6 * HOUR)


@pytest.fixture
def sealed(db_url: str, tmp_path: Path) -> tuple[str, layout.Lake]:
    calldata.load(db_url, _batch())
    lake = layout.open_lake(str(tmp_path / "lake"))
    rep = seal.seal_pending(db_url, lake, now_ns=NOW_NS, delay_s=0)
    assert sorted(h for t, h in rep.sealed if t == "default") == [T0 + k * HOUR for k in range(6)]
    return db_url, lake


def _rule(stat: str, **kw: Any) -> ThresholdRule:
    return ThresholdRule.model_validate(
        {"name": "r", "stat": stat, "threshold": 1.0, "receivers": ["oncall"], **kw}
    )


RULES = [
    _rule("ttft_s", quantile=0.99, window_s=7 * 86_400, group_labels=["model"]),
    _rule("ttft_s", quantile=0.5, window_s=7 * 86_400, min_samples=50),
    _rule("e2e_s", window_s=2.3 * 3600, group_labels=["model", "variant"]),  # cuts hour 4
    _rule("tpot_s", quantile=0.95, window_s=86_400, filters={"service_name": "chat-api"}),
    _rule("queue_s", quantile=0.9, window_s=86_400, filters={"service": "batch"}),
    _rule("error_rate", window_s=7 * 86_400, group_labels=["service", "variant"]),
    _rule("rejection_rate_429", window_s=7 * 86_400, group_labels=["model"]),
    _rule("rejection_rate_429", window_s=2700),  # [6 h, 6.75 h]: the hot tail only
    _rule("rejection_rate_429", window_s=86_400, filters={"request_model": "gpt-4o"}),
    _rule("error_rate", window_s=86_400, group_labels=["response_model"]),
    _rule("cost_per_1k_tokens_usd", window_s=7 * 86_400, group_labels=["model"], min_samples=5),
    _rule("ttft_s", window_s=86_400, filters={"model": "gpt-4o", "service": "x"}),
    _rule("e2e_s", window_s=86_400, filters={"service": "batch", "service_name": "chat-api"}),
]


def _values(conn: Any, rule: ThresholdRule, lake: layout.Lake | None) -> dict[str, Any]:
    return {
        repr(sorted(s.labels.items())): s.samples[0].value
        for s in rule_series(conn, "default", rule, NOW, lake=lake)
    }


def test_rules_over_sealed_hours_and_hot_tail_equal_the_store(
    sealed: tuple[str, layout.Lake],
) -> None:
    url, lake = sealed
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            want = [_values(conn, r, None) for r in RULES]
            got = [_values(conn, r, lake) for r in RULES]
        for rule, w, g in zip(RULES, want, got, strict=True):
            assert g.keys() == w.keys(), rule
            for k in w:
                if w[k] is None:
                    assert g[k] is None, (rule, k)
                else:
                    assert g[k] == pytest.approx(w[k], rel=1e-12), (rule, k)
        assert any(v is not None for v in want[0].values())
        # The sealed hours come from Parquet: drop them from the store and the lake still
        # answers as before (the store alone no longer does).
        with engine.begin() as conn:
            conn.execute(
                delete(LLMCall).where(
                    LLMCall.tenant == "default", LLMCall.start_unix_nano < T0 + 6 * HOUR
                )
            )
        with engine.connect() as conn:
            assert _values(conn, RULES[0], lake) == pytest.approx(want[0], rel=1e-12)
            assert _values(conn, RULES[0], None) != want[0]
    finally:
        engine.dispose()


def test_latency_quantile_is_numpy_type_7_over_known_values(
    sealed: tuple[str, layout.Lake],
) -> None:
    url, lake = sealed
    rows = [dict(zip(NAMES, r, strict=True)) for r in _batch()]
    lo = NOW_NS - 7 * 86_400 * 10**9
    ttft = [
        r["ttft_s"]
        for r in rows
        if r["tenant"] == "default"
        and r["model"] == "gpt-4o"
        and r["ttft_s"] is not None
        and r["start_unix_nano"] is not None
        and lo <= r["start_unix_nano"] <= NOW_NS
    ]
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            got = _values(conn, RULES[0], lake)
    finally:
        engine.dispose()
    assert got[repr([("model", "gpt-4o")])] == pytest.approx(float(np.quantile(ttft, 0.99)))


def test_rate_limited_set_agrees_with_is_rate_limited() -> None:
    values = [*ODD_ERRORS, "429", "timeout", None, "Too_Many_Requests", "\toverloaded\u00a0"]
    values += ["42 9", "rate limited", "RATE_LIMITED"]

    got = set(rate_limited_types(pa.array(values, pa.string())).to_pylist())
    assert got == {v for v in values if is_rate_limited(v)}
    assert "ratelimit" not in got and " 429 " in got


def test_evaluation_fires_from_sealed_hours(sealed: tuple[str, layout.Lake]) -> None:
    url, lake = sealed
    rule = _rule("rejection_rate_429", window_s=7 * 86_400, threshold=0.01, op=">")
    engine = make_engine(url)
    try:
        with Session(engine) as s, s.begin():
            alert_store.save_rule(s, "default", rule, enabled=True, now=NOW)
        rcv = StaticReceivers([Receiver(name="oncall", kind="generic", url="http://127.0.0.1:9/x")])
        r = evaluate_tenant(engine, "default", now=NOW, receivers=rcv, lake=lake)
    finally:
        engine.dispose()
    (alert,) = r.alerts
    assert alert.last_value is not None and alert.last_value > 0.01


def test_the_evaluation_job_reads_the_configured_lake(sealed: tuple[str, layout.Lake]) -> None:
    url, lake = sealed
    rule = _rule("ttft_s", quantile=0.99, window_s=7 * 86_400, threshold=0.0, op=">")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            (want,) = rule_series(conn, "default", rule, NOW, lake=lake)
        with Session(engine) as s, s.begin():
            alert_store.save_rule(s, "default", rule, enabled=True, now=NOW)
        with engine.begin() as conn:  # only the lake still holds the sealed hours
            conn.execute(
                delete(LLMCall).where(
                    LLMCall.tenant == "default", LLMCall.start_unix_nano < T0 + 6 * HOUR
                )
            )
        settings = make_settings(url, lake_enabled=True, lake_url=lake.url)
        (evaluate,) = [j for j in jobs(settings, clock=lambda: NOW) if j.name == "alerts.evaluate"]
        evaluate.fn(JobContext(settings, engine, CollectorRegistry()))
        with Session(engine) as s:
            (alert,) = alert_store.load_alerts(s, "default", rule="r").values()
    finally:
        engine.dispose()
    assert want.samples[0].value is not None
    assert alert.last_value == pytest.approx(want.samples[0].value, rel=1e-12)
