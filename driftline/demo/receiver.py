"""A local on-call webhook receiver for the demo: verifies the Standard Webhooks signature and
prints every alert it gets (what a pager or Alertmanager receiver would see)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alerts.signing import verify


class WebhookReceiver:
    """HTTP server on ``127.0.0.1:port``; each POST is verified, logged to ``log_path`` (JSON
    lines) and passed to ``on_alert(record)``."""

    def __init__(
        self, port: int, secret: str, log_path: Path, on_alert: Callable[[dict[str, Any]], None]
    ) -> None:
        self.secret = secret
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items()}
                ok = verify(receiver.secret, headers, body, now=time.time())
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"raw": body.decode(errors="replace")}
                record = {
                    "received_at": time.time(),
                    "signature_valid": ok,
                    "webhook_id": headers.get("webhook-id"),
                    "payload": payload,
                }
                receiver.received.append(record)
                with log_path.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")
                on_alert(record)
                self.send_response(200 if ok else 401)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def start(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
