"""Real instrumentations around the real ``openai`` client, each in its own venv with pinned
versions, against a fake OpenAI HTTP server (a remote edge) and a live collector: the content,
finish reasons and TTFT each library sends end up in the call records.

Slow (a venv, installs): ``pytest -m slow tests/collector/test_instrumentations.py``.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import venv
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveCollector, wait_for

HERE = Path(__file__).parent / "instrumented"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "instrumented-venvs"
PINS = {
    "openai-v2": [
        "openai==1.109.1",
        "opentelemetry-sdk==1.39.1",
        "opentelemetry-exporter-otlp-proto-http==1.39.1",
        "opentelemetry-instrumentation-openai-v2==2.4b0",
    ],
    "openllmetry": [
        "openai==1.109.1",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-http==1.45.2",
        "opentelemetry-instrumentation-openai==0.62.4",
    ],
    # 0.1.60 and later instrument only openai >= 2.8
    "openinference": [
        "openai==1.109.1",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-proto-http==1.45.2",
        "openinference-instrumentation-openai==0.1.59",
        "openinference-instrumentation==0.1.72",
    ],
    # openlit pulls ~60 packages (anthropic, boto3, the OTel web-framework instrumentations;
    # ~150 MB, no torch); without the OTel pins pip cannot resolve them
    "openlit": [
        "openai==1.109.1",
        "opentelemetry-sdk==1.39.1",
        "opentelemetry-exporter-otlp-proto-http==1.39.1",
        "opentelemetry-instrumentation==0.60b1",
        "openlit==1.45.0",
    ],
}
#: the dated model the fake server answers for a model name (others: the name itself)
MODEL_VERSIONS = {"gpt-4o-mini": "gpt-4o-mini-2024-07-18"}


class FakeOpenAI(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: a fixed answer, as JSON or as an SSE stream."""

    def log_message(self, *_args: Any) -> None:
        pass

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["content-length"])))
        model = MODEL_VERSIONS.get(req["model"], req["model"])
        base = {"id": "chatcmpl-1", "created": int(time.time()), "model": model}
        usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        if not req.get("stream"):
            body = {
                **base,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Hello."},
                    }
                ],
                "usage": usage,
            }
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        chunks: list[dict[str, Any]] = [
            {"index": 0, "delta": {"role": "assistant", "content": w}, "finish_reason": None}
            for w in ("one, ", "two, ", "three")
        ]
        chunks.append({"index": 0, "delta": {}, "finish_reason": "stop"})
        for ch in chunks:
            doc = {**base, "id": "chatcmpl-2", "object": "chat.completion.chunk", "choices": [ch]}
            self.wfile.write(f"data: {json.dumps(doc)}\n\n".encode())
            self.wfile.flush()
            time.sleep(0.02)
        doc = {
            **base,
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": usage,
        }
        self.wfile.write(f"data: {json.dumps(doc)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def fake_openai() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _venv(library: str, pins: list[str]) -> Path:
    """A venv with exactly ``pins``, kept under ``.cache/instrumented-venvs`` (re-created when
    the pins change)."""
    env = CACHE / library
    py = env / "bin" / "python"
    stamp = env / "pins.txt"
    if not (py.exists() and stamp.exists() and stamp.read_text() == "\n".join(pins)):
        venv.EnvBuilder(with_pip=True, clear=True).create(env)
        subprocess.run([py, "-m", "pip", "install", "-q", *pins], check=True, timeout=600)
        stamp.write_text("\n".join(pins))
    return py


def _run_app(
    library: str, collector: LiveCollector, openai_url: str, model: str = "gpt-4o-mini"
) -> None:
    py = _venv(library, PINS[library])
    out = subprocess.run(
        [py, HERE / "openai_app.py", collector.http_url, openai_url, library, model],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "one, two, three" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_openai_v2_content_events(live_collector: LiveCollector, fake_openai: str) -> None:
    """Prompts, answers and finish reasons arrive as log records (``/v1/logs``)."""
    _run_app("openai-v2", live_collector, fake_openai)
    calls = wait_for(
        lambda: (
            (c := live_collector.calls()) and len(c) == 2 and all(x["output_text"] for x in c) and c
        )
    )
    by_id = {c["response_id"]: c for c in calls}
    plain, streamed = by_id["chatcmpl-1"], by_id["chatcmpl-2"]
    assert plain["input_text"] == "system: Be brief.\nuser: Hi?"
    assert plain["output_text"] == "Hello." and plain["finish_reasons"] == ["stop"]
    assert streamed["input_text"] == "Count to three."
    assert streamed["output_text"] == "one, two, three" and streamed["finish_reasons"] == ["stop"]
    assert streamed["input_tokens"] == 12 and streamed["dialect"].startswith("semconv")


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_openllmetry_streaming_ttft_from_chunk_events(
    live_collector: LiveCollector, fake_openai: str
) -> None:
    """OpenLLMetry puts no TTFT attribute on a streaming span, only chunk events."""
    _run_app("openllmetry", live_collector, fake_openai)
    calls = wait_for(lambda: (c := live_collector.calls()) and len(c) == 2 and c)
    streamed = next(c for c in calls if c["output_text"] == "one, two, three")
    # OpenLLMetry 0.62 writes semconv keys (gen_ai.provider.name, gen_ai.usage.input_tokens)
    assert streamed["dialect"] in ("openllmetry", "semconv")
    assert streamed["finish_reasons"] == ["stop"]
    assert streamed["input_text"] == "Count to three."
    assert streamed["ttft_s"] is not None and "ttft_from_event" in streamed["flags"]
    assert 0 < streamed["ttft_s"] <= streamed["e2e_s"]


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_openinference_content_and_first_token_event(
    live_collector: LiveCollector, fake_openai: str
) -> None:
    """OpenInference: ``llm.*`` attributes; a streaming span's TTFT only as the "First Token
    Stream Event"; the response id only inside ``output.value``."""
    _run_app("openinference", live_collector, fake_openai)
    calls = wait_for(lambda: (c := live_collector.calls()) and len(c) == 2 and c)
    by_id = {c["response_id"]: c for c in calls}
    plain, streamed = by_id["chatcmpl-1"], by_id["chatcmpl-2"]
    for c in (plain, streamed):
        assert c["dialect"] == "openinference" and c["finish_reasons"] == ["stop"]
        assert c["request_model"] == "gpt-4o-mini"
        assert c["response_model"] == "gpt-4o-mini-2024-07-18"
        assert (c["input_tokens"], c["output_tokens"]) == (12, 3)
    assert plain["input_text"] == "system: Be brief.\nuser: Hi?"
    assert plain["output_text"] == "Hello." and plain["ttft_s"] is None
    assert streamed["input_text"] == "Count to three."
    assert streamed["output_text"] == "one, two, three"
    assert streamed["ttft_s"] is not None and "ttft_from_event" in streamed["flags"]
    assert 0 < streamed["ttft_s"] <= streamed["e2e_s"]


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_openlit_content_ttft_and_unpriced_cost(
    live_collector: LiveCollector, fake_openai: str
) -> None:
    """OpenLIT: semconv content attributes (the system prompt also in the messages), TTFT as
    ``gen_ai.server.time_to_first_token``, and ``gen_ai.usage.cost = 0`` for a model it cannot
    price, which is stored as unknown. It also sends operation-details log records (the
    streaming one without trace and span ids) and httpx client spans (not LLM calls)."""
    _run_app("openlit", live_collector, fake_openai, model="acme-chat-1")
    calls = wait_for(lambda: (c := live_collector.calls()) and len(c) == 2 and c)
    by_id = {c["response_id"]: c for c in calls}
    plain, streamed = by_id["chatcmpl-1"], by_id["chatcmpl-2"]
    for c in (plain, streamed):
        assert c["dialect"] == "openlit" and c["finish_reasons"] == ["stop"]
        assert c["request_model"] == "acme-chat-1"
        assert (c["input_tokens"], c["output_tokens"]) == (12, 3)
        assert c["cost_usd"] is None
        assert {"unpriced", "reported_cost_ignored"} <= set(c["flags"])
        assert c["ttft_s"] is not None and "ttft_from_event" not in c["flags"]
        assert 0 < c["ttft_s"] <= c["e2e_s"]
    assert plain["input_text"] == "system: Be brief.\nuser: Hi?"
    assert plain["output_text"] == "Hello."
    assert streamed["input_text"] == "Count to three."
    assert streamed["output_text"] == "one, two, three"
