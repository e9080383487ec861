"""Fit the demo's load to the machine: measure the engine's throughput at warm-up, then offer a
rate it can serve and say how long the canary's first step needs to gather its samples."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

#: share of the measured throughput offered (headroom for the judge's calls on the same engine)
LOAD_SHARE_OF_THROUGHPUT = 0.7


async def _measure(url: str, model: str, max_tokens: int, concurrency: int, n: int) -> float:
    gate = asyncio.Semaphore(concurrency)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Where is my parcel? It was due yesterday."}],
        "max_tokens": max_tokens,
    }
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:

        async def one() -> None:
            async with gate:
                r = await client.post("/v1/chat/completions", json=body)
                r.raise_for_status()

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - t0)


def measure_throughput(
    engine_url: str, model: str, *, max_tokens: int, concurrency: int, n: int | None = None
) -> float:
    """Completed requests per second of the engine at ``engine_url`` (OpenAI-compatible, no
    ``/v1`` suffix) for ``n`` chat requests of ``max_tokens`` tokens, ``concurrency`` in flight
    (default ``n`` = 2 x concurrency). Raises httpx.HTTPError when the engine fails a request."""
    return asyncio.run(_measure(engine_url, model, max_tokens, concurrency, n or 2 * concurrency))


@dataclass(frozen=True)
class LoadPlan:
    """Offered load (requests/s) and the seconds the canary's first step needs for its minimum
    candidate samples (``min_samples / (rate x canary share x candidate weight)``)."""

    throughput_rps: float
    rate_rps: float
    first_step_s: float

    def fits(self, duration_s: float | None) -> bool:
        """Whether a run of ``duration_s`` seconds leaves the first step time to gather its
        samples (with the step's minimum duration); always True without a cap."""
        return duration_s is None or self.first_step_s <= duration_s


def plan_load(
    throughput_rps: float,
    *,
    requested_rps: float | None,
    canary_share: float,
    candidate_weight: float,
    min_samples: int,
    min_step_s: float,
) -> LoadPlan:
    """The offered rate (``requested_rps`` when given, else
    :data:`LOAD_SHARE_OF_THROUGHPUT` x the measured throughput) and the first step's length."""
    rate = requested_rps or max(0.05, LOAD_SHARE_OF_THROUGHPUT * throughput_rps)
    per_s = rate * canary_share * candidate_weight
    return LoadPlan(
        throughput_rps=throughput_rps,
        rate_rps=rate,
        first_step_s=max(min_step_s, min_samples / per_s),
    )
