"""The rollouts REST API: validation, roles, overrides with audit, verdict gates, and the
``driftline canary status|evaluate|pause|resume|abort`` commands against a live collector."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from collector.auth import create_key
from drift.canary.cli import canary
from driftline.app import create_app
from tests.conftest import LiveCollector, make_settings

BODY: dict[str, Any] = {
    "name": "bot",
    "baseline_variant": "base",
    "candidate_variant": "lora-a",
    "steps_pct": [10, 50, 100],
    "min_samples_per_step": 50,
    "min_step_duration_s": 0,
}


def test_create_defaults_list_and_read(client: TestClient) -> None:
    r = client.post("/api/v1/rollouts", json=BODY)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["status"] == "running" and created["step_index"] == 0
    assert created["weights"] == {"base": 0.9, "lora-a": 0.1}
    names = [m["name"] for m in created["policy"]["metrics"]]
    assert names[-1] == "judge_score" and "ttft_s" in names  # default guardrails + quality
    judge = created["policy"]["metrics"][-1]
    assert judge["role"] == "quality" and judge["direction"] == "decrease_is_bad"
    items = client.get("/api/v1/rollouts").json()
    assert [i["name"] for i in items["items"]] == ["bot"] and items["next_cursor"] is None
    assert client.get("/api/v1/rollouts", params={"status": "paused"}).json()["items"] == []
    view = client.get("/api/v1/rollouts/bot").json()
    assert view["latest"] == {
        "evaluated_at": None,
        "decision": None,
        "reasons": [],
        "evidence": None,
    }
    assert client.post("/api/v1/rollouts", json=BODY).status_code == 409  # exists


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"steps_pct": [50, 20, 100]}, "steps_pct"),
        ({"candidate_variant": "base"}, "candidate_variant"),
        ({"name": "a/b"}, "name"),
        ({"guardrails": [{"name": "p99_vibes", "margin": 0.1}]}, "p99_vibes"),
        ({"guardrails": [{"name": "error_rate", "margin": 0.5}]}, "relative"),
        ({"guardrails": [{"name": "ttft_s", "margin": 0.1, "kind": "proportion"}]}, "kind"),
        ({"alpha": 2}, "alpha"),
        ({"min_samples_per_step": "x"}, "min_samples_per_step"),
    ],
)
def test_invalid_rollouts_are_400_naming_the_field(
    client: TestClient, change: dict[str, Any], needle: str
) -> None:
    r = client.post("/api/v1/rollouts", json={**BODY, **change})
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_unknown_rollout_is_404(client: TestClient) -> None:
    for path in ("", "/weights", "/verdict", "/decisions"):
        r = client.get(f"/api/v1/rollouts/nope{path}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_overrides_are_audited_and_move_weights(client: TestClient) -> None:
    client.post("/api/v1/rollouts", json=BODY)

    def override(action: str, reason: str = "on-call decision") -> Any:
        return client.post(
            "/api/v1/rollouts/bot/override", json={"action": action, "reason": reason}
        )

    assert override("resume").status_code == 409  # not paused
    assert override("pause", "").status_code == 400  # a reason is required
    paused = override("pause").json()["rollout"]
    assert paused["status"] == "paused" and paused["version"] == 2
    assert paused["weights"] == {"base": 0.9, "lora-a": 0.1}  # pause keeps the split
    assert override("resume").json()["rollout"]["status"] == "running"
    promoted = override("promote", "judge review looked fine").json()["rollout"]
    assert (promoted["step_index"], promoted["candidate_weight_pct"]) == (1, 50.0)
    w = client.get("/api/v1/rollouts/bot/weights").json()
    assert w == {"rollout": "bot", "weights": {"base": 0.5, "lora-a": 0.5}, "version": 4}
    aborted = override("abort", "pager went off").json()["rollout"]
    assert aborted["status"] == "aborted" and aborted["weights"] == {"base": 1.0, "lora-a": 0.0}
    assert override("resume").status_code == 409  # finished
    audit = client.get("/api/v1/rollouts/bot/decisions").json()["items"]
    assert [a["action"] for a in audit] == ["abort", "promote", "resume", "pause", "create"]
    assert audit[0]["reasons"] == ["manual abort: pager went off"]
    assert audit[0]["source"] == "manual" and audit[0]["actor"] == "dev:default"
    assert (audit[1]["candidate_weight_pct_before"], audit[1]["candidate_weight_pct_after"]) == (
        10.0,
        50.0,
    )
    verdict = client.get("/api/v1/rollouts/bot/verdict").json()
    assert verdict["pass"] is False and verdict["status"] == "aborted"


def test_verdict_without_data_holds_and_never_passes_promotion(client: TestClient) -> None:
    assert client.post("/api/v1/rollouts", json={**BODY, "name": "early"}).status_code == 201
    r = client.post("/api/v1/rollouts/early/evaluate")
    assert r.status_code == 200, r.text
    held = r.json()
    assert held["decision"] == "hold"  # no call stored yet: they may be in flight (issue 17)
    assert any("in flight" in x for x in held["reasons"])
    assert held["rollout"]["status"] == "running"
    body = {**BODY, "no_traffic_pause_s": 0}
    assert client.post("/api/v1/rollouts", json=body).status_code == 201
    r = client.post("/api/v1/rollouts/bot/evaluate")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["decision"] == "inconclusive"  # min step time and no-traffic wait 0 passed
    assert any("insufficient canary data" in x for x in body["reasons"])
    assert body["rollout"]["status"] == "paused"
    guard = client.get("/api/v1/rollouts/bot/verdict").json()
    assert guard["pass"] is True and guard["decision"] == "inconclusive"  # no measured harm
    promo = client.get("/api/v1/rollouts/bot/verdict", params={"gate": "promotion"})
    assert promo.status_code == 200 and promo.json()["pass"] is False
    flagger = client.post(
        "/api/v1/rollouts/bot/verdict",
        params={"gate": "promotion"},
        json={"name": "bot", "namespace": "prod", "phase": "Progressing"},
    )
    assert flagger.status_code == 412 and flagger.json()["pass"] is False
    assert client.post("/api/v1/rollouts/bot/verdict", json={}).status_code == 200
    assert client.get("/api/v1/rollouts/bot/verdict", params={"gate": "x"}).status_code == 400


@pytest.fixture
def keyed(db_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A collector with authentication and one key per role."""
    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        engine = c.app.state.driftline.engine  # type: ignore[attr-defined]
        keys = {role: create_key(engine, "acme", role) for role in ("ingest", "read", "admin")}
        keys["other"] = create_key(engine, "globex", "admin")
        yield c, keys


def test_roles(keyed: tuple[TestClient, dict[str, str]]) -> None:
    c, keys = keyed

    def h(role: str) -> dict[str, str]:
        return {"authorization": f"Bearer {keys[role]}"}

    assert c.post("/api/v1/rollouts", json=BODY, headers=h("read")).status_code == 403
    assert c.post("/api/v1/rollouts", json=BODY, headers=h("admin")).status_code == 201
    assert c.get("/api/v1/rollouts/bot/weights").status_code == 401
    for role in ("ingest", "read", "admin"):  # the gateway holds an ingest key
        w = c.get("/api/v1/rollouts/bot/weights", headers=h(role))
        assert w.status_code == 200 and w.json()["weights"]["lora-a"] == 0.1
    assert c.get("/api/v1/rollouts/bot", headers=h("ingest")).status_code == 403
    assert c.get("/api/v1/rollouts/bot/verdict", headers=h("read")).status_code == 200
    override = {"action": "pause", "reason": "x"}
    assert (
        c.post("/api/v1/rollouts/bot/override", json=override, headers=h("read")).status_code == 403
    )
    assert c.post("/api/v1/rollouts/bot/evaluate", headers=h("ingest")).status_code == 403
    # Tenants are isolated: another tenant's admin sees no such rollout.
    assert c.get("/api/v1/rollouts/bot/weights", headers=h("other")).status_code == 404
    r = c.post("/api/v1/rollouts/bot/override", json=override, headers=h("admin"))
    assert r.status_code == 200
    actor = c.get("/api/v1/rollouts/bot/decisions", headers=h("read")).json()["items"][0]["actor"]
    assert actor.startswith("api-key:") and actor[len("api-key:") :] in keys["admin"]


def test_cli_against_a_live_collector(live_collector: LiveCollector) -> None:
    url = ["--collector-url", live_collector.http_url]
    runner = CliRunner()
    assert httpx.post(f"{live_collector.http_url}/api/v1/rollouts", json=BODY).status_code == 201
    out = runner.invoke(canary, ["status", *url])
    assert out.exit_code == 0, out.output
    assert "bot: running step 1/3 lora-a=10% base=90% v1" in out.output
    out = runner.invoke(canary, ["evaluate", "bot", "--dry-run", *url])
    assert out.exit_code == 0 and "applied=false" in out.output
    assert "insufficient canary data" in out.output
    out = runner.invoke(canary, ["pause", "bot", "--reason", "maintenance", *url])
    assert out.exit_code == 0 and "bot: paused" in out.output
    out = runner.invoke(canary, ["resume", "bot", "--reason", "done", *url])
    assert out.exit_code == 0 and "bot: running" in out.output
    out = runner.invoke(canary, ["abort", "bot", "--reason", "bad outputs", *url])
    assert out.exit_code == 0 and "bot: aborted" in out.output and "lora-a=0%" in out.output
    out = runner.invoke(canary, ["status", "bot", "--json", *url])
    assert out.exit_code == 0 and '"status": "aborted"' in out.output
    out = runner.invoke(canary, ["pause", "bot", "--reason", "x", *url])
    assert out.exit_code == 1 and "HTTP 409" in out.output and "aborted" in out.output
    out = runner.invoke(canary, ["status", "nope", *url])
    assert out.exit_code == 1 and "HTTP 404" in out.output
