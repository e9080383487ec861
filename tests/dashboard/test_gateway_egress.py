"""The Capacity page's ``?gateway=`` fetch stays within the egress policy.

Any logged-in user (or a crafted link) picks the URL the dashboard server fetches: a loopback
admin port, the cloud metadata service or a private network must not be reachable unless the
operator lists it in ``DRIFTLINE_EGRESS_ALLOW``; redirects are not followed and an endless
answer is cut off.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from collector.egress import EgressPolicy
from dashboard.gateway import MAX_METRICS_BYTES, read_gateway_metrics
from dashboard.settings import load_dashboard_settings

METRICS = b'# TYPE driftline_replicas gauge\ndriftline_replicas{model="base"} 2.0\n'


class _Server:
    """A real HTTP server on 127.0.0.1: ``/metrics`` answers METRICS, ``/redirect/metrics`` a
    307 to the metadata service, ``/huge/metrics`` more than the page reads."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                outer.paths.append(self.path)
                if self.path.startswith("/redirect"):
                    self.send_response(307)
                    self.send_header("location", "http://169.254.169.254/latest/meta-data/")
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                body = METRICS if self.path == "/metrics" else b"#" * (MAX_METRICS_BYTES + 4096)
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_loopback_gateway_is_not_fetched_by_default(server: _Server) -> None:
    got = read_gateway_metrics(server.url, EgressPolicy())
    assert got.frame is None and got.error and "DRIFTLINE_EGRESS_ALLOW" in got.error
    assert server.paths == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1:9090",
        "http://[::ffff:127.0.0.1]:4318",
        "http://localhost:5432",
        "file:///etc/passwd",
    ],
)
def test_internal_urls_are_refused_without_a_request(url: str) -> None:
    got = read_gateway_metrics(url, EgressPolicy())
    assert got.frame is None and got.error and got.error.startswith("not fetched")


def test_listed_gateway_is_read(server: _Server) -> None:
    policy = EgressPolicy.parse(f"127.0.0.1:{server.port}")
    got = read_gateway_metrics(server.url, policy)
    assert got.error is None and got.frame is not None
    assert got.frame.to_dict("records") == [
        {"name": "driftline_replicas", "model": "base", "value": 2.0}
    ]


def test_redirect_is_not_followed_and_endless_answer_is_cut(server: _Server) -> None:
    policy = EgressPolicy.parse(f"127.0.0.1:{server.port}")
    got = read_gateway_metrics(f"{server.url}/redirect", policy)
    assert got.frame is None and got.error and "HTTP 307" in got.error
    got = read_gateway_metrics(f"{server.url}/huge", policy)
    assert got.frame is None and got.error and "over" in got.error


def test_dashboard_setting_is_validated_at_start() -> None:
    from collector.errors import ConfigError

    with pytest.raises(ConfigError, match="DRIFTLINE_EGRESS_ALLOW"):
        load_dashboard_settings(egress_allow="not a host!")
    assert load_dashboard_settings(egress_allow="127.0.0.1:8000").egress_allow == "127.0.0.1:8000"


def test_capacity_page_refuses_a_loopback_gateway_link(
    server: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page itself, opened from a crafted ``?gateway=`` link: a warning, no request."""
    from streamlit.testing.v1 import AppTest

    from collector.store import engine as store_engine
    from tests.dashboard.conftest import APP

    url = f"sqlite:///{tmp_path / 'cap.db'}"
    store_engine.upgrade(url)
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "true")
    monkeypatch.delenv("DRIFTLINE_EGRESS_ALLOW", raising=False)
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/capacity.py")
    at.query_params["gateway"] = server.url
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the message is Markdown-escaped (it may quote the URL): read it without the backslashes
    assert any("DRIFTLINE_EGRESS_ALLOW" in w.value.replace("\\", "") for w in at.warning)
    assert server.paths == []
