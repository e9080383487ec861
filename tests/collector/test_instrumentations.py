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
PINS = {
    "openai-v2": [
        "openai==1.109.1",
        "opentelemetry-sdk==1.39.1",
        "opentelemetry-exporter-otlp-proto-http==1.39.1",
        "opentelemetry-instrumentation-openai-v2==2.4b0",
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


def _venv(tmp_path: Path, pins: list[str]) -> Path:
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    py = env / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", *pins], check=True, timeout=600)
    return py


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_openai_v2_content_events(
    tmp_path: Path, live_collector: LiveCollector, fake_openai: str
) -> None:
    py = _venv(tmp_path, PINS["openai-v2"])
    out = subprocess.run(
        [py, HERE / "openai_v2_app.py", live_collector.http_url, fake_openai],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "one, two, three" in out.stdout
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
