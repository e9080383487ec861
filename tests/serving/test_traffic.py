"""Traffic classes, tenant rate limits and the response cache, through real engines and gateway."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import numpy as np
import pytest

from serving.admission import OverloadedError
from serving.classes import TrafficGate
from serving.fleet_config import LimitsConfig, TenantLimit
from serving.ratelimit import RateLimitedError, TenantLimiter
from tests.serving.conftest import attrs
from tests.serving.fleet_support import chat, fleet_rig


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_batch_flood_leaves_interactive_slots_and_batch_is_not_starved() -> None:
    async def scenario() -> tuple[list[float], list[float], int]:
        gate = TrafficGate(8, batch_share=0.25, batch_queue=1000, batch_max_wait_s=0.3)
        inter_q: list[float] = []
        batch_q: list[float] = []
        peak_batch = 0

        async def job(cls: str, service_s: float, out: list[float]) -> None:
            nonlocal peak_batch
            out.append(await gate.acquire(cls))  # type: ignore[arg-type]
            peak_batch = max(peak_batch, gate.classes["batch"].in_flight)
            await asyncio.sleep(service_s)
            gate.release(cls)  # type: ignore[arg-type]

        flood = [asyncio.create_task(job("batch", 0.05, batch_q)) for _ in range(60)]
        await asyncio.sleep(0.01)
        inter = []
        for _ in range(30):  # a steady interactive stream of 6 at a time
            inter += [asyncio.create_task(job("interactive", 0.05, inter_q)) for _ in range(6)]
            await asyncio.sleep(0.05)
        await asyncio.gather(*flood, *inter)
        return inter_q, batch_q, peak_batch

    inter_q, batch_q, peak = asyncio.run(scenario())
    assert peak <= 2  # ceil(0.25 * 8): batch never holds more than its share
    assert float(np.percentile(inter_q, 95)) < 0.1  # interactive keeps its slots
    assert len(batch_q) == 60  # every batch request ran; none starved


def test_starving_batch_goes_before_interactive() -> None:
    async def scenario() -> list[str]:
        clock = FakeClock()
        gate = TrafficGate(1, batch_share=1.0, batch_max_wait_s=5.0, clock=clock)
        order: list[str] = []
        assert await gate.acquire("interactive") == 0.0

        async def wait(cls: str) -> None:
            await gate.acquire(cls)  # type: ignore[arg-type]
            order.append(cls)

        b = asyncio.create_task(wait("batch"))
        await asyncio.sleep(0)
        i1 = asyncio.create_task(wait("interactive"))
        await asyncio.sleep(0)
        gate.release("interactive")  # batch waited 0 s < 5 s: interactive first
        await asyncio.sleep(0)
        clock.t = 6.0
        gate.release("interactive")  # now batch has waited past the bound
        await asyncio.gather(b, i1)
        return order

    assert asyncio.run(scenario()) == ["interactive", "batch"]


def test_full_class_queue_is_rejected_and_cancelled_waiters_leave() -> None:
    async def scenario() -> None:
        gate = TrafficGate(1, batch_queue=1)
        await gate.acquire("batch")
        waiter = asyncio.create_task(gate.acquire("batch"))
        await asyncio.sleep(0)
        with pytest.raises(OverloadedError):
            await gate.acquire("batch")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert gate.waiting == 0 and gate.rejected == 1
        gate.release("batch")
        assert gate.in_flight == 0

    asyncio.run(scenario())


def test_token_buckets_refill_reserve_and_settle() -> None:
    clock = FakeClock()
    lim = TenantLimiter(
        LimitsConfig(tenants={"a": TenantLimit(requests_per_s=2, burst=2, tokens_per_min=600)}),
        clock=clock,
    )
    r1 = lim.reserve("a", 100)
    lim.reserve("a", 100)
    with pytest.raises(RateLimitedError) as exc:
        lim.reserve("a", 10)  # third request inside the burst of 2
    assert exc.value.headers["retry-after"] == "1"
    assert exc.value.headers["x-ratelimit-limit-requests"] == "2"
    assert exc.value.headers["x-ratelimit-remaining-tokens"] == "400"
    lim.settle(r1, 20)  # 80 unused tokens come back
    clock.t = 1.0  # 2 requests and 10 tokens refilled
    lim.reserve("a", 480)
    with pytest.raises(RateLimitedError, match="tokens per minute") as exc:
        lim.reserve("a", 200)
    assert exc.value.headers["retry-after"] == str(int(np.ceil(190 / 10)))
    lim.reserve(None, 10**9)  # no default limit: unlimited


def test_tenant_over_its_limit_gets_429_and_the_other_tenant_does_not() -> None:
    config = {
        "api_keys": {"sk-a": "noisy", "sk-b": "calm"},
        "limits": {"tenants": {"noisy": {"requests_per_s": 1, "burst": 2}}},
    }
    with fleet_rig([{"models": ["base"]}], config) as rig:

        async def run() -> tuple[list[httpx.Response], list[httpx.Response]]:
            async with httpx.AsyncClient(timeout=30) as c:

                def post(key: str, i: int) -> Any:
                    return c.post(
                        f"{rig.url}/v1/chat/completions",
                        json=chat("base", f"q{i}"),
                        headers={"authorization": f"Bearer {key}"},
                    )

                a = await asyncio.gather(*(post("sk-a", i) for i in range(10)))
                b = await asyncio.gather(*(post("sk-b", i) for i in range(10)))
                return list(a), list(b)

        noisy, calm = asyncio.run(run())
        limited = [r for r in noisy if r.status_code == 429]
        assert 7 <= len(limited) <= 8 and all(r.status_code == 200 for r in calm)
        h = limited[0].headers
        assert int(h["retry-after"]) >= 1 and h["x-ratelimit-limit-requests"] == "2"
        assert limited[0].json()["error"]["code"] == "rate_limited"
        spans = [attrs(s) for s in rig.spans.get_finished_spans()]
        rl = [a for a in spans if a.get("error.type") == "rate_limited"]
        assert len(rl) == len(limited) and {a["driftline.tenant"] for a in rl} == {"noisy"}
        assert len(rig.engines[0].seen) == 20 - len(limited)


def test_cache_hits_only_deterministic_complete_answers_per_tenant() -> None:
    config = {
        "api_keys": {"sk-a": "a", "sk-b": "b"},
        "cache": {"enabled": True, "ttl_s": 60},
    }
    with fleet_rig([{"models": ["base"], "default_max_tokens": 4}], config) as rig:
        eng = rig.engines[0]

        def post(body: dict[str, Any], key: str = "sk-a") -> httpx.Response:
            return httpx.post(
                f"{rig.url}/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {key}"},
            )

        greedy = chat("base", "hello", temperature=0, max_tokens=50)
        first, second = post(greedy), post(greedy)
        assert first.status_code == second.status_code == 200
        assert first.content == second.content and second.headers["x-driftline-cache"] == "hit"
        assert len(eng.seen) == 1
        streamed = {**greedy, "stream": True}
        s1, s2 = post(streamed), post(streamed)
        assert s1.content == s2.content and len(eng.seen) == 2
        post(greedy, key="sk-b")  # another tenant: its own entry
        assert len(eng.seen) == 3
        post(chat("base", "hello", temperature=0.7, max_tokens=50))
        post(chat("base", "hello", temperature=0.7, max_tokens=50))
        assert len(eng.seen) == 5  # sampling without a seed: never cached
        seeded = chat("base", "hello", temperature=0.7, seed=11, max_tokens=50)
        post(seeded), post(seeded)
        assert len(eng.seen) == 6
        truncated = chat("base", "hello", temperature=0, max_tokens=2)  # finish_reason length
        post(truncated), post(truncated)
        assert len(eng.seen) == 8
        eng.fail_status = 500
        bad = chat("base", "boom", temperature=0, max_tokens=50)
        assert post(bad).status_code == 500
        eng.fail_status = None
        assert post(bad).status_code == 200 and len(eng.seen) == 10  # errors are not cached
        hits = [attrs(s) for s in rig.spans.get_finished_spans()]
        hits = [a for a in hits if a.get("driftline.cache.hit")]
        assert len(hits) == 3 and all("driftline.replica" not in a for a in hits)
        assert all(a["driftline.gateway.queue_s"] == 0.0 for a in hits)
