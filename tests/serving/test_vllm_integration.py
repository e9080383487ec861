"""Real vLLM (CPU build) + LoRA adapters behind the gateway, traced into a real collector.

Starts ``driftline collector --dev`` (subprocess, SQLite), vLLM from the serving venv with the
demo adapters and ``--otlp-traces-endpoint`` at the collector's gRPC port, and the gateway
in-process exporting its CLIENT spans over OTLP/HTTP. Each request must become ONE call record
that merges the gateway span (variant, text, client TTFT) with vLLM's ``llm_request`` child
(queue / prefill / decode).

Skipped only when the serving venv is absent AND ``CI`` is not set; in CI a missing venv fails.
Prepare with ``make serving``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from serving.asgi_thread import ServerThread
from serving.config import GatewayConfig, Rollout
from serving.engine import EngineProcess
from serving.gateway import create_gateway_app
from serving.install import has_gpu
from serving.launch import build_launch
from serving.prepare import prepare_model
from serving.settings import EngineSettings, GatewaySettings
from serving.telemetry import make_tracer_provider
from tests.support import free_port

REPO = Path(__file__).resolve().parents[2]
STATE_DIR = REPO / ".driftline"
VENV_PY = STATE_DIR / "vllm-venv" / "bin" / "python"
BASE = "smollm2-135m-instruct"

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not VENV_PY.exists() and not os.environ.get("CI"),
        reason="serving venv absent (run `make serving`); required when CI is set",
    ),
]


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not ready after {timeout_s} s")


@dataclass
class Stack:
    collector_url: str
    gateway_url: str
    flush: Any


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    assert VENV_PY.exists(), "serving venv missing: run `make serving` (CI is set)"
    tmp = tmp_path_factory.mktemp("vllm")
    http_port, grpc_port, engine_port = free_port(), free_port(), free_port()
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": f"sqlite:///{tmp}/d.db"}
    collector = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "driftline.cli",
            "collector",
            "--dev",
            "--port",
            str(http_port),
            "--grpc-port",
            str(grpc_port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=REPO,
        stdout=(tmp / "collector.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    engine: EngineProcess | None = None
    server: ServerThread | None = None
    provider = None
    try:
        collector_url = f"http://127.0.0.1:{http_port}"
        _wait_http(f"{collector_url}/healthz", 60, collector)
        es = EngineSettings(
            state_dir=STATE_DIR,
            engine_port=engine_port,
            otlp_traces_endpoint=f"http://127.0.0.1:{grpc_port}",
            otlp_protocol="grpc",
        )
        prepare_model(es)
        engine = EngineProcess(build_launch(es, gpu=has_gpu()), log_path=tmp / "vllm.log")
        engine.start()
        engine.wait_ready(es.startup_timeout_s)
        gs = GatewaySettings(
            engine_url=engine.spec.url,
            collector_url=collector_url,
            gateway_otlp_endpoint=f"{collector_url}/v1/traces",
            gateway_otlp_protocol="http/protobuf",
        )
        provider = make_tracer_provider(gs)
        cfg = GatewayConfig(
            rollouts={
                "support-bot": Rollout(
                    "support-bot", {BASE: 0.5, "candidate-good": 0.25, "candidate-bad": 0.25}
                )
            },
            default_rollout="support-bot",
        )
        app = create_gateway_app(gs, cfg, tracer_provider=provider, rng=np.random.default_rng(0))
        server = ServerThread(app)
        yield Stack(
            collector_url=collector_url, gateway_url=server.start(), flush=provider.force_flush
        )
    finally:
        if server is not None:
            server.stop()
        if provider is not None:
            provider.shutdown()
        if engine is not None:
            engine.stop()
        collector.terminate()
        collector.wait(timeout=20)


def _calls(stack: Stack, trace_id: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{stack.collector_url}/api/v1/calls", params={"trace_id": trace_id}, timeout=5)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def _stream_chat(stack: Stack, model: str, user: str, prompt: str) -> tuple[str, str, str]:
    body = {
        "model": model,
        "user": user,
        "stream": True,
        "max_tokens": 24,
        "temperature": 0,
        "messages": [{"role": "user", "content": prompt}],
    }
    text = []
    with httpx.stream(
        "POST",
        f"{stack.gateway_url}/v1/chat/completions",
        json=body,
        headers={"x-driftline-session": f"{user}-s1"},
        timeout=120,
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for ch in json.loads(line[6:])["choices"]:
                    text.append(ch["delta"].get("content") or "")
        return r.headers["x-driftline-trace-id"], r.headers["x-driftline-variant"], "".join(text)


def test_each_request_is_one_merged_call_record(stack: Stack) -> None:
    prompt = "How do I reset my password?"
    sent = [
        _stream_chat(stack, m, f"user-{m}", prompt)
        for m in (BASE, "candidate-good", "candidate-bad")
    ]
    sent.append(_stream_chat(stack, "support-bot", "user-rollout", prompt))
    stack.flush()
    records: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 90  # vLLM exports its spans in ~5 s batches
    while time.monotonic() < deadline and len(records) < len(sent):
        for trace_id, _, _ in sent:
            items = _calls(stack, trace_id)
            if items and items[0].get("queue_s") is not None:
                records[trace_id] = items[0]
        time.sleep(1)
    assert len(records) == len(sent), f"merged records: {len(records)} of {len(sent)}"
    for trace_id, variant, text in sent:
        items = _calls(stack, trace_id)
        assert len(items) == 1, items  # gateway span + vLLM llm_request -> ONE call record
        rec = items[0]
        assert rec["variant"] == variant and rec["request_model"] == variant
        assert rec["response_model"] == variant
        assert rec["output_text"] == text and text
        assert prompt in (rec["input_text"] or "")
        assert rec["input_tokens"] > 0 and rec["output_tokens"] > 0
        for key in ("ttft_s", "queue_s", "prefill_s", "decode_s", "tpot_s", "e2e_s"):
            assert rec[key] is not None and rec[key] >= 0, (key, rec[key])
        assert rec["ttft_s"] <= rec["e2e_s"]
        assert rec["itl_p50_s"] is not None
    by_variant = {v: t for _, v, t in sent[:3]}
    assert by_variant["candidate-bad"] != by_variant[BASE]  # the degrading adapter is served
    rollout_rec = records[sent[3][0]]
    assert rollout_rec["rollout"] == "support-bot"
