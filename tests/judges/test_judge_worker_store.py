"""Worker mechanics on SQLite and PostgreSQL: budget, concurrent claims, leases, transient
failures, and the judge-drift check. Calls arrive over OTLP; the judge is the in-process fake
OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fake_judge_api import FakeJudgeServer, Reply, completion, error_body
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from collector.store import engine as store_engine
from collector.store.models.judges import JudgeResultRow, JudgeSample, ReviewItem
from judges.claims import claim_samples
from judges.drift_check import check_judge_drift
from judges.review import next_item, submit_label
from judges.selection import select_new_samples
from judges.settings import JudgeSettings
from judges.worker import run_once
from tests.conftest import wait_for


def _otlp(n: int, offset: int = 0) -> dict[str, Any]:
    spans = []
    for i in range(offset, offset + n):
        attrs = {
            "gen_ai.request.model": "m",
            "gen_ai.response.id": f"call-{i}",
            "gen_ai.prompt.0.content": f"question {i}",
            "gen_ai.completion.0.content": f"answer {i}",
        }
        spans.append(
            {
                "traceId": f"{i + 1:032x}",
                "spanId": f"{i + 1:016x}",
                "name": "chat m",
                "startTimeUnixNano": str(1_800_000_000_000_000_000 + i),
                "endTimeUnixNano": str(1_800_000_000_100_000_000 + i),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
            }
        )
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def _ingest(client: TestClient, n: int, offset: int = 0) -> None:
    assert client.post("/v1/traces", json=_otlp(n, offset)).status_code == 200
    wait_for(
        lambda: (
            len(client.get("/api/v1/calls", params={"limit": 1000}).json()["items"]) == n + offset
        )
    )


@pytest.fixture
def store(client: TestClient, db_url: str) -> Iterator[Engine]:
    engine = store_engine.make_engine(db_url)
    yield engine
    engine.dispose()


def _settings(server: FakeJudgeServer, **overrides: Any) -> JudgeSettings:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "judge-model",
        "base_rate": 1.0,
        "settle_s": 0.0,
        "audit_rate": 1.0,
    }
    values.update(overrides)
    return JudgeSettings(**values)


def _run(server: FakeJudgeServer, engine: Engine, settings: JudgeSettings) -> Any:
    async def go() -> Any:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        try:
            return await run_once(client, engine, settings, worker_id="w1", pace=False)
        finally:
            await client.close()

    return asyncio.run(go())


def _verdict(score: int) -> Reply:
    return Reply(body=completion(json.dumps({"reasoning": "r", "score": score})))


def test_daily_call_budget_caps_samples_and_sets_inclusion_probabilities(
    client: TestClient, store: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 20)
    settings = _settings(judge_server, daily_max_calls=5, base_rate=0.8)
    select_new_samples(store, settings, pace=False)
    _ingest(client, 10, offset=20)
    select_new_samples(store, settings, pace=False)  # budget already spent: nothing more
    with store.connect() as conn:
        rows = conn.execute(select(JudgeSample.call_id, JudgeSample.inclusion_probability)).all()
    assert len(rows) == 5
    # sequential Poisson sampling: π = s·r with the threshold s < 1 where the budget ran out
    assert all(0 < pi < 0.8 for _, pi in rows)
    assert len({pi for _, pi in rows}) == 1


def test_concurrent_claims_never_share_a_sample(
    client: TestClient, store: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 24)
    select_new_samples(store, _settings(judge_server), pace=False)
    got: dict[str, list[int]] = {}

    def worker(name: str) -> None:
        ids: list[int] = []
        while batch := claim_samples(store, worker_id=name, limit=3, lease_s=60):
            ids.extend(s.id for s in batch)
        got[name] = ids

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    claimed = [i for ids in got.values() for i in ids]
    assert len(claimed) == len(set(claimed)) == 24
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
    again = claim_samples(store, worker_id="w9", limit=100, lease_s=60, now=later)
    assert len(again) == 24 and all(s.attempts == 2 for s in again)  # leases expired


def test_unavailable_judge_requeues_then_fails_without_a_score(
    client: TestClient, store: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 2)
    judge_server.handler = lambda body: Reply(503, error_body("overloaded"))
    settings = _settings(judge_server, max_attempts=2, timeout_s=5.0)
    first = _run(judge_server, store, settings)
    assert first.requeued == 2 and first.judged == 0
    second = _run(judge_server, store, settings)
    assert second.failed == 2
    with store.connect() as conn:
        results = conn.execute(select(JudgeResultRow.__table__)).all()
        statuses = set(conn.execute(select(JudgeSample.status)).scalars())
    assert statuses == {"failed"} and len(results) == 4
    assert {(r.status, r.error_kind, r.score, r.label) for r in results} == {
        ("failed", "unavailable", None, None)
    }


def test_judge_drift_check_flags_a_moved_human_judge_gap(
    client: TestClient, store: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 12)
    judge_server.handler = lambda body: _verdict(3)
    assert _run(judge_server, store, _settings(judge_server)).judged == 12
    now = dt.datetime.now(dt.UTC)
    for k in range(12):
        # older half: humans agree with the judge (gap ≈ 0); recent half: humans score higher
        old = k < 6
        when = now - dt.timedelta(days=10 if old else 1)
        task = next_item(store, "default", "rev", lease_s=60, now=when)
        assert task is not None
        human = (3, 3, 2, 4, 3, 3)[k % 6] if old else (5, 5, 4, 5, 5, 4)[k % 6]
        submit_label(store, "default", task.id, "rev", score=human, now=when)
    with store.connect() as conn:
        assert conn.execute(select(func.count()).select_from(ReviewItem)).scalar_one() == 12
    checks = check_judge_drift(store, window_s=7 * 86400, min_samples=5, now=now)
    (check,) = checks
    assert check.tenant == "default" and check.rubric == "helpfulness"
    assert check.result.drifted is True
    assert check.result.gap_reference == pytest.approx(0.0)
    assert check.result.gap_change == pytest.approx(28 / 6 - 3)
    quiet = check_judge_drift(store, window_s=7 * 86400, min_samples=7, now=now)
    assert quiet[0].result.insufficient_data and quiet[0].result.drifted is None


def test_a_late_thumbs_down_raises_the_stored_inclusion_probability(
    client: TestClient, store: Engine, judge_server: FakeJudgeServer
) -> None:
    """A call sampled at pi = 0.5 then flagged: every flagged call is judged, so pi becomes 1."""
    _ingest(client, 8)
    settings = _settings(judge_server, base_rate=0.5)
    select_new_samples(store, settings, pace=False)
    with store.connect() as conn:
        sampled = conn.execute(
            select(JudgeSample.trace_id, JudgeSample.span_id, JudgeSample.inclusion_probability)
        ).all()
    assert sampled and all(p == 0.5 for _, _, p in sampled)
    trace_id, span_id, _ = sampled[0]
    r = client.post(
        "/api/v1/feedback", json={"kind": "thumbs_down", "trace_id": trace_id, "span_id": span_id}
    )
    assert r.status_code == 202, r.text
    wait_for(
        lambda: bool(client.get("/api/v1/calls", params={"has_feedback": True}).json()["items"])
    )
    select_new_samples(store, settings, pace=False)
    with store.connect() as conn:
        rows = conn.execute(
            select(JudgeSample.span_id, JudgeSample.inclusion_probability, JudgeSample.stratum)
        ).all()
    by_span = {s: (p, st) for s, p, st in rows}
    assert by_span[span_id] == (1.0, "flagged_late")
    assert all(p == 0.5 for s, (p, _) in by_span.items() if s != span_id)
    assert len(rows) == len(sampled)  # nothing inserted twice
