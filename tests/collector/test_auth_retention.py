"""API keys and tenant isolation on every read route; roles; retention."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from typing import Any, get_args

import grpc
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from collector.auth import KeyStore, create_key
from collector.store import engine as store_engine
from collector.store.retention import apply_retention
from driftline.api.deps import (
    AdminTenant,
    CurrentPrincipal,
    IngestTenant,
    ReadTenant,
    ReviewTenant,
    State,
)
from driftline.api.params import reject_unknown_params
from driftline.api.rollouts import weights_tenant
from driftline.app import create_app
from driftline.cli import cli
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import LiveCollector, free_port, make_settings


@pytest.fixture
def keyed(db_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    store_engine.upgrade(db_url)
    eng = store_engine.make_engine(db_url)
    keys = {
        "a_ingest": create_key(eng, "acme", "ingest"),
        "a_read": create_key(eng, "acme", "read"),
        "b_ingest": create_key(eng, "globex", "ingest"),
        "b_read": create_key(eng, "globex", "read"),
        "b_admin": create_key(eng, "globex", "admin"),
    }
    eng.dispose()
    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        yield c, keys


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_keys_decide_the_tenant_and_isolate_every_read_route(
    keyed: tuple[TestClient, dict[str, str]],
) -> None:
    c, k = keyed
    assert (
        c.post(
            "/v1/traces", content=pb_request(3, trace_byte=1), headers={**PB, **auth(k["a_ingest"])}
        ).status_code
        == 200
    )
    assert (
        c.post(
            "/v1/traces", content=pb_request(2, trace_byte=2), headers={**PB, **auth(k["b_ingest"])}
        ).status_code
        == 200
    )
    a_calls = c.get("/api/v1/calls", headers=auth(k["a_read"])).json()["items"]
    b_calls = c.get("/api/v1/calls", headers=auth(k["b_read"])).json()["items"]
    assert len(a_calls) == 3 and {x["tenant"] for x in a_calls} == {"acme"}
    assert len(b_calls) == 2 and {x["tenant"] for x in b_calls} == {"globex"}
    a_call = a_calls[0]
    # every read route: tenant B's key cannot see tenant A's resources
    routes: list[tuple[str, dict[str, Any]]] = [
        (f"/api/v1/calls/{a_call['call_id']}", {}),
        (f"/api/v1/calls/{a_call['trace_id']}:{a_call['span_id']}", {}),
        ("/api/v1/calls", {"trace_id": a_call["trace_id"]}),
        ("/api/v1/feedback", {"trace_id": a_call["trace_id"]}),
        ("/api/v1/feedback/summary", {"trace_id": a_call["trace_id"]}),
    ]
    for path, params in routes:
        r = c.get(path, params=params, headers=auth(k["b_read"]))
        assert r.status_code in (403, 404) or (
            r.status_code == 200
            and not r.json().get("items")
            and not r.json().get("thumbs_up")
            and not r.json().get("thumbs_down")
        ), (path, r.status_code, r.text)
    # feedback from tenant B on tenant A's trace stays in tenant B (pending there)
    r = c.post(
        "/api/v1/feedback",
        json={"trace_id": a_call["trace_id"], "kind": "thumbs_down"},
        headers=auth(k["b_ingest"]),
    )
    assert r.status_code == 202 and r.json()["status"] == "pending"
    assert c.get("/api/v1/feedback", headers=auth(k["a_read"])).json()["items"] == []


def test_roles_and_bad_keys(keyed: tuple[TestClient, dict[str, str]]) -> None:
    c, k = keyed
    assert c.get("/api/v1/calls").status_code == 401
    assert c.get("/api/v1/calls", headers=auth("dl_nope_nope")).status_code == 401
    assert c.get("/api/v1/calls", headers={"Authorization": "Basic abc"}).status_code == 401
    r = c.get("/api/v1/calls", headers=auth(k["a_ingest"]))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = c.post("/v1/traces", content=pb_request(1), headers={**PB, **auth(k["a_read"])})
    assert r.status_code == 403
    assert c.get("/api/v1/calls", headers=auth(k["b_admin"])).status_code == 200
    r = c.post("/v1/traces", content=pb_request(1), headers=PB)
    assert r.status_code == 401


def test_grpc_requires_a_key(db_url: str) -> None:
    store_engine.upgrade(db_url)
    eng = store_engine.make_engine(db_url)
    key = create_key(eng, "acme", "ingest")
    eng.dispose()
    lc = LiveCollector(make_settings(db_url, dev=False, http_port=free_port())).start()
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        req = ExportTraceServiceRequest.FromString(pb_request(2))
        with grpc.insecure_channel(lc.grpc_endpoint) as ch:
            stub = trace_service_pb2_grpc.TraceServiceStub(ch)
            with pytest.raises(grpc.RpcError) as err:
                stub.Export(req, timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            resp = stub.Export(req, timeout=10, metadata=[("authorization", f"Bearer {key}")])
            assert isinstance(resp, trace_service_pb2.ExportTraceServiceResponse)
    finally:
        lc.stop()


def test_dev_mode_refuses_non_loopback(sqlite_url: str) -> None:
    from collector.errors import ConfigError

    with pytest.raises(ConfigError, match="DRIFTLINE_HOST"):
        create_app(make_settings(sqlite_url, host="0.0.0.0"))


def test_keys_cli_and_retention(db_url: str) -> None:
    runner = CliRunner()
    env = {"DRIFTLINE_DATABASE_URL": db_url}
    out = runner.invoke(cli, ["keys", "create", "--tenant", "acme", "--role", "read"], env=env)
    assert out.exit_code == 0, out.output
    key = out.stdout.strip().splitlines()[0]
    assert key.startswith("dl_")
    out = runner.invoke(cli, ["tenants", "set", "acme", "--retention-days", "1"], env=env)
    assert out.exit_code == 0, out.output
    bad = runner.invoke(cli, ["keys", "create", "--tenant", "acme", "--role", "root"], env=env)
    assert bad.exit_code == 2

    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        assert c.get("/api/v1/calls", headers=auth(key)).status_code == 200
    eng = store_engine.make_engine(db_url)
    ingest = create_key(eng, "acme", "ingest")
    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        # pb_request spans start on 2024-04-25: far older than one day
        assert (
            c.post("/v1/traces", content=pb_request(4), headers={**PB, **auth(ingest)}).status_code
            == 200
        )
        assert len(c.get("/api/v1/calls", headers=auth(key)).json()["items"]) == 4
    counts = apply_retention(eng, batch_size=3, now_ns=time.time_ns())
    assert counts["acme"]["llm_calls"] == 4 and counts["acme"]["spans"] == 4
    assert apply_retention(eng)["acme"]["llm_calls"] == 0
    revoke = runner.invoke(cli, ["keys", "revoke", key.split("_")[1]], env=env)
    assert revoke.exit_code == 0, revoke.output
    eng.dispose()


def test_a_key_the_cache_knows_is_resolved_on_the_event_loop(db_url: str) -> None:
    """The route dependencies are coroutines (FastAPI runs a plain ``def`` one in its thread
    pool: two thread hand-offs per OTLP export); only a key the cache does not know yet is
    looked up in the store, in a thread."""
    store_engine.upgrade(db_url)
    eng = store_engine.make_engine(db_url)
    try:
        key = create_key(eng, "acme", "ingest")
        keys = KeyStore(eng)
        for header in (None, "", "Basic abc", "Bearer", f"Bearer {key}"):
            assert keys.cached(header) is None, header  # never verified: the store decides
        principal = keys.verify(f"Bearer {key}")
        assert principal.tenant == "acme"
        assert keys.cached(f"Bearer {key}") == principal
        assert keys.cached(f"bearer  {key} ") == principal
        assert keys.cached(f"Bearer {key}x") is None
    finally:
        eng.dispose()
    annotated = (State, CurrentPrincipal, ReadTenant, IngestTenant, ReviewTenant, AdminTenant)
    deps = [get_args(a)[1].dependency for a in annotated]
    for dep in [*deps, reject_unknown_params, weights_tenant]:
        assert inspect.iscoroutinefunction(dep), dep
