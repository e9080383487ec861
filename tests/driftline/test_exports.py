"""``driftline export calls|traces|feedback`` in every format, read back with csv / pyarrow,
against a store filled through the real OTLP/HTTP and feedback routes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from driftline.cli import cli
from tests.support.agent_traces import agent_run, record, send

T0 = 1_780_000_000_000_000_000


def _read(path: Path, fmt: str) -> list[dict[str, object]]:
    if fmt == "jsonl":
        return [json.loads(x) for x in path.read_text().splitlines()]
    if fmt == "csv":
        with path.open(newline="") as fh:
            return list(csv.DictReader(fh))
    return pq.read_table(path).to_pylist()


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_exports(client: TestClient, db_url: str, tmp_path: Path, fmt: str) -> None:
    spans = record(lambda p: agent_run(p, session="conv-1", t0=T0))
    spans += record(lambda p: agent_run(p, session="conv-2", t0=T0 + 10**10, answer="Lyon."))
    send(client, spans, expect_calls=4)
    trace = client.get("/api/v1/calls").json()["items"][0]["trace_id"]
    assert client.post(
        "/api/v1/feedback", json={"trace_id": trace, "kind": "thumbs_up"}
    ).status_code in (200, 202)
    runner = CliRunner()
    base = ["--format", fmt, "--database-url", db_url, "--no-progress"]

    out = tmp_path / f"calls.{fmt}"
    r = runner.invoke(cli, ["export", "calls", *base, "--out", str(out), "--session", "conv-1"])
    assert r.exit_code == 0, r.output
    rows = _read(out, fmt)
    assert len(rows) == 2 and {str(x["session_id"]) for x in rows} == {"conv-1"}
    assert {str(x["input_tokens"]) for x in rows} == {"20", "40"}

    out = tmp_path / f"search.{fmt}"
    r = runner.invoke(cli, ["export", "calls", *base, "--out", str(out), "-q", "Lyon"])
    assert r.exit_code == 0, r.output
    assert [str(x["session_id"]) for x in _read(out, fmt)] == ["conv-2"]

    out = tmp_path / f"traces.{fmt}"
    r = runner.invoke(cli, ["export", "traces", *base, "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = _read(out, fmt)
    assert [str(x["session_id"]) for x in rows] == ["conv-2", "conv-1"]
    assert {str(x["root_kind"]) for x in rows} == {"agent"}
    assert {str(x["llm_calls"]) for x in rows} == {"2"}

    out = tmp_path / f"feedback.{fmt}"
    r = runner.invoke(cli, ["export", "feedback", *base, "--out", str(out)])
    assert r.exit_code == 0, r.output
    (fb,) = _read(out, fmt)
    assert (fb["kind"], fb["trace_id"]) == ("thumbs_up", trace)

    bad = runner.invoke(cli, ["export", "calls", *base, "--out", str(out), "-q", "!!"])
    assert bad.exit_code == 2 and "q must contain" in bad.output
    bad = runner.invoke(cli, ["export", "calls", *base, "--out", str(out), "--since", "x"])
    assert bad.exit_code == 2 and "since" in bad.output


def test_progress_bar_goes_to_stderr(client: TestClient, db_url: str, tmp_path: Path) -> None:
    send(client, record(lambda p: agent_run(p, t0=T0)), expect_calls=2)
    r = CliRunner().invoke(cli, ["export", "calls", "--database-url", db_url, "--out", "-"])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 2
    assert "wrote 2 calls to -" in r.stderr


def _two_chats(provider: TracerProvider) -> None:
    """One chat that reports its finish reasons, one that reports none."""
    tracer = provider.get_tracer("chat-app")
    for i, reasons in enumerate([("length", "stop"), None]):
        t = T0 + i * 10**9
        with tracer.start_as_current_span(
            "chat gpt-4o-mini", kind=trace.SpanKind.CLIENT, start_time=t, end_on_exit=False
        ) as s:
            s.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 3,
                    "gen_ai.conversation.id": f"conv-{i}",
                }
            )
            if reasons is not None:
                s.set_attribute("gen_ai.response.finish_reasons", reasons)
            s.end(end_time=t + 200_000_000)


def test_parquet_finish_reasons_and_flags_are_string_lists(
    client: TestClient, db_url: str, tmp_path: Path
) -> None:
    send(client, record(_two_chats), expect_calls=2)
    out = tmp_path / "calls.parquet"
    args = ["export", "calls", "--format", "parquet", "--database-url", db_url, "--no-progress"]
    r = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    table = pq.read_table(out)
    for name in ("finish_reasons", "flags"):
        assert table.schema.field(name).type == pa.list_(pa.string()), name
    rows = {x["session_id"]: x for x in table.to_pylist()}
    assert rows["conv-0"]["finish_reasons"] == ["length", "stop"]
    assert rows["conv-0"]["finish_reason"] == "length"
    assert rows["conv-1"]["finish_reasons"] is None  # unknown: null, not "" nor []
    assert rows["conv-1"]["finish_reason"] is None
    assert all(isinstance(x["flags"], list) for x in rows.values())
