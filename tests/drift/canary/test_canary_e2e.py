"""Canary rollouts end to end through the store: spans in through ``/v1/traces``, the rollout
created through the API, evaluated by the scheduler's function (``drift.canary.jobs``), the
decision applied to the weights the gateway reads. Case 25 through the stored path."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select, update

from collector.scheduler import JobContext
from collector.store.models import LLMCall
from collector.store.models.canary import Rollout
from drift.canary.jobs import evaluate_rollout, jobs
from drift.canary.store import get_rollout
from tests.conftest import CASES, wait_for

NS = 1_000_000_000


def call_span(
    *,
    variant: str,
    rollout: str,
    start_ns: int,
    ttft_s: float,
    error: bool = False,
    e2e_s: float = 1.0,
) -> dict[str, Any]:
    """One gateway-style client span (OTLP JSON) of a chat call routed to ``variant``."""

    def s(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    attrs = [
        s("gen_ai.operation.name", "chat"),
        s("gen_ai.request.model", variant),
        s("gen_ai.response.model", variant),
        s("driftline.rollout", rollout),
        s("driftline.variant", variant),
        {"key": "gen_ai.response.time_to_first_chunk", "value": {"doubleValue": ttft_s}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "120"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "40"}},
        {
            "key": "gen_ai.response.finish_reasons",
            "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}},
        },
    ]
    span: dict[str, Any] = {
        "traceId": uuid.uuid4().hex,
        "spanId": uuid.uuid4().hex[:16],
        "name": f"chat {variant}",
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + int(e2e_s * NS)),
        "attributes": attrs,
    }
    if error:
        span["status"] = {"code": 2, "message": "engine error"}
        attrs.append(s("error.type", "500"))
    return span


def ingest(client: TestClient, spans: Sequence[dict[str, Any]], batch: int = 250) -> None:
    """POST spans as OTLP/JSON and wait until every call is stored."""
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(LLMCall)).scalar_one()
    for i in range(0, len(spans), batch):
        body = {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "gw"}}]
                    },
                    "scopeSpans": [{"spans": list(spans[i : i + batch])}],
                }
            ]
        }
        r = client.post("/v1/traces", json=body)
        assert r.status_code == 200, r.text
        assert not r.json().get("partialSuccess", {}).get("rejectedSpans")

    def stored() -> bool:
        with engine.connect() as conn:
            n = conn.execute(select(func.count()).select_from(LLMCall)).scalar_one()
        return bool(n - before == len(spans))

    wait_for(stored)


def create(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/api/v1/rollouts", json=body)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


GUARDRAILS = [
    {"name": "ttft_s", "margin": 0.10, "relative": True, "cap": 30.0},
    # Rare-event guardrail: may roll back, but zero events in both arms cannot show
    # non-inferiority, so it does not block promotion (required false).
    {"name": "error_rate", "margin": 0.5, "relative": True, "required": False},
]


def traffic(
    rng: np.random.Generator,
    *,
    rollout: str,
    start_ns: int,
    n_base: int,
    n_cand: int,
    cand_ttft_factor: float,
    base_error: float,
    cand_error: float,
) -> list[dict[str, Any]]:
    """Interleaved baseline/candidate calls 10 ms apart from ``start_ns``; TTFT lognormal."""
    arms = ["base"] * n_base + ["cand"] * n_cand
    rng.shuffle(arms)
    spans = []
    for i, arm in enumerate(arms):
        cand = arm == "cand"
        ttft = float(rng.lognormal(np.log(0.4), 0.2)) * (cand_ttft_factor if cand else 1.0)
        err = bool(rng.random() < (cand_error if cand else base_error))
        spans.append(
            call_span(
                variant=arm,
                rollout=rollout,
                start_ns=start_ns + i * 10_000_000,
                ttft_s=ttft,
                error=err,
            )
        )
    return spans


def _evaluate_at_end(client: TestClient, name: str, spans: Sequence[dict[str, Any]]) -> Any:
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    last = max(int(s["startTimeUnixNano"]) for s in spans)
    now = dt.datetime.fromtimestamp((last + NS) / NS, dt.UTC)
    return evaluate_rollout(engine, get_rollout(engine, "default", name), now=now)


def test_degrading_candidate_is_rolled_back_and_weight_returns_to_0(client: TestClient) -> None:
    created = create(
        client,
        name="support-bot",
        baseline_variant="base",
        candidate_variant="cand",
        steps_pct=[20, 50, 100],
        min_samples_per_step=100,
        min_step_duration_s=0,
        guardrails=GUARDRAILS,
        quality=None,
    )
    assert created["weights"] == {"base": 0.8, "cand": 0.2} and created["version"] == 1
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    start = get_rollout(engine, "default", "support-bot").data_since_unix_nano + NS
    spans = traffic(
        np.random.default_rng(3),
        rollout="support-bot",
        start_ns=start,
        n_base=800,
        n_cand=200,
        cand_ttft_factor=1.5,
        base_error=0.01,
        cand_error=0.15,
    )
    ingest(client, spans)
    outcome = _evaluate_at_end(client, "support-bot", spans)
    assert outcome.decision.action.value == "rollback" and outcome.applied
    failing = {m.name for m in outcome.decision.evidence.metrics if m.status == "fail"}
    assert failing == {"ttft_s", "error_rate"}

    weights = client.get("/api/v1/rollouts/support-bot/weights").json()
    assert weights == {
        "rollout": "support-bot",
        "weights": {"base": 1.0, "cand": 0.0},
        "version": 2,
    }
    view = client.get("/api/v1/rollouts/support-bot").json()
    assert view["status"] == "rolled_back" and view["latest"]["decision"] == "rollback"
    ttft = next(m for m in view["latest"]["evidence"]["metrics"] if m["name"] == "ttft_s")
    assert ttft["status"] == "fail" and ttft["candidate_value"] > 1.3 * ttft["baseline_value"]
    audit = client.get("/api/v1/rollouts/support-bot/decisions").json()["items"]
    assert [a["action"] for a in audit] == ["rollback", "create"]
    assert audit[0]["actor"] == "scheduler" and audit[0]["source"] == "auto"
    assert any("ttft_s" in r for r in audit[0]["reasons"])
    verdict = client.get("/api/v1/rollouts/support-bot/verdict").json()
    assert verdict["pass"] is False and verdict["decision"] == "rollback"
    assert client.post("/api/v1/rollouts/support-bot/verdict", json={}).status_code == 412
    # A finished rollout is not evaluated into anything else.
    again = _evaluate_at_end(client, "support-bot", spans)
    assert not again.applied


def test_equal_candidate_is_promoted_one_step(client: TestClient) -> None:
    create(
        client,
        name="eq",
        baseline_variant="base",
        candidate_variant="cand",
        steps_pct=[20, 50, 100],
        min_samples_per_step=100,
        min_step_duration_s=0,
        guardrails=GUARDRAILS,
        quality=None,
    )
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    start = get_rollout(engine, "default", "eq").data_since_unix_nano + NS
    spans = traffic(
        np.random.default_rng(5),
        rollout="eq",
        start_ns=start,
        n_base=1600,
        n_cand=400,
        cand_ttft_factor=1.0,
        base_error=0.0,
        cand_error=0.0,
    )
    ingest(client, spans)
    outcome = _evaluate_at_end(client, "eq", spans)
    assert outcome.decision.action.value == "promote", outcome.decision.reasons
    weights = client.get("/api/v1/rollouts/eq/weights").json()
    assert weights == {"rollout": "eq", "weights": {"base": 0.5, "cand": 0.5}, "version": 2}
    view = client.get("/api/v1/rollouts/eq").json()
    assert view["status"] == "running" and view["step_index"] == 1
    promotion = client.get("/api/v1/rollouts/eq/verdict", params={"gate": "promotion"}).json()
    assert promotion["pass"] is True and promotion["decision"] == "promote"
    # The new step starts empty: the next look holds for its minimum samples.
    later = evaluate_rollout(
        engine,
        get_rollout(engine, "default", "eq"),
        now=dt.datetime.fromtimestamp(int(spans[-1]["startTimeUnixNano"]) / NS + 2, dt.UTC),
    )
    assert later.decision.action.value in ("hold", "inconclusive")


# ---- case 25 through the stored path -------------------------------------------------------


def _case25_spans(scenario: dict[str, Any], start_ns: int) -> list[dict[str, Any]]:
    """One span per request of each one-minute interval; errors = rint(rate * requests)."""
    spans = []
    for i in range(len(scenario["baseline_requests"])):
        t0 = start_ns + i * 60 * NS
        for arm, rates, requests in (
            ("base", scenario["baseline"], scenario["baseline_requests"]),
            ("cand", scenario["canary"], scenario["canary_requests"]),
        ):
            n = int(requests[i])
            k = int(np.rint((rates[i] or 0.0) * n))  # null with requests > 0: no error seen
            for j in range(n):
                spans.append(
                    call_span(
                        variant=arm,
                        rollout="case25",
                        start_ns=t0 + j * 100_000_000 + (50_000_000 if arm == "cand" else 0),
                        ttft_s=0.3,
                        error=j < k,
                    )
                )
    return spans


@pytest.mark.parametrize(
    ("name", "action", "status", "reason"),
    [
        ("A_baseline_no_errors_canary_errors", "rollback", "rolled_back", "error_rate"),
        ("B_canary_no_traffic", "inconclusive", "paused", "insufficient canary data"),
        ("C_both_empty", "inconclusive", "paused", "insufficient canary data"),
    ],
)
def test_case25_through_the_store(
    client: TestClient, name: str, action: str, status: str, reason: str
) -> None:
    scenario = json.loads((CASES / "25_canary_no_data.json").read_text())["scenarios"][name]
    create(
        client,
        name="case25",
        baseline_variant="base",
        candidate_variant="cand",
        steps_pct=[20, 100],
        min_samples_per_step=50,
        min_step_duration_s=300,
        max_duration_s=3600,
        guardrails=[{"name": "error_rate", "margin": 0.5, "relative": True}],
        quality=None,
    )
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    record = get_rollout(engine, "default", "case25")
    spans = _case25_spans(scenario, record.data_since_unix_nano + NS)
    if spans:
        ingest(client, spans)
    now = dt.datetime.fromtimestamp(record.data_since_unix_nano / NS + 11 * 60, dt.UTC)
    outcome = evaluate_rollout(engine, record, now=now)
    assert outcome.decision.action.value == action and outcome.applied
    assert any(reason in r for r in outcome.decision.reasons)
    view = client.get("/api/v1/rollouts/case25").json()
    assert view["status"] == status
    (metric,) = view["latest"]["evidence"]["metrics"]
    if name.startswith("A"):
        assert metric["status"] == "fail" and metric["baseline_value"] == 0.0
        assert metric["candidate_value"] == pytest.approx(0.04, abs=0.005)
        assert metric["mann_whitney_pvalue"] == pytest.approx(0.003, abs=0.0005)
        assert view["weights"] == {"base": 1.0, "cand": 0.0}
    else:
        assert metric["status"] == "no_data"  # never a zero, never promote
        assert view["weights"] == {"base": 0.8, "cand": 0.2}  # paused for a human
        assert (
            client.get("/api/v1/rollouts/case25/verdict", params={"gate": "promotion"}).json()[
                "pass"
            ]
            is False
        )


def test_scheduled_job_survives_a_bad_rollout(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("good", "broken"):
        create(
            client,
            name=name,
            baseline_variant="base",
            candidate_variant="cand",
            min_step_duration_s=0,
            guardrails=[{"name": "ttft_s", "margin": 0.1, "relative": True}],
            quality=None,
        )
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    stored = client.get("/api/v1/rollouts/broken").json()["policy"]
    stored["metrics"][0]["name"] = "p99_vibes"  # a policy the store cannot measure
    with engine.begin() as conn:
        conn.execute(update(Rollout).where(Rollout.name == "broken").values(policy=stored))

    monkeypatch.setenv("DRIFTLINE_CANARY_INTERVAL_S", "7")
    (job,) = jobs(client.app.state.driftline.settings)  # type: ignore[attr-defined]
    assert job.name == "canary-evaluate" and job.interval_s == 7.0
    job.fn(JobContext(None, engine, CollectorRegistry()))
    good = client.get("/api/v1/rollouts/good").json()
    # no call stored yet: its calls may be in flight, so it holds (issue 17), never pauses
    assert good["latest"]["decision"] == "hold" and good["status"] == "running"
    assert client.get("/api/v1/rollouts/broken").json()["latest"]["decision"] is None
    monkeypatch.setenv("DRIFTLINE_CANARY_ENABLED", "false")
    assert jobs(None) == []
