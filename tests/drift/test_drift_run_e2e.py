"""End to end: calls ingested through /v1/traces, `driftline drift run --once`, runs via the API.

Reference window: Dolly prompts without context; shifted window: half of the prompts carry
pasted context (tests/fixtures/data/dolly15k_prompts.jsonl.gz, ``has_context``); stationary
window: more prompts without context. Prompts travel as ``gen_ai.input.messages`` and their
length as ``gen_ai.usage.input_tokens`` (≈ 4 characters per token).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.support.fixtures import dolly_rows

JSON_CT = {"content-type": "application/json"}
HOUR = 3600 * 10**9
N = 240  # calls per window


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, list):
        return {
            "key": key,
            "value": {"arrayValue": {"values": [{"stringValue": v} for v in value]}},
        }
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"doubleValue": value}}


def _span(rng: np.random.Generator, i: int, start_ns: int, prompt: str) -> dict[str, Any]:
    out_tokens = int(rng.integers(20, 200))
    ttft = float(rng.gamma(4.0, 0.05))
    e2e = ttft + out_tokens * 0.02
    answer = "Sure. " + " ".join(["The answer depends on the details."] * (out_tokens // 20 + 1))
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": max(1, round(len(prompt) / 4)),
        "gen_ai.usage.output_tokens": out_tokens,
        "gen_ai.response.time_to_first_chunk": ttft,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": answer}],
                    "finish_reason": "stop",
                }
            ]
        ),
    }
    return {
        "traceId": f"{i:032x}",
        "spanId": f"{i + 1:016x}",
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + int(e2e * 1e9)),
        "status": {"code": 1},
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }


def _ingest(client: TestClient, spans: list[dict[str, Any]]) -> None:
    resource = {"attributes": [_attr("service.name", "qa-bot")]}
    for k in range(0, len(spans), 200):
        body = {
            "resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans[k : k + 200]}]}]
        }
        r = client.post("/v1/traces", content=json.dumps(body).encode(), headers=JSON_CT)
        assert r.status_code == 200, r.text


@pytest.fixture(autouse=True)
def _no_scheduled_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's own drift job would add rolling runs to the listing under test."""
    monkeypatch.setenv("DRIFTLINE_DRIFT_ENABLED", "false")


@pytest.fixture
def loaded(client: TestClient) -> tuple[TestClient, int]:
    """Three windows of N calls each: reference, stationary, shifted (base = 4 h ago)."""
    plain: list[str] = []
    context: list[str] = []
    for row in dolly_rows():
        (context if row["has_context"] else plain).append(row["prompt"])
    rng = np.random.default_rng(2024)
    plain = [plain[i] for i in rng.permutation(len(plain))]
    context = [context[i] for i in rng.permutation(len(context))]
    windows = [
        plain[:N],
        plain[N : 2 * N],
        context[: N // 2] + plain[2 * N : 2 * N + N // 2],
    ]
    base = time.time_ns() - 4 * HOUR
    spans = []
    for w, prompts in enumerate(windows):
        order = rng.permutation(len(prompts))
        for j, idx in enumerate(order):
            start = base + w * HOUR + 10**9 + int(j * (HOUR - 2 * 10**9) / len(prompts))
            spans.append(_span(rng, w * N + j + 1, start, prompts[idx]))
    _ingest(client, spans)
    return client, base


def _run(client: TestClient, base: int, current: int, seed: int) -> dict[str, Any]:
    url = client.app.state.driftline.settings.database_url  # type: ignore[attr-defined]
    args = [
        "drift", "run", "--once", "--database-url", url, "--seed", str(seed),
        "--reference", f"{base / 1e9}..{(base + HOUR) / 1e9}",
        "--since", str((base + current * HOUR) / 1e9),
        "--until", str((base + (current + 1) * HOUR) / 1e9),
    ]  # fmt: skip
    # a separate process, as `driftline drift run` runs beside a collector in production
    res = subprocess.run(
        [sys.executable, "-m", "driftline.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert res.returncode == 0, res.stdout + res.stderr
    match = re.search(r"\brun ([0-9a-f]{32}) tenant=", res.stdout)
    assert match, res.stdout
    run_id = match.group(1)
    r = client.get(f"/api/v1/drift/runs/{run_id}")
    assert r.status_code == 200, r.text
    run: dict[str, Any] = r.json()
    return run


def _result(run: dict[str, Any], signal: str) -> dict[str, Any]:
    (row,) = [r for r in run["results"] if r["signal"] == signal]
    return row


def test_topic_shift_flags_input_length_and_embeddings_and_stationary_does_not(
    loaded: tuple[TestClient, int],
) -> None:
    client, base = loaded
    shifted = _run(client, base, 2, seed=1)
    assert shifted["status"] == "ok"
    stored = [
        len(
            client.get(
                "/api/v1/calls",
                params={"since": (base + w * HOUR) / 1e9, "until": (base + (w + 1) * HOUR) / 1e9,
                        "limit": 1000},
            ).json()["items"]
        )
        for w in (0, 2)
    ]  # fmt: skip
    assert stored == [N, N]
    assert [shifted["n_reference_calls"], shifted["n_current_calls"]] == stored
    assert shifted["reference"]["kind"] == "range"
    tokens = _result(shifted, "input_tokens")
    assert tokens["segment"] is None or tokens["segment_keys"]["model"] == "gpt-4o"
    assert tokens["method"] == "block_rank_t" and tokens["drifted"] is True
    assert tokens["pvalue"] < 1e-6 and tokens["effect_kind"] == "normed_wasserstein"
    assert tokens["current_summary"]["mean"] > 3 * tokens["reference_summary"]["mean"]
    hist = tokens["histogram"]
    assert hist["type"] == "bins"
    assert [sum(hist["reference"]), sum(hist["current"])] == stored
    if "prompt_embedding" not in shifted["skipped"]:
        # 128 sampled prompts per window: the centroid permutation test flags the shift; the
        # classifier test sees it too (AUC above chance) but is the weaker test at this size
        centroid = _result(shifted, "prompt_centroid")
        assert centroid["drifted"] is True, centroid
        c2st = _result(shifted, "prompt_embedding")
        assert c2st["n_reference"] == c2st["n_current"] == 128
        assert c2st["statistic"] > 0.55, c2st
    # nothing else about the traffic changed
    for signal in ("output_tokens", "ttft_s", "finish_reason", "refusal", "empty_output"):
        assert _result(shifted, signal)["drifted"] is False, signal
    # thumbs and judge scores were never sent: no data, no verdict (never a made-up 0)
    thumbs = _result(shifted, "thumbs_down")
    assert thumbs["insufficient_data"] is True and thumbs["drifted"] is None
    assert thumbs["verdict"] == "insufficient_data"
    assert _result(shifted, "refusal")["verdict"] == "no_drift"  # tested, no drift
    assert tokens["verdict"] == "drift"
    assert shifted["n_insufficient_data"] >= 1
    assert thumbs["n_reference_null"] == stored[0]

    # each drifted result became one drift_detected event for the alert rules
    from sqlalchemy import select

    from alerts.events import AlertEventRow

    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        events = conn.execute(
            select(AlertEventRow.labels, AlertEventRow.resolved).where(
                AlertEventRow.kind == "drift_detected"
            )
        ).all()
    drifted = {r["signal"] for r in shifted["results"] if r["drifted"]}
    assert sorted(e.labels["signal"] for e in events) == sorted(drifted)
    assert not any(e.resolved for e in events)

    stationary = _run(client, base, 1, seed=1)
    with engine.connect() as conn:  # the drift cleared: resolved events for the same labels
        resolved = conn.execute(
            select(AlertEventRow.labels).where(AlertEventRow.resolved.is_(True))
        ).all()
    assert sorted(e.labels["signal"] for e in resolved) == sorted(drifted)
    assert stationary["status"] == "ok" and stationary["n_drifted"] == 0
    assert _result(stationary, "input_tokens")["drifted"] is False

    page = client.get("/api/v1/drift/runs", params={"limit": 1}).json()
    assert [i["run_id"] for i in page["items"]] == [stationary["run_id"]]
    page2 = client.get("/api/v1/drift/runs", params={"cursor": page["next_cursor"]}).json()
    assert [i["run_id"] for i in page2["items"]] == [shifted["run_id"]]
    assert page2["next_cursor"] is None
    only = client.get(
        f"/api/v1/drift/runs/{shifted['run_id']}", params={"drifted_only": True}
    ).json()
    assert {r["signal"] for r in only["results"]} >= {"input_tokens"}
    assert all(r["drifted"] is True and r["verdict"] == "drift" for r in only["results"])


def test_unknown_run_is_404_and_bad_cursor_400(client: TestClient) -> None:
    r = client.get("/api/v1/drift/runs/nope")
    assert r.status_code == 404 and r.json()["error"]["code"]
    r = client.get("/api/v1/drift/runs", params={"cursor": "%%%"})
    assert r.status_code == 400
    assert client.get("/api/v1/drift/runs").json() == {"items": [], "next_cursor": None}
