"""Engine /metrics scraping into engine_samples, and GPU-cost amortisation over tokens."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from sqlalchemy import select

from collector.background import HOUR_NS, amortize_gpu_cost
from collector.background import jobs as background_jobs
from collector.scheduler import JobContext
from collector.store import analytics
from collector.store import engine as store_engine
from collector.store.models import LLMCall
from collector.store.models.api import EngineSample
from tests.conftest import LiveCollector, free_port, make_settings, wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "engine_metrics" / "vllm_current.txt"


def _serve() -> tuple[str, http.server.ThreadingHTTPServer]:
    """A real HTTP server answering GET with the vLLM /metrics fixture."""
    text = FIXTURE.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{server.server_address[1]}/metrics", server


@pytest.fixture
def metrics_server() -> Iterator[str]:
    url, server = _serve()
    yield url
    server.shutdown()


def test_replica_samples_and_cost_belong_to_their_tenant(sqlite_url: str) -> None:
    """Two replicas: one dedicated to acme (with a cost), one shared; per-replica cost is the
    wall time between its scrapes times its USD/hour."""
    (acme_url, s1), (shared_url, s2) = _serve(), _serve()
    settings = make_settings(
        sqlite_url,
        engine_metrics_urls=[acme_url, shared_url],
        engine_tenants={acme_url: "acme"},
        engine_gpu_cost_per_hour={acme_url: 7.2},
    )
    store_engine.upgrade(sqlite_url)
    eng = store_engine.make_engine(sqlite_url)
    try:
        (job,) = [j for j in background_jobs(settings) if j.name == "engine-scrape"]
        ctx = JobContext(settings, eng, CollectorRegistry())
        job.fn(ctx)
        time.sleep(0.2)
        job.fn(ctx)
        with eng.connect() as conn:
            rows = list(conn.execute(select(EngineSample.__table__)).all())
        by_url = {u: [r for r in rows if r.url == u] for u in (acme_url, shared_url)}
        assert {r.tenant for r in by_url[acme_url]} == {"acme"}
        assert {r.tenant for r in by_url[shared_url]} == {"default"}
        assert all(r.gpu_cost_usd is None for r in by_url[shared_url])
        times = sorted({r.scraped_unix_nano for r in by_url[acme_url]})
        assert len(times) == 2
        first = [r for r in by_url[acme_url] if r.scraped_unix_nano == times[0]]
        second = [r for r in by_url[acme_url] if r.scraped_unix_nano == times[1]]
        assert all(r.gpu_cost_usd is None for r in first)  # no interval yet: unknown, not 0
        expected = 7.2 * (times[1] - times[0]) / 1e9 / 3600
        assert sum(r.gpu_cost_usd for r in second) == pytest.approx(expected)
        (acme_stats,) = analytics.engine_stats(sqlite_url, "acme")
        assert acme_stats["gpu_cost_usd_sum"] == pytest.approx(expected)
        assert analytics.engine_stats(sqlite_url, "default")[0]["gpu_cost_usd_sum"] is None
    finally:
        eng.dispose()
        s1.shutdown()
        s2.shutdown()


def test_engine_maps_must_name_scraped_urls(sqlite_url: str) -> None:
    with pytest.raises(ValueError, match="DRIFTLINE_ENGINE_TENANTS: http://x/metrics not in"):
        make_settings(sqlite_url, engine_tenants={"http://x/metrics": "acme"})
    with pytest.raises(ValueError, match="ENGINE_GPU_COST_PER_HOUR"):
        make_settings(
            sqlite_url,
            engine_metrics_urls=["http://x/m"],
            engine_gpu_cost_per_hour={"http://x/m": -1},
        )


def test_engine_samples_are_scraped_and_stored(sqlite_url: str, metrics_server: str) -> None:
    settings = make_settings(
        sqlite_url,
        http_port=free_port(),
        engine_metrics_urls=[metrics_server, "http://127.0.0.1:9/metrics"],
        engine_scrape_interval_s=0.3,
    )
    lc = LiveCollector(settings).start()
    try:
        eng = store_engine.make_engine(sqlite_url)

        def rows() -> list:  # type: ignore[type-arg]
            with eng.connect() as conn:
                return list(conn.execute(select(EngineSample.__table__)).all())

        wait_for(lambda: len(rows()) >= 2)
        first = rows()[0]
        assert first.engine_kind == "vllm" and first.url == metrics_server
        assert first.kv_cache_usage is not None and 0 <= first.kv_cache_usage <= 1
        assert first.requests_running is not None
        import httpx

        text = httpx.get(f"{lc.http_url}/metrics").text
        assert 'driftline_engine_scrape_failures_total{url="http://127.0.0.1:9/metrics"}' in text
        eng.dispose()
    finally:
        lc.stop()


def test_gpu_cost_is_spread_over_tokens(client: TestClient, db_url: str) -> None:
    hour = 1_714_000_000 * 10**9
    hour -= hour % HOUR_NS
    spans = []
    for i, (inp, out) in enumerate([(100, 100), (300, 500), (None, 50)]):
        attrs = [{"key": "gen_ai.request.model", "value": {"stringValue": "smollm"}}]
        if inp is not None:
            attrs.append({"key": "gen_ai.usage.input_tokens", "value": {"intValue": inp}})
        attrs.append({"key": "gen_ai.usage.output_tokens", "value": {"intValue": out}})
        spans.append(
            {
                "traceId": f"{i + 1:032x}",
                "spanId": f"{i + 1:016x}",
                "name": "chat smollm",
                "startTimeUnixNano": str(hour + i * 10**9),
                "endTimeUnixNano": str(hour + i * 10**9 + 10**8),
                "attributes": attrs,
            }
        )
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "vllm-replica"}}
                    ]
                },
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }
    assert client.post("/v1/traces", json=body).status_code == 200
    eng = store_engine.make_engine(db_url)
    assert amortize_gpu_cost(eng, "vllm-replica", 2.0, hour, hour + HOUR_NS + 5) == 2
    with eng.connect() as conn:
        costs = {
            r.trace_id[-1]: r.gpu_cost_usd
            for r in conn.execute(select(LLMCall.trace_id, LLMCall.gpu_cost_usd))
        }
    eng.dispose()
    assert costs["1"] == pytest.approx(2.0 * 200 / 1000)
    assert costs["2"] == pytest.approx(2.0 * 800 / 1000)
    assert costs["3"] is None  # unknown tokens: unknown share
