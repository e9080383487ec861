"""``driftline load --agent-rate``: agent runs through the real gateway into a live collector,
which then shows each run as one trace: invoke_agent -> chat, execute_tool, chat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import numpy as np
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from serving.load import LoadOptions, run_load
from serving.workload import load_prompts, plan_load
from tests.conftest import LiveCollector, wait_for
from tests.serving.conftest import RunningGateway


def test_agent_runs_become_agent_traces(
    make_gateway: Callable[..., RunningGateway], live_collector: LiveCollector
) -> None:
    gw = make_gateway()
    rng = np.random.default_rng(3)
    plan = plan_load(load_prompts(), n_requests=6, rate_per_s=100.0, n_users=3, rng=rng)
    opts = LoadOptions(
        gateway_url=gw.url,
        model="bot",
        concurrency=2,
        max_tokens=8,
        collector_url=live_collector.http_url,
        agent_rate=1.0,
    )
    report = asyncio.run(run_load(plan, opts, rng=rng))
    assert report.ok == 6 and report.errors == {}
    # the gateway's own client spans go to the collector as in production (OTLP/HTTP)
    body = encode_spans(gw.spans.get_finished_spans()).SerializeToString()
    r = httpx.post(
        f"{live_collector.http_url}/v1/traces",
        content=body,
        headers={"content-type": "application/x-protobuf"},
    )
    assert r.status_code == 200
    base = live_collector.http_url + "/api/v1/traces"
    items = wait_for(
        lambda: (
            [t for t in httpx.get(base).json()["items"] if t["llm_calls"] == 2]
            if len(httpx.get(base).json()["items"]) == 6
            else None
        )
    )
    assert len(items) == 6
    for t in items:
        assert t["root"]["label"] == "agent: support-agent"
        tree = httpx.get(f"{base}/{t['trace_id']}").json()
        (root,) = tree["roots"]
        assert [c["kind"] for c in root["children"]] == ["llm", "tool", "llm"]
        assert root["children"][1]["label"] == "tool: lookup_order"
        assert tree["missing_parents"] == []
        assert root["totals"]["llm_calls"] == 2
