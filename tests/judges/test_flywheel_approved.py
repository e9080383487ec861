"""``export flywheel --include-approved``: flagged calls a reviewer approved as they are
(top of the rubric scale, no correction) become examples only on request."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from fastapi.testclient import TestClient

from driftline.cli import cli
from judges.review import submit_label
from tests.support.agent_traces import agent_run, record, send
from tests.support.review import queue_review_item


def test_include_approved(client: TestClient, db_url: str, tmp_path: Path) -> None:
    send(
        client,
        record(lambda p: agent_run(p, session="s", t0=1_780_000_000_000_000_000)),
        expect_calls=2,
    )
    calls = client.get("/api/v1/calls").json()["items"]  # [answer, tool request]
    for c in calls:
        assert client.post(
            "/api/v1/feedback", json={"trace_id": c["trace_id"], "kind": "thumbs_down"}
        ).status_code in (200, 202)
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    approved, corrected = (queue_review_item(engine, c) for c in calls)
    submit_label(engine, "default", approved, "rev", score=5)
    submit_label(engine, "default", corrected, "rev", score=1, corrected_output="Ask me again.")

    def export(*extra: str) -> list[str]:
        out = tmp_path / "fw.jsonl"
        r = CliRunner().invoke(
            cli,
            [
                "export",
                "flywheel",
                "--since",
                "2020-01-01",
                "--out",
                str(out),
                "--database-url",
                db_url,
                *extra,
            ],
        )
        assert r.exit_code == 0, r.output
        return [json.loads(x)["messages"][-1]["content"] for x in out.read_text().splitlines()]

    assert export() == ["Ask me again."]
    assert sorted(export("--include-approved")) == sorted(
        ["Ask me again.", "Paris is the capital of France."]
    )
