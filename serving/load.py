"""``driftline load``: execute a :mod:`serving.workload` plan against the gateway.

Requests go out at their planned times (Poisson arrivals) under a concurrency cap; each carries
``user`` and the ``X-Driftline-Session`` header so the gateway routes stickily. Optional
*simulated* feedback (``metadata.source = "simulated"``) is posted to the collector's
``POST /api/v1/feedback``; failures there are counted, never fatal.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import orjson

from serving.agent_load import agent_run
from serving.stream import SseSplitter, StreamAccumulator, event_data
from serving.workload import PlannedRequest

_WORD = re.compile(r"[A-Za-z]{2,15}")
_SENTENCE_START = re.compile(r"\s*([A-Z0-9\"'“*#>(\[]|-\s)")


@dataclass(frozen=True)
class LoadOptions:
    """How to send a plan.

    Attributes:
        gateway_url: gateway base URL.
        model: rollout (or served model) to request.
        concurrency: most requests in flight (>= 1).
        stream: use SSE streaming.
        max_tokens: requested output limit (the gateway may cap it further).
        api_key: sent as ``Authorization: Bearer``.
        collector_url: where simulated feedback goes (None: no feedback).
        feedback_rate: probability that a completed response gets feedback, in [0, 1].
        timeout_s: per-request timeout in seconds.
        agent_rate: share of requests run as agent runs (invoke_agent → chat, execute_tool,
            chat; :mod:`serving.agent_load`), in [0, 1]; needs ``collector_url``.
    """

    gateway_url: str
    model: str = "support-bot"
    concurrency: int = 8
    stream: bool = True
    max_tokens: int = 64
    api_key: str | None = None
    collector_url: str | None = None
    feedback_rate: float = 0.0
    timeout_s: float = 120.0
    agent_rate: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.agent_rate <= 1.0:
            raise ValueError(f"agent_rate: must be in [0, 1], got {self.agent_rate}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency: must be >= 1, got {self.concurrency}")
        if not 0.0 <= self.feedback_rate <= 1.0:
            raise ValueError(f"feedback_rate: must be in [0, 1], got {self.feedback_rate}")


@dataclass(frozen=True)
class LoadReport:
    """Outcome of a load run. Latencies are seconds; None when no request succeeded."""

    sent: int
    ok: int
    rejected_429: int
    errors: dict[str, int]
    by_variant: dict[str, int]
    feedback_sent: int
    feedback_failed: int
    elapsed_s: float
    e2e_p50_s: float | None
    e2e_p95_s: float | None


def text_quality(text: str) -> float:
    """Crude fluency score in [0, 1] for *simulated* feedback (not a quality measure).

    ``(word-like share of tokens) × (distinct share of words)``, × 0.3 when the text does not
    open like a sentence (capital letter, digit, quote or markdown); empty text scores 0.
    """
    tokens = text.split()
    if not tokens:
        return 0.0
    words = [t for t in tokens if _WORD.fullmatch(t.strip(".,!?;:'\"()"))]
    if not words:
        return 0.0
    score = (len(words) / len(tokens)) * (len({w.lower() for w in words}) / len(words))
    # an answer that does not open like a sentence reads as broken to a user
    return score if _SENTENCE_START.match(text) else score * 0.3


#: a simulated user calls an answer broken below this fluency (:func:`text_quality`)
BROKEN_BELOW = 0.5
#: P(thumbs-down) for a broken answer, and for one that reads fine (background dissatisfaction:
#: users down-vote a few fine answers too, so the baseline's rate is never zero)
DOWN_IF_BROKEN = 0.9
DOWN_IF_FINE = 0.03


def simulated_feedback_kind(text: str, rng: np.random.Generator) -> str:
    """``thumbs_down`` with probability :data:`DOWN_IF_BROKEN` when ``text_quality(text)`` is
    under :data:`BROKEN_BELOW` (the answer reads as broken), else :data:`DOWN_IF_FINE`;
    otherwise ``thumbs_up``. Users react to clearly broken answers, not to small differences
    in fluency: a step, not a proportional vote."""
    broken = text_quality(text) < BROKEN_BELOW
    p_down = DOWN_IF_BROKEN if broken else DOWN_IF_FINE
    return "thumbs_down" if rng.random() < p_down else "thumbs_up"


@dataclass
class _Tally:
    ok: int = 0
    rejected: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    variants: Counter[str] = field(default_factory=Counter)
    fb_ok: int = 0
    fb_failed: int = 0
    e2e: list[float] = field(default_factory=list)
    agent_runs: int = 0


async def _send_one(
    client: httpx.AsyncClient,
    req: PlannedRequest,
    opts: LoadOptions,
    prompt: str | None = None,
    extra_headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], str, str | None]:
    """Returns ``(status, headers, text, response_id)``."""
    body: dict[str, Any] = {
        "model": opts.model,
        "messages": [{"role": "user", "content": prompt or req.prompt.text}],
        "max_tokens": opts.max_tokens,
        "user": req.user_id,
        "stream": opts.stream,
    }
    headers = {"x-driftline-session": req.session_id, **(extra_headers or {})}
    if opts.api_key:
        headers["authorization"] = f"Bearer {opts.api_key}"
    url = f"{opts.gateway_url}/v1/chat/completions"
    if not opts.stream:
        resp = await client.post(url, json=body, headers=headers)
        data = resp.json() if resp.status_code == 200 else {}
        text = ((data.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        return resp.status_code, dict(resp.headers), text, data.get("id")
    async with client.stream("POST", url, json=body, headers=headers) as resp:
        acc = StreamAccumulator()
        splitter = SseSplitter()
        async for chunk in resp.aiter_raw():
            for ev in splitter.feed(chunk):
                data_b = event_data(ev)
                if data_b is not None:
                    acc.add(data_b)
        return resp.status_code, dict(resp.headers), acc.text(), acc.response_id


async def _feedback(
    client: httpx.AsyncClient,
    opts: LoadOptions,
    req: PlannedRequest,
    trace_id: str | None,
    response_id: str | None,
    kind: str,
) -> bool:
    payload: dict[str, Any] = {
        "kind": kind,
        "user_id": req.user_id,
        "feedback_id": str(uuid.uuid4()),
        "timestamp": datetime.now(UTC).isoformat(),
        "metadata": {"source": "simulated", "generator": "driftline load"},
    }
    if trace_id:
        payload["trace_id"] = trace_id
    else:
        payload["response_id"] = response_id
    try:
        resp = await client.post(
            f"{opts.collector_url}/api/v1/feedback",
            content=orjson.dumps(payload),
            headers={"content-type": "application/json"},
            timeout=5.0,
        )
    except httpx.HTTPError:
        return False
    return resp.status_code < 300


async def run_load(
    plan: list[PlannedRequest],
    opts: LoadOptions,
    *,
    rng: np.random.Generator,
    on_done: Callable[[PlannedRequest, int], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> LoadReport:
    """Send ``plan`` to the gateway and return counts and latency percentiles.

    Args:
        plan: from :func:`serving.workload.plan_load`.
        opts: target and pacing.
        rng: decides which responses get simulated feedback and its kind.
        on_done: called with ``(request, http_status)`` after each request (progress bars);
            status 0 means a transport error.
        transport: optional httpx transport (e.g. a custom one with retries).
    """
    tally = _Tally()
    sem = asyncio.Semaphore(opts.concurrency)
    limits = httpx.Limits(max_connections=opts.concurrency + 4)
    t_start = time.perf_counter()
    async with httpx.AsyncClient(
        timeout=opts.timeout_s, limits=limits, transport=transport
    ) as client:

        async def one(req: PlannedRequest) -> None:
            delay = req.at_s - (time.perf_counter() - t_start)
            if delay > 0:
                await asyncio.sleep(delay)
            async with sem:
                t0 = time.perf_counter()
                try:
                    if opts.collector_url and opts.agent_rate and rng.random() < opts.agent_rate:
                        (status, headers, text, rid), posted = await agent_run(
                            client,
                            req,
                            opts.collector_url,
                            lambda p, h: _send_one(client, req, opts, p, h),
                        )
                        tally.agent_runs += 1
                        tally.errors["agent_spans_not_sent"] += not posted
                    else:
                        status, headers, text, rid = await _send_one(client, req, opts)
                except httpx.HTTPError as exc:
                    tally.errors[type(exc).__name__] += 1
                    if on_done:
                        on_done(req, 0)
                    return
                if status == 200:
                    tally.ok += 1
                    tally.e2e.append(time.perf_counter() - t0)
                    tally.variants[headers.get("x-driftline-variant", "?")] += 1
                elif status == 429:
                    tally.rejected += 1
                else:
                    tally.errors[f"http_{status}"] += 1
                if on_done:
                    on_done(req, status)
            if status == 200 and opts.collector_url and rng.random() < opts.feedback_rate:
                kind = simulated_feedback_kind(text, rng)
                ok = await _feedback(
                    client, opts, req, headers.get("x-driftline-trace-id"), rid, kind
                )
                tally.fb_ok += ok
                tally.fb_failed += not ok

        await asyncio.gather(*(one(r) for r in plan))
    e2e = np.array(tally.e2e)
    return LoadReport(
        sent=len(plan),
        ok=tally.ok,
        rejected_429=tally.rejected,
        errors={k: v for k, v in tally.errors.items() if v},
        by_variant=dict(tally.variants),
        feedback_sent=tally.fb_ok,
        feedback_failed=tally.fb_failed,
        elapsed_s=time.perf_counter() - t_start,
        e2e_p50_s=float(np.percentile(e2e, 50)) if e2e.size else None,
        e2e_p95_s=float(np.percentile(e2e, 95)) if e2e.size else None,
    )
