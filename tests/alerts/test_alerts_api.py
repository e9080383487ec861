"""The alerts REST API on SQLite and PostgreSQL: rules, receivers (secrets write-only, rotation),
silences, alerts + acknowledgement, deliveries; roles and tenant isolation with real API keys."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from alerts import admin, outbox, store
from alerts.evaluate import evaluate_rules
from alerts.receivers import Receiver, StaticReceivers
from alerts.rules import Grouping, Sample, Series, ThresholdRule
from alerts.signing import secret_key
from collector.auth import create_key
from collector.errors import NotFoundError
from driftline.app import create_app
from tests.alerts.conftest import LOOPBACK_ALLOW
from tests.conftest import make_settings

RULE: dict[str, Any] = {
    "kind": "threshold",
    "name": "ttft_p99_high",
    "stat": "ttft_s",
    "quantile": 0.99,
    "threshold": 2.0,
    "resolve_threshold": 1.5,
    "window_s": 300,
    "receivers": ["oncall"],
    "filters": {"service_name": "chat-api"},
}


@pytest.fixture
def api(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The collector in --dev mode (tenant ``default``), alert jobs off: the test drives state."""
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    settings = make_settings(db_url, grpc_enabled=False, egress_allow=LOOPBACK_ALLOW)
    with TestClient(create_app(settings)) as c:
        yield c


def _engine(c: TestClient) -> Engine:
    e: Engine = c.app.state.driftline.engine  # type: ignore[attr-defined]
    return e


def _fire(engine: Engine, tenant: str, model: str, now: float) -> str:
    """Drive one rule of ``tenant`` to firing through the evaluator; returns the fingerprint."""
    rule = ThresholdRule(
        name="ttft_p99_high",
        stat="ttft_s",
        quantile=0.99,
        threshold=2.0,
        receivers=("oncall",),
        grouping=Grouping(group_by=("alertname", "model"), group_wait_s=0, group_interval_s=60),
    )
    rcv = StaticReceivers(
        [Receiver(name="oncall", tenant=tenant, kind="alertmanager", url="http://127.0.0.1:9/x")]
    )
    with Session(engine) as s, s.begin():
        r = evaluate_rules(
            s,
            tenant,
            [rule],
            now=now,
            receivers=rcv,
            series={rule.name: [Series({"model": model}, (Sample(now, 3.0),))]},
        )
    assert len(r.notifications) == 1
    (fp,) = [a.fingerprint for a in r.alerts if a.labels["model"] == model]
    return fp


def test_rules_crud_and_validation(api: TestClient) -> None:
    r = api.post("/api/v1/alerts/rules", json=RULE)
    assert r.status_code == 201, r.text
    assert r.json()["enabled"] is True and r.json()["threshold"] == 2.0
    assert api.post("/api/v1/alerts/rules", json=RULE).status_code == 409  # exists
    items = api.get("/api/v1/alerts/rules").json()["items"]
    assert [i["name"] for i in items] == ["ttft_p99_high"]
    r = api.put(
        "/api/v1/alerts/rules/ttft_p99_high", json={**RULE, "threshold": 3.0, "enabled": False}
    )
    assert r.status_code == 200 and r.json()["threshold"] == 3.0 and r.json()["enabled"] is False
    assert api.get("/api/v1/alerts/rules/ttft_p99_high").json()["threshold"] == 3.0
    bad = api.post("/api/v1/alerts/rules", json={**RULE, "name": "x", "resolve_threshold": 9.0})
    assert bad.status_code == 400 and "resolve_threshold" in bad.json()["error"]["message"]
    bad = api.post("/api/v1/alerts/rules", json={**RULE, "name": "y", "filters": {"colour": "red"}})
    assert bad.status_code == 400 and "filters" in bad.json()["error"]["message"]
    bad = api.post("/api/v1/alerts/rules", json={**RULE, "name": "z", "stat": "vibes"})
    assert bad.status_code == 400
    assert api.delete("/api/v1/alerts/rules/ttft_p99_high").status_code == 204
    r = api.get("/api/v1/alerts/rules/ttft_p99_high")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_receiver_secret_is_returned_once_and_rotates(api: TestClient) -> None:
    body = {
        "name": "oncall",
        "kind": "alertmanager",
        "url": "http://127.0.0.1:9/hook",
        "headers": {"authorization": "Bearer hunter2"},
    }
    r = api.post("/api/v1/alerts/receivers", json=body)
    assert r.status_code == 201, r.text
    first = r.json()["secret"]
    assert len(secret_key(first)) == 32
    for resp in (api.get("/api/v1/alerts/receivers"), api.get("/api/v1/alerts/receivers/oncall")):
        assert resp.status_code == 200
        assert first not in resp.text and "whsec_" not in resp.text and "hunter2" not in resp.text
    assert api.get("/api/v1/alerts/receivers/oncall").json()["header_names"] == ["authorization"]
    assert api.post("/api/v1/alerts/receivers", json=body).status_code == 409  # exists
    r = api.post("/api/v1/alerts/receivers/oncall/rotate-secret", json={"grace_s": 600})
    assert r.status_code == 200
    second = r.json()["secret"]
    assert second != first and second.startswith("whsec_")
    with Session(_engine(api)) as s:
        rcv = admin.db_receiver(s, "default", "oncall")
    now = time.time()
    assert rcv.signing_secrets(now) == [second, first]  # both sign during the grace period
    assert rcv.signing_secrets(now + 601) == [second]
    # PUT changes the URL and keeps the secret.
    r = api.put("/api/v1/alerts/receivers/oncall", json={**body, "url": "http://127.0.0.1:9/new"})
    assert r.status_code == 200 and r.json()["signed"] is True and "secret" not in r.json()
    with Session(_engine(api)) as s:
        rcv = admin.db_receiver(s, "default", "oncall")
    assert rcv.url.endswith("/new") and rcv.secret is not None
    assert rcv.secret.get_secret_value() == second
    # An invalid secret is refused without echoing it.
    r = api.post(
        "/api/v1/alerts/receivers", json={**body, "name": "b", "secret": "whsec_@@@sneaky"}
    )
    assert r.status_code == 400 and "sneaky" not in r.text
    r = api.post(
        "/api/v1/alerts/receivers",
        json={"name": "pd", "kind": "pagerduty", "url": "http://127.0.0.1:9/"},
    )
    assert r.status_code == 400 and "routing_key" in r.json()["error"]["message"]
    assert api.delete("/api/v1/alerts/receivers/oncall").status_code == 204
    assert api.get("/api/v1/alerts/receivers/oncall").status_code == 404
    assert api.post("/api/v1/alerts/receivers/oncall/rotate-secret").status_code == 404


def test_silences_create_list_expire(api: TestClient) -> None:
    r = api.post(
        "/api/v1/alerts/silences",
        json={
            "matchers": [{"name": "model", "value": "gpt-4.*", "op": "=~"}],
            "duration_s": 3600,
            "comment": "deploy",
            "created_by": "bob",
        },
    )
    assert r.status_code == 201, r.text
    sil = r.json()
    assert sil["state"] == "active" and sil["id"].startswith("sil_")
    assert [x["id"] for x in api.get("/api/v1/alerts/silences").json()["items"]] == [sil["id"]]
    r = api.delete(f"/api/v1/alerts/silences/{sil['id']}")
    assert r.status_code == 200 and r.json()["state"] == "expired"
    assert api.get("/api/v1/alerts/silences").json()["items"] == []
    expired = api.get("/api/v1/alerts/silences", params={"state": "expired"}).json()["items"]
    assert [x["id"] for x in expired] == [sil["id"]]
    for bad in (
        {"matchers": [], "duration_s": 60},
        {"matchers": [{"name": "a", "value": "(", "op": "=~"}], "duration_s": 60},
        {"matchers": [{"name": "a", "value": "b"}]},
        {
            "matchers": [{"name": "a", "value": "b"}],
            "duration_s": 60,
            "ends_at": "2030-01-01T00:00:00Z",
        },
        {"matchers": [{"name": "a", "value": "b"}], "ends_at": "yesterday"},
    ):
        assert api.post("/api/v1/alerts/silences", json=bad).status_code == 400, bad
    assert api.delete("/api/v1/alerts/silences/sil_nope").status_code == 404


def test_alerts_list_filters_ack_and_deliveries(api: TestClient) -> None:
    engine = _engine(api)
    now = time.time()
    fp_a = _fire(engine, "default", "gpt-4o", now)
    fp_b = _fire(engine, "default", "llama", now + 1)
    r = api.get("/api/v1/alerts", params={"status": "firing"})
    assert {a["fingerprint"] for a in r.json()["items"]} == {fp_a, fp_b}
    r = api.get("/api/v1/alerts", params={"label": "model=llama"})
    assert [a["fingerprint"] for a in r.json()["items"]] == [fp_b]
    page1 = api.get("/api/v1/alerts", params={"limit": 1}).json()
    page2 = api.get("/api/v1/alerts", params={"limit": 1, "cursor": page1["next_cursor"]}).json()
    assert {page1["items"][0]["fingerprint"], page2["items"][0]["fingerprint"]} == {fp_a, fp_b}
    assert page2["next_cursor"] is None
    assert api.get("/api/v1/alerts", params={"status": "resolved"}).json()["items"] == []
    assert api.get("/api/v1/alerts", params={"label": "nolabel"}).status_code == 400
    r = api.post(f"/api/v1/alerts/{fp_a}/ack", json={"by": "alice"})
    assert r.status_code == 200 and r.json()["acked_by"] == "alice"
    assert api.get(f"/api/v1/alerts/{fp_a}").json()["acked_at"] is not None
    assert api.post("/api/v1/alerts/0000/ack").status_code == 404
    deliveries = api.get("/api/v1/alerts/deliveries").json()["items"]
    assert len(deliveries) == 2 and {d["status"] for d in deliveries} == {"pending"}
    assert all(d["receiver"] == "oncall" and d["seq"] == 1 for d in deliveries)
    one = api.get("/api/v1/alerts/deliveries", params={"limit": 1}).json()
    assert len(one["items"]) == 1 and one["next_cursor"] == "1"
    nid = deliveries[0]["id"]
    assert api.post(f"/api/v1/alerts/deliveries/{nid}/redeliver").status_code == 400  # not failed
    outbox.mark_failed(engine, outbox.get(engine, "default", nid), now=now, reason="permanent")
    r = api.post(f"/api/v1/alerts/deliveries/{nid}/redeliver")
    assert r.status_code == 200 and r.json()["status"] == "pending"


def test_query_layer_isolates_tenants(api: TestClient) -> None:
    engine = _engine(api)
    now = time.time()
    mine = _fire(engine, "default", "gpt-4o", now)
    theirs = _fire(engine, "acme", "gpt-4o", now)
    with Session(engine) as s, s.begin():
        store.save_rule(
            s,
            "acme",
            ThresholdRule(name="r", stat="e2e_s", threshold=1, receivers=("x",)),
            enabled=True,
            now=now,
        )
        store.save_receiver(
            s, Receiver(name="acme-hook", tenant="acme", url="http://127.0.0.1:9/"), now=now
        )
    with Session(engine) as s:
        assert [a.fingerprint for a in admin.list_alerts(s, "default")[0]] == [mine]
        assert [a.fingerprint for a in admin.list_alerts(s, "acme")[0]] == [theirs]
        assert admin.list_rules(s, "default") == []
        with pytest.raises(NotFoundError):
            admin.db_receiver(s, "default", "acme-hook")
        if mine != theirs:
            with pytest.raises(NotFoundError):
                admin.get_alert(s, "default", theirs)
    assert [i.tenant for i in outbox.list_items(engine, "acme")] == ["acme"]
    # Through the API (dev mode = tenant default) nothing of acme shows.
    assert [a["fingerprint"] for a in api.get("/api/v1/alerts").json()["items"]] == [mine]
    assert api.get("/api/v1/alerts/rules").json()["items"] == []
    assert api.get("/api/v1/alerts/receivers/acme-hook").status_code == 404
    assert len(api.get("/api/v1/alerts/deliveries").json()["items"]) == 1


def test_roles_and_tenants_with_api_keys(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    settings = make_settings(db_url, dev=False, grpc_enabled=False, egress_allow=LOOPBACK_ALLOW)
    with TestClient(create_app(settings)) as c:
        engine = _engine(c)
        admin_a = {"authorization": "Bearer " + create_key(engine, "team-a", "admin")}
        read_a = {"authorization": "Bearer " + create_key(engine, "team-a", "read")}
        admin_b = {"authorization": "Bearer " + create_key(engine, "team-b", "admin")}
        assert c.get("/api/v1/alerts").status_code == 401
        assert c.post("/api/v1/alerts/rules", json=RULE, headers=read_a).status_code == 403
        assert c.post("/api/v1/alerts/rules", json=RULE, headers=admin_a).status_code == 201
        assert [
            r["name"] for r in c.get("/api/v1/alerts/rules", headers=read_a).json()["items"]
        ] == ["ttft_p99_high"]
        assert c.get("/api/v1/alerts/rules", headers=admin_b).json()["items"] == []
        assert c.get("/api/v1/alerts/rules/ttft_p99_high", headers=admin_b).status_code == 404
        fp = _fire(engine, "team-a", "gpt-4o", time.time())
        assert [
            a["fingerprint"] for a in c.get("/api/v1/alerts", headers=read_a).json()["items"]
        ] == [fp]
        assert c.get("/api/v1/alerts", headers=admin_b).json()["items"] == []
        assert c.post(f"/api/v1/alerts/{fp}/ack", headers=admin_b).status_code == 404
        assert c.post(f"/api/v1/alerts/{fp}/ack", headers=read_a).status_code == 403
        assert c.post(f"/api/v1/alerts/{fp}/ack", headers=admin_a).status_code == 200
