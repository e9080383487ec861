"""Bounded judging: one sample takes at most ``sample_timeout_s``; a sample whose lease would
run out before its turn goes back to the queue unjudged; a stalled claim shows on /metrics.
Real store (SQLite and PostgreSQL), the judge is the in-process fake OpenAI-compatible server."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator

import pytest
from fake_judge_api import FakeJudgeServer, Reply, completion
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import ValidationError
from sqlalchemy import Engine, select

from collector.store import engine as store_engine
from collector.store.models.judges import JudgeResultRow, JudgeSample
from judges.claims import claim_samples
from judges.queue_health import queue_health, register_queue_health
from judges.selection import select_new_samples
from tests.judges.test_judge_worker_store import _ingest, _run, _settings


@pytest.fixture
def engine(client: TestClient, db_url: str) -> Iterator[Engine]:
    e = store_engine.make_engine(db_url)
    yield e
    e.dispose()


def _slow_verdict(delay_s: float) -> Reply:
    return Reply(body=completion(json.dumps({"reasoning": "r", "score": 4})), delay_s=delay_s)


def test_a_slow_judge_costs_at_most_sample_timeout_per_sample(
    client: TestClient, engine: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 2)
    judge_server.handler = lambda body: _slow_verdict(30.0)
    settings = _settings(
        judge_server, sample_timeout_s=1.0, timeout_s=60.0, max_attempts=1, concurrency=2
    )
    t0 = time.monotonic()
    report = _run(judge_server, engine, settings)
    took = time.monotonic() - t0
    assert report.failed == 2 and report.judged == 0
    assert took < 20, took  # not 30 s per request x retries
    with engine.connect() as conn:
        errors = conn.execute(select(JudgeResultRow.error_kind, JudgeResultRow.error)).all()
    assert {k for k, _ in errors} == {"unavailable"}
    assert all("SAMPLE_TIMEOUT_S" in str(e) for _, e in errors)


def test_a_sample_whose_lease_cannot_cover_a_call_goes_back_unjudged(
    client: TestClient, engine: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 3)
    judge_server.handler = lambda body: _slow_verdict(0.0)
    # a 5 s lease leaves nothing after the 5 s kept for storing the result
    settings = _settings(judge_server, lease_s=5.0, sample_timeout_s=1.0)
    report = _run(judge_server, engine, settings)
    assert report.requeued == 3 and report.judged == 0 and report.failed == 0
    assert judge_server.requests == []  # no judge call was wasted on a lease about to expire
    with engine.connect() as conn:
        rows = conn.execute(select(JudgeSample.status, JudgeSample.lease_owner)).all()
    assert set(rows) == {("pending", None)}


def test_sample_timeout_must_fit_in_the_lease(judge_server: FakeJudgeServer) -> None:
    with pytest.raises(ValidationError, match="SAMPLE_TIMEOUT_S"):
        _settings(judge_server, lease_s=60.0, sample_timeout_s=60.0)


def test_a_stalled_claim_shows_on_metrics_and_returns_to_the_queue(
    client: TestClient, engine: Engine, judge_server: FakeJudgeServer
) -> None:
    _ingest(client, 3)
    select_new_samples(engine, _settings(judge_server), pace=False)
    claimed = claim_samples(engine, worker_id="dead-worker", limit=1, lease_s=30)
    assert len(claimed) == 1
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)
    health = queue_health(engine, now=later)
    assert (health.pending, health.claimed, health.expired_claims) == (2, 1, 1)
    assert 59 < health.oldest_claim_s < 90
    registry = CollectorRegistry()
    register_queue_health(registry, engine)
    register_queue_health(registry, engine)  # once per registry
    text = generate_latest(registry).decode()
    assert 'driftline_judge_samples{status="claimed"} 1.0' in text
    assert "driftline_judge_oldest_claim_seconds" in text
    assert "driftline_judge_expired_claims 0.0" in text  # not expired yet, now
    # the dead worker's claim is taken back once its lease has expired
    again = claim_samples(engine, worker_id="w2", limit=10, lease_s=30, now=later)
    assert {s.id for s in claimed} <= {s.id for s in again}
