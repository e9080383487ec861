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
}


class FakeOpenAI(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: a fixed answer, as JSON or as an SSE stream."""

    def log_message(self, *_args: Any) -> None:
        pass

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["content-length"])))
        base = {"id": "chatcmpl-1", "created": int(time.time()), "model": "gpt-4o-mini-2024-07-18"}
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


def _run_app(library: str, collector: LiveCollector, openai_url: str) -> None:
    py = _venv(library, PINS[library])
    out = subprocess.run(
        [py, HERE / "openai_app.py", collector.http_url, openai_url, library],
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
