"""Fill a driftline store with a realistic demo day, through the collector's own front doors.

Calls arrive as OTLP/HTTP JSON spans POSTed to ``/v1/traces`` and feedback as
``/api/v1/feedback/batch`` on an ``httpx.Client`` pointed at a running collector (or a FastAPI
``TestClient`` of ``driftline.app.create_app``, which is an ``httpx.Client`` too); nothing inserts
call rows by hand. Three traffic sources, all synthetic and labelled ``driftline.seed=true``:

- ``support-bot``: OpenAI semconv client spans (``gpt-4o-mini`` / ``gpt-4o``), with captured text;
- ``support-gateway``: driftline gateway spans of rollout ``support-assistant`` (variants ``base``
  and ``lora-v2``) with their vLLM ``llm_request`` child (queue / prefill / decode), self-hosted
  model ``qwen2.5-0.5b-instruct`` (no list price: the calls are flagged ``unpriced``);
- ``research-agent``: ``claude-sonnet-4`` chat spans.

Engine samples and alerts have no ingest API: :mod:`driftline.demo.seed_store` writes them through
the collector's parser and alert functions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from driftline.demo.seed_text import PROMPTS, SHIFT_PROMPTS, pick_answer

SPANS_PER_POST = 400
ROLLOUT = "support-assistant"
BASELINE, CANDIDATE = "base", "lora-v2"
SELF_HOSTED_MODEL = "qwen2.5-0.5b-instruct"
#: the service whose calls the self-hosted replica serves (GPU cost is amortised over them)
SELF_HOSTED_SERVICE = "support-gateway"


@dataclass(frozen=True, slots=True)
class SeedCall:
    """One generated call: ids, start time (unix ns), where it went, and its feedback."""

    trace_id: str
    span_id: str
    start_unix_nano: int
    service: str
    variant: str | None
    failed: bool
    shifted: bool = False


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What :func:`seed_calls` sent (and the collector acknowledged)."""

    calls: tuple[SeedCall, ...]
    feedback_events: int


def _hex(rng: np.random.Generator, nbytes: int) -> str:
    return rng.bytes(nbytes).hex()


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in d.items() if v is not None]


def _span(
    trace_id: str,
    span_id: str,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attrs: dict[str, Any],
    *,
    parent: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": _attrs(attrs),
        "status": {"code": 2, "message": error} if error else {"code": 1},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _messages(prompt: str, answer: str | None, finish: str) -> dict[str, str]:
    out = {
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
        )
    }
    if answer is not None:
        out["gen_ai.output.messages"] = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": answer}],
                    "finish_reason": finish,
                }
            ]
        )
    return out


Batch = dict[tuple[str, str], list[dict[str, Any]]]  # (service, scope) -> spans


def _one_call(rng: np.random.Generator, start_ns: int, batch: Batch, shift: bool) -> SeedCall:
    """Generate one call's spans into ``batch``; latencies from lognormal / uniform draws.

    ``shift``: the call falls in the shifted period, where most support-gateway prompts are
    pasted sync-failure logs (longer prompts, one topic, more truncated answers).
    """
    trace_id, span_id = _hex(rng, 16), _hex(rng, 8)
    topic, prompt = PROMPTS[int(rng.integers(len(PROMPTS)))]
    in_tokens = int(rng.integers(40, 900))
    u_answer = float(rng.random())
    u_shift = float(rng.random())
    out_tokens = int(rng.integers(12, 380))
    ttft = float(rng.lognormal(-1.9, 0.45))
    tpot = float(rng.uniform(0.012, 0.035))
    finish = "length" if rng.random() < 0.06 else "stop"
    u = rng.random()
    common = {"gen_ai.operation.name": "chat", "driftline.seed": True, "topic": topic}
    if u < 0.45:  # OpenAI client spans
        service = "support-bot"
        model = "gpt-4o-mini" if rng.random() < 0.8 else "gpt-4o"
        err = rng.random()
        error = "RateLimitError" if err < 0.015 else ("APIConnectionError" if err < 0.02 else None)
        if model == "gpt-4o":
            ttft *= 1.4
        e2e = ttft + tpot * (out_tokens - 1)
        user = f"user-{int(rng.integers(1, 80))}"
        attrs = {
            **common,
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.response.model": f"{model}-2024-08-06" if model == "gpt-4o" else model,
            "user.id": user,
            # one conversation per user and hour (no extra random draw: the seed stays stable)
            "gen_ai.conversation.id": f"{user}-h{start_ns // 3_600_000_000_000}",
            "error.type": error,
            **_messages(
                prompt,
                None if error else pick_answer(u_answer, topic, prompt, candidate=False),
                finish,
            ),
        }
        if not error:
            attrs |= {
                "gen_ai.usage.input_tokens": in_tokens,
                "gen_ai.usage.output_tokens": out_tokens,
                "gen_ai.usage.cached_input_tokens": int(in_tokens * rng.uniform(0, 0.5)),
                "gen_ai.response.time_to_first_chunk": ttft,
                "gen_ai.response.finish_reasons": [finish],
            }
        end = start_ns + int((e2e if not error else 0.35) * 1e9)
        batch.setdefault((service, "opentelemetry.instrumentation.openai_v2"), []).append(
            _span(trace_id, span_id, f"chat {model}", 3, start_ns, end, attrs, error=error)
        )
        return SeedCall(trace_id, span_id, start_ns, service, None, error is not None)
    if u < 0.9:  # gateway span + vLLM llm_request child
        service = "support-gateway"
        variant = CANDIDATE if rng.random() < 0.2 else BASELINE
        if variant == CANDIDATE:
            ttft *= 1.12
        shifted = shift and u_shift < 0.7
        if shifted:
            topic, prompt = SHIFT_PROMPTS[int(u_shift * 10) % len(SHIFT_PROMPTS)]
            in_tokens = int(in_tokens * 1.6 + 600)
            finish = "length" if u_shift < 0.15 else finish
        queue = float(rng.exponential(0.012))
        prefill = max(ttft - queue, 0.004)
        decode = tpot * (out_tokens - 1)
        e2e = queue + prefill + decode
        error = "429" if rng.random() < 0.01 else None
        g_attrs = {
            **common,
            "gen_ai.provider.name": "vllm",
            "gen_ai.request.model": SELF_HOSTED_MODEL,
            "driftline.rollout": ROLLOUT,
            "driftline.variant": variant,
            "user.id": f"user-{int(rng.integers(1, 80))}",
            "error.type": error,
            **_messages(
                prompt,
                None
                if error
                else pick_answer(u_answer, topic, prompt, candidate=variant == CANDIDATE),
                finish,
            ),
        }
        if error:
            end = start_ns + int(0.004 * 1e9)
            batch.setdefault((service, "driftline.gateway"), []).append(
                _span(trace_id, span_id, f"chat {variant}", 3, start_ns, end, g_attrs, error=error)
            )
            return SeedCall(trace_id, span_id, start_ns, service, variant, True, shifted)
        g_attrs |= {
            "gen_ai.usage.input_tokens": in_tokens,
            "gen_ai.usage.output_tokens": out_tokens,
            "gen_ai.response.time_to_first_chunk": ttft + 0.002,
            "gen_ai.response.finish_reasons": [finish],
        }
        child = _hex(rng, 8)
        e_start = start_ns + 1_000_000
        e_attrs = {
            "gen_ai.latency.time_in_queue": queue,
            "gen_ai.latency.time_in_model_prefill": prefill,
            "gen_ai.latency.time_in_model_decode": decode,
            "gen_ai.latency.time_to_first_token": queue + prefill,
            "gen_ai.latency.e2e": e2e,
            "gen_ai.usage.prompt_tokens": in_tokens,
            "gen_ai.usage.completion_tokens": out_tokens,
            "gen_ai.request.id": f"cmpl-{child}",
        }
        batch.setdefault((f"{service}-vllm", "vllm.llm_engine"), []).append(
            _span(
                trace_id,
                child,
                "llm_request",
                2,
                e_start,
                e_start + int(e2e * 1e9),
                e_attrs,
                parent=span_id,
            )
        )
        g_end = e_start + int((e2e + 0.003) * 1e9)
        batch.setdefault((service, "driftline.gateway"), []).append(
            _span(trace_id, span_id, f"chat {variant}", 3, start_ns, g_end, g_attrs)
        )
        return SeedCall(trace_id, span_id, start_ns, service, variant, False, shifted)
    service = "research-agent"
    ttft *= 1.8
    e2e = ttft + tpot * 1.3 * (out_tokens - 1)
    attrs = {
        **common,
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4",
        "gen_ai.usage.input_tokens": in_tokens * 3,
        "gen_ai.usage.output_tokens": out_tokens,
        "gen_ai.response.time_to_first_chunk": ttft,
        "gen_ai.response.finish_reasons": [finish],
        **_messages(prompt, pick_answer(u_answer, topic, prompt, candidate=False), finish),
    }
    end = start_ns + int(e2e * 1e9)
    batch.setdefault((service, "opentelemetry.instrumentation.anthropic"), []).append(
        _span(trace_id, span_id, "chat claude-sonnet-4", 3, start_ns, end, attrs)
    )
    return SeedCall(trace_id, span_id, start_ns, service, None, False)


def _payload(batch: Batch) -> dict[str, Any]:
    by_service: dict[str, list[dict[str, Any]]] = {}
    for (service, scope), spans in batch.items():
        by_service.setdefault(service, []).append({"scope": {"name": scope}, "spans": spans})
    return {
        "resourceSpans": [
            {"resource": {"attributes": _attrs({"service.name": s})}, "scopeSpans": scopes}
            for s, scopes in by_service.items()
        ]
    }


def _feedback(rng: np.random.Generator, c: SeedCall) -> Iterator[dict[str, Any]]:
    """Feedback events of one call: thumbs (worse for errors and the candidate), ratings..."""
    if rng.random() > 0.35:
        return
    p_down = 0.6 if c.failed else (0.22 if c.variant == CANDIDATE else 0.12)
    at = c.start_unix_nano / 1e9 + float(rng.uniform(5, 120))
    base = {"trace_id": c.trace_id, "span_id": c.span_id, "timestamp": at}
    vote = "thumbs_down" if rng.random() < p_down else "thumbs_up"
    yield {**base, "kind": vote, "metadata": {"source": "seed"}}
    if rng.random() < 0.25:
        yield {
            **base,
            "kind": "rating",
            "value": float(rng.integers(2, 6) if vote == "thumbs_up" else rng.integers(1, 4)),
        }
    if vote == "thumbs_down" and rng.random() < 0.3:
        yield {**base, "kind": "regenerate"}
    if vote == "thumbs_down" and rng.random() < 0.1:
        yield {**base, "kind": "escalation", "comment": "customer asked for a human"}
    if rng.random() < 0.05:
        yield {**base, "kind": "comment", "comment": "answer was too long"}


def _post(client: httpx.Client, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    r = client.post(path, json=body, headers=headers)
    if r.status_code >= 300:
        raise RuntimeError(f"POST {path}: HTTP {r.status_code} {r.text[:300]}")
    partial = r.json().get("partialSuccess") or {} if r.content else {}
    if int(partial.get("rejectedSpans") or 0):
        raise RuntimeError(f"POST {path}: rejected spans: {partial}")


def seed_calls(
    client: httpx.Client,
    rng: np.random.Generator,
    *,
    n_calls: int = 600,
    hours: float = 6.0,
    now_s: float | None = None,
    api_key: str | None = None,
    wait_s: float = 60.0,
    shift_last_s: float = 7200.0,
) -> SeedResult:
    """Send ``n_calls`` calls spread uniformly over the ``hours`` before ``now_s``, plus feedback.

    Args:
        client: ``httpx.Client`` whose base URL is the collector (``http://127.0.0.1:4318``) or a
            ``TestClient`` of the collector app.
        rng: the only source of randomness.
        api_key: ``dl_...`` key with the ``ingest`` role (None for a ``--dev`` collector).
        wait_s: how long to wait, in seconds, for the writer to store the calls.
        shift_last_s: in the last ``shift_last_s`` seconds before ``now_s`` 70 % of the
            support-gateway prompts are pasted sync-failure logs (a topic shift with longer
            prompts and more truncated answers: what the seeded drift run flags); 0 disables it.

    Raises:
        ValueError: ``n_calls`` < 1, ``hours`` not positive or ``shift_last_s`` negative.
        RuntimeError: the collector refused a request or did not store the calls in ``wait_s``.
    """
    if n_calls < 1:
        raise ValueError("n_calls must be at least 1")
    if not hours > 0:
        raise ValueError("hours must be positive")
    if shift_last_s < 0:
        raise ValueError("shift_last_s must not be negative")
    now = time.time() if now_s is None else now_s
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    starts = np.sort(rng.uniform(now - hours * 3600.0, now - 60.0, size=n_calls))
    calls: list[SeedCall] = []
    batch: Batch = {}
    last_ids: list[str] = []
    for i, start in enumerate(starts):
        calls.append(_one_call(rng, int(start * 1e9), batch, start >= now - shift_last_s))
        if sum(len(v) for v in batch.values()) >= SPANS_PER_POST or i == n_calls - 1:
            _post(client, "/v1/traces", _payload(batch), headers)
            last_ids.append(calls[-1].trace_id)
            batch = {}
    deadline = time.monotonic() + wait_s
    for trace_id in last_ids:
        while True:
            r = client.get("/api/v1/calls", params={"trace_id": trace_id}, headers=headers)
            if r.status_code == 200 and r.json()["items"]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"calls not stored within {wait_s} s (trace {trace_id})")
            time.sleep(0.1)
    events = [ev for c in calls for ev in _feedback(rng, c)]
    for i in range(0, len(events), 1000):
        _post(client, "/api/v1/feedback/batch", {"items": events[i : i + 1000]}, headers)
    return SeedResult(calls=tuple(calls), feedback_events=len(events))
