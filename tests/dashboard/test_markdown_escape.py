"""Span text is shown as text, never as live Markdown, on every dashboard page that shows it
(issue 35, item 5): a span named ``[click](http://evil...)`` or a session id
``![x](http://evil/p.png)`` rendered as a phishing link and a tracking pixel.

Spans come from the real OpenTelemetry SDK through the collector's OTLP/HTTP route; pages run
under Streamlit's AppTest. Every string the page hands to a Markdown-rendering element (titles,
captions, alerts, metric labels/values/tooltips, button labels/tooltips, tabs, expanders) is
rendered with a CommonMark + GFM-autolink renderer (markdown-it-py with linkify, as Streamlit's
remark-gfm does): no ``<a>`` and no ``<img>`` may come out of span text, and the text must read
as it was sent.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from streamlit.testing.v1 import AppTest

from dashboard import ui
from driftline.app import create_app
from tests.conftest import make_settings
from tests.dashboard.conftest import APP
from tests.support.agent_traces import record, send

EVIL = "evil.example"
AGENT_SPAN = "[click](http://evil.example/agent)"
LLM_SPAN = "[click](http://evil.example/span)"
SESSION = "![x](http://evil.example/p.png)"
RESPONSE_ID = "resp-[r](http://evil.example/r)"
MODEL = "![m](evil.png) [click](javascript:x)"  # the store keeps what follows a "/" only
ERROR_TYPE = "<http://evil.example/e> http://evil.example/bare www.evil.example"
RENDER = MarkdownIt("commonmark", {"linkify": True}).enable(["linkify", "table", "strikethrough"])


def _evil_run(provider: TracerProvider, t0: int) -> None:
    tracer = provider.get_tracer("evil-app")
    with tracer.start_as_current_span(AGENT_SPAN, start_time=t0, end_on_exit=False) as agent:
        agent.set_attributes(
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": SESSION}
        )
        with tracer.start_as_current_span(
            LLM_SPAN, kind=trace.SpanKind.CLIENT, start_time=t0 + 10**7, end_on_exit=False
        ) as s:
            s.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": MODEL,
                    "gen_ai.response.id": RESPONSE_ID,
                    "gen_ai.conversation.id": SESSION,
                    "gen_ai.usage.input_tokens": 3,
                    "gen_ai.usage.output_tokens": 2,
                    "error.type": ERROR_TYPE,
                }
            )
            s.set_status(trace.Status(trace.StatusCode.ERROR, "boom"))
            s.end(end_time=t0 + 4 * 10**8)
        agent.end(end_time=t0 + 5 * 10**8)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mdescape')}/driftline.db"
    t0 = time.time_ns() - 60 * 10**9
    with TestClient(create_app(make_settings(url, grpc_enabled=False))) as client:
        send(client, record(lambda p: _evil_run(p, t0)), expect_calls=1)
    yield url


def open_page(monkeypatch: pytest.MonkeyPatch, url: str, page: str) -> AppTest:
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "true")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown_strings(at: AppTest) -> list[str]:
    """Every string of the page that Streamlit renders as Markdown."""
    out: list[str] = []
    for group in (
        at.title,
        at.header,
        at.subheader,
        at.markdown,
        at.caption,
        at.warning,
        at.info,
        at.success,
        at.error,
    ):
        out += [str(e.value) for e in group]
    for m in at.metric:
        out += [m.proto.label, m.proto.body, m.proto.help]
    for b in at.button:
        out += [b.proto.label, b.proto.help]
    out += [t.proto.label for t in at.tabs] + [e.proto.label for e in at.expander]
    return [s for s in out if s]


def shown_text(source: str) -> str:
    """What a reader sees of ``source`` rendered as Markdown (tags dropped, entities read)."""
    return html.unescape(re.sub(r"<[^>]+>", "", RENDER.render(source)))


def assert_inert(at: AppTest, *expected: str) -> None:
    """No link or image from span text; each of ``expected`` reads verbatim somewhere."""
    strings = markdown_strings(at)
    for s in strings:
        rendered = RENDER.render(s)
        assert "<a " not in rendered and "<img" not in rendered, (s, rendered)
    shown = "\n".join(shown_text(s) for s in strings)
    for text in expected:
        assert text in shown, (text, shown)


def test_md_escapes_every_markdown_construct() -> None:
    for source in [
        AGENT_SPAN,
        SESSION,
        ERROR_TYPE,
        "<img src=x onerror=alert(1)>",
        "# heading\n- list\n> quote\n| a | b |\n|---|---|",
        "*em* _em_ **b** ~~s~~ `code` $x^2$ :red[colour] :material/home: \\[esc\\]",
        "[ref]: http://evil.example/ref\n[ref]",
    ]:
        rendered = RENDER.render(ui.md(source))
        assert rendered.count("<p>") == 1 and "<a " not in rendered and "<img" not in rendered
        assert not re.search(r"<(h\d|ul|blockquote|table|em|strong|s|code)>", rendered), rendered
        assert shown_text(ui.md(source)).strip() == " ".join(source.splitlines())


def test_traces_page_shows_span_text_as_text(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "traces")
    llm_button = [b for b in at.button if b.key == "traces_call_0"]
    # the call's tooltip is the span's label (operation and model, from span attributes)
    assert llm_button and f"chat {MODEL}" in shown_text(llm_button[0].proto.help)
    assert_inert(at, f"chat {MODEL}", RESPONSE_ID[-12:])
    assert any(AGENT_SPAN in str(x) for x in at.dataframe[1].value["span"])  # a table: text
    trace_id = at.dataframe[0].value["trace_id"].iloc[0]
    # a deep link or a typed id is shown back as typed: it must not become Markdown either
    at.text_input(key="traces_open").set_value(f"[x](http://{EVIL}/typed)").run()
    assert_inert(at, f"[x](http://{EVIL}/typed)")
    at.text_input(key="traces_open").set_value(trace_id).run()
    assert_inert(at, trace_id)


def test_sessions_page_shows_span_text_as_text(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "sessions")
    assert list(at.dataframe[0].value["session"]) == [SESSION]
    assert_inert(at, f"Session {SESSION}", MODEL, RESPONSE_ID)


def test_calls_page_shows_span_text_as_text(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(monkeypatch, store, "calls")
    assert list(at.dataframe[0].value["call_id"]) == [RESPONSE_ID]
    assert_inert(at, f"Call {RESPONSE_ID}", ERROR_TYPE)
    at.text_input(key="calls_open").set_value(f"![y](http://{EVIL}/typed.png)").run()
    assert_inert(at, f"![y](http://{EVIL}/typed.png)")
