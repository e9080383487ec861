"""``/api/v1/stats`` and ``collector.store.analytics`` against numpy on known data, SQLite and
PostgreSQL. Calls arrive through ``/v1/traces`` (OTLP JSON); feedback rows through SQLAlchemy
Core (the test is about the vote query, not the feedback API)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert

from collector.auth import create_key
from collector.store import analytics
from collector.store.callstats import LATENCY_FIELDS
from collector.store.models.api import EngineSample, Feedback
from driftline.app import create_app
from tests.conftest import make_settings

T0 = 1_714_000_000 * 10**9 - (1_714_000_000 * 10**9) % (3600 * 10**9)  # an hour boundary
PRICES = {"gpt-4o": (2.5e-6, 10e-6), "gpt-4o-mini": (0.15e-6, 0.6e-6)}  # case 00, USD/token
JSON_CT = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Call:
    trace_id: str
    span_id: str
    model: str
    variant: str
    start_ns: int
    end_ns: int
    ttft_s: float | None
    queue_s: float | None
    input_tokens: int | None
    output_tokens: int | None
    error_type: str | None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    gateway_queue_s: float | None = None
    #: client spans only: the engine's view is unknown
    server_ttft_s: None = None
    server_e2e_s: None = None

    @property
    def e2e_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.output_tokens is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def cost_usd(self) -> float | None:
        if self.model not in PRICES or self.input_tokens is None or self.output_tokens is None:
            return None
        p_in, p_out = PRICES[self.model]
        return self.input_tokens * p_in + self.output_tokens * p_out


def make_calls(rng: np.random.Generator, n: int = 90) -> list[Call]:
    models = ["gpt-4o", "gpt-4o-mini", "house-model"]  # the last one has no price
    errors = [None] * 8 + ["429", "rate_limited", "timeout", "Overloaded"]
    out = []
    for i in range(n):
        start = T0 + int(rng.integers(0, 2 * 3600 * 10**9))  # two hourly buckets
        e2e_ns = int(rng.integers(200_000_000, 9_000_000_000))
        ttft = None if rng.random() < 0.2 else float(rng.uniform(0.01, 0.19))
        p50 = float(rng.uniform(0.005, 0.05))
        itl = None if rng.random() < 0.25 else (p50, p50 + float(rng.uniform(0, 0.1)))
        out.append(
            Call(
                trace_id=f"{i + 1:032x}",
                span_id=f"{i + 1:016x}",
                model=models[i % 3],
                variant="a" if rng.random() < 0.5 else "b",
                start_ns=start,
                end_ns=start + e2e_ns,
                ttft_s=ttft,
                queue_s=None if rng.random() < 0.3 else float(rng.uniform(0, 0.5)),
                input_tokens=int(rng.integers(1, 2000)),
                output_tokens=None if rng.random() < 0.1 else int(rng.integers(1, 500)),
                error_type=errors[int(rng.integers(0, len(errors)))],
                itl_p50_s=itl[0] if itl else None,
                itl_p95_s=itl[1] if itl else None,
                gateway_queue_s=None if rng.random() < 0.5 else float(rng.uniform(0, 0.2)),
            )
        )
    return out


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"doubleValue": value}}


def otlp_body(calls: list[Call]) -> bytes:
    spans = []
    for c in calls:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": c.model,
            "driftline.variant": c.variant,
            "gen_ai.usage.input_tokens": c.input_tokens,
            "gen_ai.usage.output_tokens": c.output_tokens,
            "gen_ai.response.time_to_first_chunk": c.ttft_s,
            "gen_ai.latency.time_in_queue": c.queue_s,
            "error.type": c.error_type,
            "driftline.itl.p50_s": c.itl_p50_s,
            "driftline.itl.p95_s": c.itl_p95_s,
            "driftline.gateway.queue_s": c.gateway_queue_s,
        }
        spans.append(
            {
                "traceId": c.trace_id,
                "spanId": c.span_id,
                "name": f"chat {c.model}",
                "kind": 3,
                "startTimeUnixNano": str(c.start_ns),
                "endTimeUnixNano": str(c.end_ns),
                "status": {"code": 2} if c.error_type else {"code": 1},
                "attributes": [_attr(k, v) for k, v in attrs.items() if v is not None],
            }
        )
    resource = {"attributes": [_attr("service.name", "chat-api")]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(body).encode()


def ingest(client: TestClient, calls: list[Call], headers: dict[str, str] | None = None) -> None:
    r = client.post("/v1/traces", content=otlp_body(calls), headers={**JSON_CT, **(headers or {})})
    assert r.status_code == 200, r.text
    assert "partialSuccess" not in r.json() or not r.json()["partialSuccess"]


def q(values: list[float | None]) -> dict[str, float | None]:
    known = np.array([v for v in values if v is not None], dtype=float)
    if known.size == 0:
        return {"p50": None, "p95": None, "p99": None}
    p = np.percentile(known, [50, 95, 99])  # linear interpolation (type 7)
    return {"p50": float(p[0]), "p95": float(p[1]), "p99": float(p[2])}


def expected(group: list[Call], window_s: float) -> dict[str, Any]:
    """Every metric of one group computed independently from the generated calls."""
    n = len(group)
    errors = sum(c.error_type is not None for c in group)
    rejected = sum(
        (c.error_type or "").lower() in {"429", "rate_limited", "overloaded"} for c in group
    )
    out: dict[str, Any] = {"count": n, "error_count": errors, "error_rate": errors / n}
    out |= {"rejection_count": rejected, "rejection_rate": rejected / n}
    for field in LATENCY_FIELDS:
        values = [getattr(c, field) for c in group]
        for name, v in q(values).items():
            out[f"{field}_{name}"] = v
        out[f"n_{field}"] = sum(v is not None for v in values)
        out[f"null_{field}"] = sum(v is None for v in values)
    tps = [
        c.output_tokens / (c.e2e_s - c.ttft_s)
        for c in group
        if c.output_tokens and c.ttft_s is not None and c.e2e_s - c.ttft_s > 0
    ]
    out["output_tokens_per_s_p50"] = float(np.median(tps)) if tps else None
    out["n_output_tokens_per_s"] = len(tps)
    outs = [c.output_tokens for c in group if c.output_tokens is not None]
    out["output_tokens_sum"] = sum(outs) if outs else None
    out["null_output_tokens"] = n - len(outs)
    out["input_tokens_sum"] = sum(c.input_tokens for c in group if c.input_tokens is not None)
    out["output_tokens_per_s_aggregate"] = sum(outs) / window_s if outs else None
    costs = [c.cost_usd for c in group if c.cost_usd is not None]
    toks = [
        c.input_tokens + c.output_tokens
        for c in group
        if c.cost_usd is not None and c.input_tokens is not None and c.output_tokens is not None
    ]
    out["cost_usd_sum"] = sum(costs) if costs else None
    out["cost_per_1k_tokens_usd"] = 1000 * sum(costs) / sum(toks) if toks else None
    out["unpriced_count"] = sum(c.model not in PRICES for c in group)
    out["gpu_cost_usd_sum"] = None
    out["gpu_cost_per_1k_tokens_usd"] = None
    return out


def assert_matches(got: dict[str, Any], want: dict[str, Any]) -> None:
    for key, value in want.items():
        if value is None or isinstance(value, int):
            assert got[key] == value, key
        else:
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


@pytest.fixture
def calls() -> list[Call]:
    return make_calls(np.random.default_rng(7))


@pytest.fixture
def loaded(client: TestClient, calls: list[Call]) -> TestClient:
    ingest(client, calls)
    return client


def test_stats_by_model_variant_match_numpy(loaded: TestClient, calls: list[Call]) -> None:
    since, until = T0, T0 + 3 * 3600 * 10**9
    r = loaded.get(
        "/api/v1/stats",
        params={"group_by": "model,variant", "since": str(since / 1e9), "until": until / 1e9},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["next_cursor"] is None
    groups = {(c.model, c.variant) for c in calls}
    assert [(i["model"], i["variant"]) for i in body["items"]] == sorted(groups)
    for item in body["items"]:
        group = [c for c in calls if (c.model, c.variant) == (item["model"], item["variant"])]
        assert_matches(item, expected(group, (until - since) / 1e9))
        assert item["thumbs_down_rate"] is None  # no votes: unknown, not 0


def test_hourly_buckets_and_filters(loaded: TestClient, calls: list[Call]) -> None:
    r = loaded.get(
        "/api/v1/stats", params={"group_by": "bucket", "bucket": "1h", "model": "gpt-4o"}
    )
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    hour = 3600 * 10**9
    mine = [c for c in calls if c.model == "gpt-4o"]
    starts = sorted({c.start_ns // hour * hour for c in mine})
    assert [i["bucket_start_unix_s"] for i in items] == [s / 1e9 for s in starts]
    for item, start in zip(items, starts, strict=True):
        iso = dt.datetime.fromtimestamp(start / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert item["bucket"] == iso
        group = [c for c in mine if start <= c.start_ns < start + hour]
        assert_matches(item, expected(group, 3600.0))
        assert item["window_s"] == 3600.0


def test_time_range_is_half_open_and_iso(loaded: TestClient, calls: list[Call]) -> None:
    since, until = T0 + 1800 * 10**9, T0 + 5400 * 10**9
    iso = lambda ns: dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).isoformat()  # noqa: E731
    r = loaded.get("/api/v1/stats", params={"since": iso(since), "until": iso(until)})
    (item,) = r.json()["items"]
    group = [c for c in calls if since <= c.start_ns < until]
    assert_matches(item, expected(group, 3600.0))


def test_library_slices_agree_and_fetch_calls(db_url: str, loaded: TestClient) -> None:
    one = analytics.call_stats(db_url, "default", group_by=["service"], slices=1)
    many = analytics.call_stats(db_url, "default", group_by=["service"], slices=7)
    assert len(one) == 1 and one[0]["service"] == "chat-api" and one[0]["count"] == 90
    for key, value in one[0].items():
        assert many[0][key] == (pytest.approx(value) if isinstance(value, float) else value)
    table = analytics.fetch_calls(
        db_url, "default", columns=["model", "ttft_s", "flags"], filters={"model": "house-model"}
    )
    assert table.column_names == ["model", "ttft_s", "flags"] and table.num_rows == 30
    assert all("unpriced" in json.loads(f) for f in table.column("flags").to_pylist())
    assert analytics.fetch_calls(db_url, "nobody", columns=["model"]).num_rows == 0
    with pytest.raises(ValueError, match="columns"):
        analytics.fetch_calls(db_url, "default", columns=["nope"])
    with pytest.raises(ValueError, match="filters"):
        analytics.fetch_calls(db_url, "default", filters={"colour": "red"})
    with pytest.raises(ValueError, match="group_by"):
        analytics.call_stats(db_url, "default", group_by=["tenant"])


def _vote(
    i: int, trace: str, span: str | None, kind: str, user: str | None, ts: int
) -> dict[str, Any]:
    return {
        "tenant": "default",
        "feedback_id": f"f{i}",
        "trace_id": trace,
        "span_id": span,
        "kind": kind,
        "user_id": user,
        "attributes": {},
        "timestamp_unix_nano": ts,
        "received_at": dt.datetime.now(dt.UTC),
        "linked_at": dt.datetime.now(dt.UTC),
    }


def test_thumbs_down_rate_uses_latest_vote_per_user(
    db_url: str, loaded: TestClient, calls: list[Call]
) -> None:
    a, b, c = [x for x in calls if x.model == "gpt-4o-mini"][:3]
    rows = [
        _vote(1, a.trace_id, a.span_id, "thumbs_down", "u1", 10),
        _vote(2, a.trace_id, a.span_id, "thumbs_up", "u1", 20),  # u1 changed their mind
        _vote(3, a.trace_id, None, "thumbs_down", "u2", 15),
        _vote(4, b.trace_id, b.span_id, "thumbs_down", "u1", 5),
        _vote(5, b.trace_id, b.span_id, "thumbs_down", None, 6),  # anonymous: one vote each
        _vote(6, c.trace_id, c.span_id, "rating", "u1", 7),  # not a thumb
        {**_vote(7, c.trace_id, c.span_id, "thumbs_up", "u3", 8), "linked_at": None},  # pending
    ]
    state = loaded.app.state.driftline  # type: ignore[attr-defined]
    with state.engine.begin() as conn:
        conn.execute(insert(Feedback), rows)
    items = loaded.get("/api/v1/stats", params={"group_by": "model"}).json()["items"]
    by_model = {i["model"]: i for i in items}
    mini = by_model["gpt-4o-mini"]
    assert (mini["thumbs_up_count"], mini["thumbs_down_count"]) == (1, 3)
    assert mini["thumbs_down_rate"] == pytest.approx(3 / 4)
    assert by_model["gpt-4o"]["thumbs_down_rate"] is None


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"group_by": "colour"}, "group_by"),
        ({"group_by": "bucket"}, "bucket"),
        ({"bucket": "fortnight"}, "bucket"),
        ({"bucket": "0.5s"}, "bucket"),
        ({"since": "yesterday"}, "since"),
        ({"since": "20", "until": "10"}, "until"),
        ({"modle": "gpt-4o"}, "modle"),  # a typo is a 400, not every call
    ],
)
def test_bad_parameters_are_400(client: TestClient, params: dict[str, str], needle: str) -> None:
    r = client.get("/api/v1/stats", params=params)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_empty_store_counts_zero_and_nulls(client: TestClient) -> None:
    (item,) = client.get("/api/v1/stats").json()["items"]
    assert item["count"] == 0 and item["error_rate"] is None and item["ttft_s_p50"] is None
    assert client.get("/api/v1/stats", params={"group_by": "model"}).json()["items"] == []


@pytest.fixture
def keyed(db_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The app with API keys (not --dev): an admin, a platform admin and a reader of tenant
    acme, a writer of tenant beta."""
    with TestClient(create_app(make_settings(db_url, dev=False, grpc_enabled=False))) as c:
        engine = c.app.state.driftline.engine  # type: ignore[attr-defined]
        keys = {
            "acme_admin": create_key(engine, "acme", "admin"),
            "acme_platform": create_key(engine, "acme", "platform-admin"),
            "acme_read": create_key(engine, "acme", "read"),
            "beta_ingest": create_key(engine, "beta", "ingest"),
        }
        yield c, {k: f"Bearer {v}" for k, v in keys.items()}


def test_tenants_are_isolated_and_group_by_tenant_is_platform_admin_only(
    keyed: tuple[TestClient, dict[str, str]], calls: list[Call]
) -> None:
    client, keys = keyed
    ingest(client, calls[:40], {"Authorization": keys["acme_admin"]})
    ingest(client, calls[40:], {"Authorization": keys["beta_ingest"]})
    read = {"Authorization": keys["acme_read"]}
    (own,) = client.get("/api/v1/stats", headers=read).json()["items"]
    assert own["count"] == 40
    r = client.get("/api/v1/stats", params={"group_by": "tenant"}, headers=read)
    assert r.status_code == 403
    r = client.get("/api/v1/stats", headers={"Authorization": keys["beta_ingest"]})
    assert r.status_code == 403  # an ingest key may not read
    admin = {"Authorization": keys["acme_admin"]}  # a tenant admin reads its own tenant only
    r = client.get("/api/v1/stats", params={"group_by": "tenant"}, headers=admin)
    assert r.status_code == 403 and "platform-admin" in r.json()["error"]["message"]
    platform = {"Authorization": keys["acme_platform"]}
    items = client.get("/api/v1/stats", params={"group_by": "tenant"}, headers=platform).json()
    assert [(i["tenant"], i["count"]) for i in items["items"]] == [("acme", 40), ("beta", 50)]
    assert client.get("/api/v1/stats/engine", headers=read).json()["items"] == []


def test_engine_stats_rates_survive_a_counter_reset(client: TestClient, db_url: str) -> None:
    url = "http://127.0.0.1:8100/metrics"
    base = {"tenant": "default", "url": url, "engine_kind": "vllm", "model_name": "m"}
    kv = [0.1, 0.4, 0.3, 0.9]
    waiting = [0, 3, 1, 7]
    queries = [1000, 1500, 200, 600]  # restart before the third scrape
    hits = [100, 400, 50, 250]
    itl = [None, 0.02, 0.05, 0.03]  # the engine's p95 ITL per scrape interval (none at first)
    rows = [
        base
        | {
            "engine_index": "0",
            "scraped_unix_nano": T0 + i * 15 * 10**9,
            "kv_cache_usage": kv[i],
            "requests_running": 2,
            "requests_waiting": waiting[i],
            "prefix_cache_queries_total": queries[i],
            "prefix_cache_hits_total": hits[i],
            "itl_p95_s": itl[i],
            "ttft_p95_s": None,
        }
        for i in range(4)
    ]
    state = client.app.state.driftline  # type: ignore[attr-defined]
    with state.engine.begin() as conn:
        conn.execute(insert(EngineSample), rows)
    (item,) = client.get("/api/v1/stats/engine").json()["items"]
    assert item["samples"] == 4 and item["model"] == "m" and item["url"] == url
    assert item["kv_cache_usage_mean"] == pytest.approx(np.mean(kv))
    assert item["kv_cache_usage_max"] == pytest.approx(0.9)
    assert item["requests_waiting_max"] == 7
    # increases: (1500-1000) + 200 (reset: the new value) + (600-200); hits likewise
    assert item["prefix_cache_hit_rate"] == pytest.approx((300 + 50 + 200) / (500 + 200 + 400))
    assert item["spec_decode_acceptance_rate"] is None and item["preemptions"] is None
    assert item["itl_p95_s_median"] == pytest.approx(0.03)
    assert item["itl_p95_s_max"] == pytest.approx(0.05)
    assert item["ttft_p95_s_median"] is None and item["gpu_cost_usd_sum"] is None
    by_min = client.get("/api/v1/stats/engine", params={"bucket": "30s"}).json()["items"]
    assert [i["samples"] for i in by_min] == [2, 2]
    assert analytics.engine_stats(db_url, "other") == []
