"""Replica routing against several real echo engines: adapter affinity, prefix affinity with
bounded load, ejection and retry of a failing replica, health checks, the /metrics signal."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from serving.config import GatewayConfigError, parse_config
from tests.serving.conftest import attrs
from tests.serving.fleet_support import chat, fleet_rig


def test_adapter_requests_only_reach_replicas_that_load_the_adapter() -> None:
    engines = [
        {"models": ["base"], "adapters": ["lora-a"]},
        {"models": ["base"]},  # no adapter
        {"models": ["base"], "adapters": ["lora-a"]},
    ]
    with fleet_rig(engines) as rig:
        for i in range(30):
            r = httpx.post(f"{rig.url}/v1/chat/completions", json=chat("lora-a", f"q{i}"))
            assert r.status_code == 200, r.text
        assert not [s for s in rig.engines[1].seen if s["model"] == "lora-a"]
        assert {s["model"] for s in rig.engines[1].seen} <= {"base"}
        used = Counter(attrs(s)["driftline.replica"] for s in rig.spans.get_finished_spans())
        assert set(used) <= {rig.engine_urls[0], rig.engine_urls[2]}
        r = httpx.post(f"{rig.url}/v1/chat/completions", json=chat("lora-z", "hi"))
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_served"
        assert all(s["model"] != "lora-z" for e in rig.engines for s in e.seen)


def test_shared_prefix_sticks_to_one_replica_and_load_is_bounded() -> None:
    with fleet_rig([{"models": ["base"]}] * 3) as rig:
        for i in range(12):  # sequential: no load, so every request takes its first choice
            httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", f"question {i}"))
        spans = rig.spans.get_finished_spans()
        assert {attrs(s)["driftline.route.reason"] for s in spans} == {"prefix"}
        assert len({attrs(s)["driftline.replica"] for s in spans}) == 1
        rig.spans.clear()
        systems = [f"persona number {k} with its own long instructions" for k in range(40)]
        for k, sysp in enumerate(systems):
            httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", "hi", sysp))
            assert k >= 0
        spread = Counter(attrs(s)["driftline.replica"] for s in rig.spans.get_finished_spans())
        assert len(spread) == 3  # different prefixes spread over the fleet

        async def burst() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as c:
                return await asyncio.gather(
                    *(
                        c.post(f"{rig.url}/v1/chat/completions", json=chat("base", f"b{i}"))
                        for i in range(24)
                    )
                )

        rig.spans.clear()
        for e in rig.engines:
            e.ttft_s = 0.3
        assert all(r.status_code == 200 for r in asyncio.run(burst()))
        spans = rig.spans.get_finished_spans()
        reasons = Counter(attrs(s)["driftline.route.reason"] for s in spans)
        per_replica = Counter(attrs(s)["driftline.replica"] for s in spans)
        # one hot prefix, 24 concurrent requests, c = 1.25: the home replica takes at most
        # ceil(1.25 * 24 / 3) = 10, the rest overflow to the next replicas in its order
        assert reasons["prefix_overflow"] >= 24 - 10
        assert max(per_replica.values()) <= 10


def test_failing_replica_is_ejected_and_the_request_retried_elsewhere() -> None:
    engines: list[dict[str, Any]] = [{"models": ["base"], "fail_status": 500}, {"models": ["base"]}]
    config = {"routing": {"policy": "round_robin"}}
    with fleet_rig(engines, config, health_interval_s=60) as rig:
        # a first ejection of 60 s (not 1 s) outlasts the test however slow the machine: the
        # doubling itself is test_backoff_doubles_and_health_checks_eject_and_scrape's
        rig.gateway.fleet.max_backoff_s = 600.0
        rig.gateway.fleet.base_backoff_s = 60.0
        codes = [
            httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", f"x{i}")).status_code
            for i in range(10)
        ]
        assert codes == [200] * 10
        bad = rig.gateway.fleet.replicas[0]
        assert bad.failures == 1 and bad.ejected_until > rig.gateway.fleet.clock()
        # round robin alone would send it 5 of 10: after its one failure it is left out
        assert len(rig.engines[0].seen) == 1
        retried = [attrs(s) for s in rig.spans.get_finished_spans() if "error.type" not in attrs(s)]
        assert all(a["driftline.replica"] == rig.engine_urls[1] for a in retried)
        metrics = httpx.get(f"{rig.url}/metrics").text
        assert f'driftline_replica_ejected{{model="base",replica="{bad.url}"}} 1.0' in metrics
        # backoff over and the replica fixed: the next try succeeds and clears the streak
        rig.engines[0].fail_status = None
        bad.ejected_until = 0.0
        for i in range(4):
            httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", f"y{i}"))
        assert bad.failures == 0 and len(rig.engines[0].seen) >= 2


def test_backoff_doubles_and_health_checks_eject_and_scrape() -> None:
    with fleet_rig([{"models": ["base"]}, {"models": ["base"]}], health_interval_s=0.1) as rig:
        fleet = rig.gateway.fleet
        r0 = fleet.replicas[0]
        assert fleet.failed(r0) == 1.0 and fleet.failed(r0) == 2.0 and fleet.failed(r0) == 4.0
        fleet.succeeded(r0)
        rig.engines[1].healthy = False
        for _ in range(400):
            if fleet.replicas[1].failures and fleet.replicas[0].kv_cache_usage is not None:
                break
            time.sleep(0.05)
        assert fleet.replicas[1].failures >= 1
        assert fleet.replicas[0].kv_cache_usage == 0.0  # scraped from /metrics
        for i in range(5):
            r = httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", f"h{i}"))
            assert r.headers["x-driftline-replica"] != rig.engine_urls[1]


def test_all_replicas_ejected_are_tried_anyway_then_502() -> None:
    with fleet_rig([{"models": ["base"]}, {"models": ["base"]}], health_interval_s=60) as rig:
        fleet = rig.gateway.fleet
        for rep in fleet.replicas:
            fleet.failed(rep)
        ok = httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", "hi"))
        assert ok.status_code == 200  # panic routing: all ejected means all eligible
        rig.spans.clear()
        for e in rig.engines:
            e.fail_status = 503
        r = httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", "hi"))
        assert r.status_code == 503  # both tried once, the last answer passes through
        (span,) = rig.spans.get_finished_spans()
        assert attrs(span)["error.type"] == "503"
        assert attrs(span)["driftline.route.reason"] == "retry"
        assert sum(len(e.seen) for e in rig.engines) == 3


def test_desired_replicas_on_metrics() -> None:
    config = {"autoscale": {"warm_buffer": 1, "target_in_flight": 2}}
    with fleet_rig([{"models": ["base"]}, {"models": ["base"]}], config) as rig:
        httpx.post(f"{rig.url}/v1/chat/completions", json=chat("base", "hi"))
        text = httpx.get(f"{rig.url}/metrics").text
        assert 'driftline_desired_replicas{model="base"} 1.0' in text  # idle: 0 + warm buffer
        assert 'driftline_replicas{model="base"} 2.0' in text
        assert 'driftline_gateway_queue_depth{class="batch"} 0.0' in text


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"replicas": [{"url": "ftp://x", "models": ["a"]}]}, "replicas[0].url"),
        ({"replicas": [{"url": "http://x"}]}, "replicas[0].models"),
        ({"routing": {"policy": "random"}}, "routing.policy"),
        ({"routing": {"load_factor": 0.5}}, "routing.load_factor"),
        ({"traffic": {"batch_share": 2}}, "traffic.batch_share"),
        ({"limits": {"tenants": {"a": {"requests_per_s": -1}}}}, "limits.tenants.a"),
        ({"cache": {"enabled": "yes"}}, "cache.enabled"),
        ({"autoscale": {"warm_buffer": -1}}, "autoscale.warm_buffer"),
    ],
)
def test_bad_fleet_config_names_the_key(data: dict[str, object], needle: str) -> None:
    with pytest.raises(GatewayConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        parse_config(data)
