"""``/metrics`` on a keyed collector: no tenant's data without its key.

Scraped without a key it shows process and ingest-health metrics only: no ``tenant``,
``model`` or cost label anywhere. A read key sees its own tenant's KPI series (no ``tenant``
label), and so does a tenant's admin key; a platform-admin key sees every tenant's (with it),
a bad key gets 401.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from collector.auth import create_key
from collector.store import engine as store_engine
from driftline.app import create_app
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import make_settings

SECRET = "acme-secret-model-gpt-4o"


@pytest.fixture
def keyed(sqlite_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    store_engine.upgrade(sqlite_url)
    eng = store_engine.make_engine(sqlite_url)
    keys = {
        "acme_ingest": create_key(eng, "acme", "ingest"),
        "acme_read": create_key(eng, "acme", "read"),
        "globex_ingest": create_key(eng, "globex", "ingest"),
        "globex_admin": create_key(eng, "globex", "admin"),
        "globex_platform": create_key(eng, "globex", "platform-admin"),
    }
    eng.dispose()
    with TestClient(create_app(make_settings(sqlite_url, dev=False, grpc_enabled=False))) as c:
        for key, body in (
            ("acme_ingest", pb_request(3, trace_byte=1, model=SECRET)),
            ("acme_ingest", pb_request(2, trace_byte=2, model="gpt-4o")),  # priced: cost > 0
            ("globex_ingest", pb_request(4, trace_byte=3, model="globex-model")),
        ):
            r = c.post("/v1/traces", content=body, headers={**PB, **auth(keys[key])})
            assert r.status_code == 200, r.text
        yield c, keys


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def scrape(client: TestClient, headers: dict[str, str] | None = None) -> list[Any]:
    r = client.get("/metrics", headers=headers or {})
    assert r.status_code == 200, r.text
    return [s for fam in text_string_to_metric_families(r.text) for s in fam.samples]


def test_anonymous_scrape_shows_no_tenant_model_or_cost(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    client, _ = keyed
    text = client.get("/metrics").text
    samples = scrape(client)
    labels = {k for s in samples for k in s.labels}
    assert not labels & {"tenant", "model", "variant"}
    assert not [s for s in samples if "cost" in s.name or "tokens" in s.name]
    assert "acme" not in text and "globex" not in text and SECRET not in text
    # ingest health and process metrics are still there
    received = [s for s in samples if s.name == "driftline_spans_received_total"]
    assert received and sum(s.value for s in received) == 9
    assert any(s.name.startswith(("process_", "python_gc_")) for s in samples)


def test_ingest_key_gets_the_anonymous_view_and_bad_key_401(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    client, keys = keyed
    assert SECRET not in client.get("/metrics", headers=auth(keys["acme_ingest"])).text
    assert client.get("/metrics", headers=auth("dl_000000000000_nope")).status_code == 401


def test_read_key_sees_its_own_kpis_without_tenant_label(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    client, keys = keyed
    samples = scrape(client, auth(keys["acme_read"]))
    kpi = [s for s in samples if s.name.startswith(("driftline_e2e", "driftline_cost"))]
    assert kpi and all("tenant" not in s.labels for s in samples)
    assert {s.labels["model"] for s in kpi} == {SECRET, "gpt-4o"}
    count = [s for s in kpi if s.name == "driftline_e2e_seconds_count"]
    assert sum(s.value for s in count) == 5
    cost = [s for s in kpi if s.name == "driftline_cost_usd_total"]
    assert cost and cost[0].value > 0


def test_tenant_admin_key_sees_only_its_own_tenant(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    client, keys = keyed
    samples = scrape(client, auth(keys["globex_admin"]))
    kpi = [s for s in samples if s.name == "driftline_e2e_seconds_count"]
    assert kpi and all("tenant" not in s.labels for s in samples)
    assert {s.labels["model"] for s in kpi} == {"globex-model"}
    assert SECRET not in client.get("/metrics", headers=auth(keys["globex_admin"])).text


def test_platform_admin_key_sees_every_tenant_labelled(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    client, keys = keyed
    samples = scrape(client, auth(keys["globex_platform"]))
    counts = {
        (s.labels["tenant"], s.labels["model"]): s.value
        for s in samples
        if s.name == "driftline_e2e_seconds_count"
    }
    assert counts == {("acme", SECRET): 3, ("acme", "gpt-4o"): 2, ("globex", "globex-model"): 4}
