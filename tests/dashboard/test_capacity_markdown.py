"""Gateway-derived text on the Capacity page is shown as text, never as live Markdown
(attack report item 7): a model label from the gateway's ``/metrics`` went into
``st.markdown`` and ``st.table`` (which renders Markdown in cells), and the ``?gateway=`` URL
was echoed into ``st.warning``.

A real HTTP server on 127.0.0.1 (allowed with ``DRIFTLINE_EGRESS_ALLOW``) plays the gateway;
the page runs under Streamlit's AppTest and every Markdown string it hands out is rendered as
in tests/dashboard/test_markdown_escape.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from collector.store import engine as store_engine
from tests.dashboard.conftest import APP
from tests.dashboard.test_markdown_escape import RENDER, assert_inert, markdown_strings

MODEL = "![m](http://evil.example/p.png) [click](http://evil.example/x)"
METRICS = (
    "# TYPE driftline_replicas gauge\n"
    f'driftline_replicas{{model="{MODEL}"}} 1.0\n'
    "# TYPE driftline_desired_replicas gauge\n"
    f'driftline_desired_replicas{{model="{MODEL}"}} 3.0\n'
).encode()


@pytest.fixture
def gateway() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            ok = self.path == "/metrics"
            body = METRICS if ok else b"no"
            self.send_response(200 if ok else 404)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gateway_url: str) -> AppTest:
    url = f"sqlite:///{tmp_path / 'cap.db'}"
    store_engine.upgrade(url)
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "true")
    monkeypatch.setenv("DRIFTLINE_EGRESS_ALLOW", "127.0.0.1/32")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/capacity.py")
    at.query_params["gateway"] = gateway_url
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _table_cells(at: AppTest) -> list[str]:
    cells: list[str] = []
    for t in at.table:
        frame = t.value
        cells += [str(i) for i in frame.index] + [str(c) for c in frame.columns]
        cells += [str(v) for v in frame.to_numpy().ravel()]
    return cells


def test_a_gateway_model_label_is_text(
    gateway: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _page(tmp_path, monkeypatch, gateway)
    assert any("up from 1 to 3" in s for s in markdown_strings(at))  # the advice is there
    assert_inert(at, f"Scale {MODEL} up from 1 to 3 replicas.")
    cells = _table_cells(at)
    assert cells, "the desired-vs-actual table is missing"
    for cell in cells:  # st.table renders Markdown in its cells
        rendered = RENDER.render(cell)
        assert "<a " not in rendered and "<img" not in rendered, (cell, rendered)


def test_the_gateway_url_is_echoed_as_text(
    gateway: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = f"{gateway}/x?[click](http://evil.example/u)"
    at = _page(tmp_path, monkeypatch, evil)
    assert_inert(at, "[click](http://evil.example/u)")
