"""End to end on SQLite and PostgreSQL: OTLP calls in → `driftline judge run --once` against a real
OpenAI-compatible HTTP server → stored results → review queue → /api/v1/quality checked against
judges.ppi / judges.agreement computed here from the sampling design → flywheel export."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_judge_api import FakeJudgeServer, Reply, completion
from fastapi.testclient import TestClient

from driftline.cli import cli
from judges.agreement import cohen_kappa
from judges.ppi import classic_mean, ppi_mean
from judges.sampling import hash_unit
from tests.conftest import wait_for

SALT = "e2e-salt"
N_PER_VARIANT = 30
V2_RATE = 0.6
AUDIT_RATE = 0.5
GRADE = re.compile(r"\(grade (\d|X)\)")


@dataclass(frozen=True)
class Call:
    i: int
    variant: str
    trace_id: str
    span_id: str
    judge: int | None  # None: the judge answers garbage for this call

    @property
    def call_id(self) -> str:
        return f"resp-{self.i}"

    @property
    def answer(self) -> str:
        grade = "X" if self.judge is None else str(self.judge)
        return f"Answer number {self.i} (grade {grade})"

    @property
    def human(self) -> int:
        """The reviewer's score: the judge's, off by one on a fixed pattern."""
        assert self.judge is not None
        shift = (0, 0, 1, -1, 0, 1)[self.i % 6]
        return min(5, max(1, self.judge + shift))


def make_calls() -> list[Call]:
    calls = []
    for i in range(2 * N_PER_VARIANT):
        variant = "v1" if i < N_PER_VARIANT else "v2"
        judge = None if i == 3 else 1 + (i * 7) % 5
        calls.append(Call(i, variant, f"{i + 1:032x}", f"{i + 1:016x}", judge))
    return calls


def otlp_body(calls: list[Call]) -> dict[str, Any]:
    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    spans = []
    for c in calls:
        start = 1_800_000_000_000_000_000 + c.i * 1_000_000_000
        spans.append(
            {
                "traceId": c.trace_id,
                "spanId": c.span_id,
                "name": "chat small-model",
                "kind": 3,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + 400_000_000),
                "attributes": [
                    attr("gen_ai.operation.name", "chat"),
                    attr("gen_ai.request.model", "small-model"),
                    attr("gen_ai.response.id", c.call_id),
                    attr("driftline.variant", c.variant),
                    attr("gen_ai.prompt.0.role", "user"),
                    attr("gen_ai.prompt.0.content", f"Question number {c.i}?"),
                    attr("gen_ai.completion.0.role", "assistant"),
                    attr("gen_ai.completion.0.content", c.answer),
                ],
            }
        )
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", "chatbot")]},
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }


def judge_handler(body: dict[str, Any]) -> Reply:
    """Scores the answer by its '(grade K)' tag; '(grade X)' gets an unparseable reply."""
    grade = GRADE.findall(body["messages"][-1]["content"])[-1]
    if grade == "X":
        return Reply(body=completion("The answer looks fine to me."))
    verdict = json.dumps({"reasoning": f"graded {grade}", "score": int(grade)})
    return Reply(body=completion(verdict, prompt_tokens=200, completion_tokens=20))


def judge_env(db_url: str, server: FakeJudgeServer) -> dict[str, str]:
    return {
        "DRIFTLINE_DATABASE_URL": db_url,
        "DRIFTLINE_JUDGE_BASE_URL": server.base_url,
        "DRIFTLINE_JUDGE_MODEL": "judge-model",
        "DRIFTLINE_JUDGE_API_KEY": "test-key",
        "DRIFTLINE_JUDGE_SALT": SALT,
        "DRIFTLINE_JUDGE_BASE_RATE": "1.0",
        "DRIFTLINE_JUDGE_STRATA": json.dumps([{"variant": "v2", "rate": V2_RATE}]),
        "DRIFTLINE_JUDGE_AUDIT_RATE": str(AUDIT_RATE),
        "DRIFTLINE_JUDGE_SETTLE_S": "0",
        "DRIFTLINE_JUDGE_INPUT_USD_PER_MTOK": "1.0",
        "DRIFTLINE_JUDGE_OUTPUT_USD_PER_MTOK": "4.0",
        "DRIFTLINE_JUDGE_LOW_SCORE_THRESHOLD": "2",
    }


def ingest(client: TestClient, calls: list[Call]) -> None:
    r = client.post("/v1/traces", json=otlp_body(calls))
    assert r.status_code == 200, r.text
    wait_for(
        lambda: (
            len(client.get("/api/v1/calls", params={"limit": 1000}).json()["items"]) == len(calls)
        )
    )


def inclusion(c: Call, flagged: Call) -> float | None:
    """π_judge of a call under the design, computed independently of the worker."""
    if c is flagged:
        return 1.0
    rate = 1.0 if c.variant == "v1" else V2_RATE
    return rate if hash_unit(c.call_id, SALT) < rate else None


def in_audit(c: Call) -> bool:
    return hash_unit(c.call_id, f"{SALT}:audit") < AUDIT_RATE


def test_worker_review_and_quality_end_to_end(
    client: TestClient, db_url: str, judge_server: FakeJudgeServer, tmp_path: Path
) -> None:
    calls = make_calls()
    # a v2 call the hash would not sample; its thumbs-down forces it in with π = 1
    flagged = next(c for c in calls[N_PER_VARIANT:] if hash_unit(c.call_id, SALT) >= V2_RATE)
    ingest(client, calls)
    r = client.post(
        "/api/v1/feedback",
        json={"kind": "thumbs_down", "trace_id": flagged.trace_id, "span_id": flagged.span_id},
    )
    assert r.status_code == 202, r.text
    judge_server.handler = judge_handler

    runner = CliRunner()
    env = judge_env(db_url, judge_server)
    out = runner.invoke(cli, ["judge", "run", "--once", "--concurrency", "4"], env=env)
    assert out.exit_code == 0, out.output

    sampled = {c.call_id: c for c in calls if inclusion(c, flagged) is not None}
    assert len(judge_server.requests) == len(sampled)
    assert {m["model"] for m in judge_server.requests} == {"judge-model"}

    results = client.get("/api/v1/judge/results", params={"limit": 1000}).json()["items"]
    assert {r["call_id"] for r in results} == set(sampled)
    by_call = {r["call_id"]: r for r in results}
    failed = by_call[calls[3].call_id]
    assert failed["status"] == "failed" and failed["score"] is None
    assert failed["error_kind"] == "parse" and failed["raw_text"] == "The answer looks fine to me."
    assert "gen_ai.evaluation.score.value" not in failed["attributes"]
    ok = by_call[calls[0].call_id]
    assert ok["score"] == calls[0].judge and ok["rubric"] == "helpfulness"
    assert ok["cost_usd"] == pytest.approx((200 * 1.0 + 20 * 4.0) / 1e6)
    assert ok["attributes"]["gen_ai.evaluation.name"] == "helpfulness"
    assert ok["attributes"]["gen_ai.evaluation.score.value"] == calls[0].judge
    assert ok["attributes"]["gen_ai.response.id"] == calls[0].call_id

    # a second round finds nothing new: every call was considered once
    again = runner.invoke(cli, ["judge", "run", "--once"], env=env)
    assert again.exit_code == 0 and len(judge_server.requests) == len(sampled)

    labelled = review_everything(client, sampled, flagged)
    judged = [c for c in sampled.values() if c.judge is not None]
    audit_ids = {c.call_id for c in judged if in_audit(c)}
    assert set(labelled) >= audit_ids

    body = client.get("/api/v1/quality", params={"group_by": "variant"}).json()
    groups = {g["variant"]: g for g in body["items"]}
    assert set(groups) == {"v1", "v2"}
    for variant, group in groups.items():
        check_group(group, [c for c in judged if c.variant == variant], flagged, labelled)

    export_file = tmp_path / "flywheel.jsonl"
    out = runner.invoke(
        cli,
        ["export", "flywheel", "--since", "2020-01-01T00:00:00", "--out", str(export_file)],
        env=env,
    )
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in export_file.read_text().splitlines()]
    assert {"messages": [
        {"role": "user", "content": f"Question number {flagged.i}?"},
        {"role": "assistant", "content": "A corrected answer."},
    ]} in lines  # fmt: skip


def review_everything(
    client: TestClient, sampled: dict[str, Call], flagged: Call
) -> dict[str, int]:
    """Label every queued item (the first one is skipped by alice first); returns call → score."""
    labelled: dict[str, int] = {}
    first = client.get("/api/v1/review/next", params={"reviewer": "alice"}).json()["item"]
    assert first is not None and first["rubric"]["name"] == "helpfulness"
    assert "score" not in first and first["prompt"].startswith("Question number")
    skip = client.post(f"/api/v1/review/{first['id']}", json={"skip": True, "reviewer": "alice"})
    assert skip.status_code == 200 and skip.json()["skipped"] is True
    taken = client.post(f"/api/v1/review/{first['id']}", json={"score": 3, "reviewer": "carol"})
    assert taken.status_code == 200  # open again after the skip
    while True:
        item = client.get("/api/v1/review/next", params={"reviewer": "bob"}).json()["item"]
        if item is None:
            break
        c = sampled[item["call_id"]]
        assert item["audit"] == in_audit(c) or c is flagged
        bad = client.post(f"/api/v1/review/{item['id']}", json={"score": 9, "reviewer": "bob"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"
        other = client.post(f"/api/v1/review/{item['id']}", json={"score": 3, "reviewer": "eve"})
        assert other.status_code == 400  # held by bob
        label: dict[str, Any] = {"score": c.human, "reviewer": "bob", "comment": "ok"}
        if c is flagged:
            label["corrected_output"] = "A corrected answer."
        r = client.post(f"/api/v1/review/{item['id']}", json=label)
        assert r.status_code == 200, r.text
        labelled[c.call_id] = c.human
    assert client.post("/api/v1/review/999999", json={"score": 3}).status_code == 404
    relabel = client.post(f"/api/v1/review/{first['id']}", json={"score": 4})
    assert relabel.status_code == 400  # already labelled (by carol, score 3)
    labelled[first["call_id"]] = 3
    return labelled


def check_group(
    group: dict[str, Any], judged: list[Call], flagged: Call, labelled: dict[str, int]
) -> None:
    def human(c: Call) -> int:
        return labelled[c.call_id]

    pi = {c.call_id: inclusion(c, flagged) or 0.0 for c in judged}
    lab = [c for c in judged if in_audit(c)]
    unl = [c for c in judged if not in_audit(c)]
    y = [float(human(c)) for c in lab]
    f = [float(c.judge or 0) for c in lab]
    fu = [float(c.judge or 0) for c in unl]
    pi_lab = [pi[c.call_id] * AUDIT_RATE for c in lab]
    pi_unl = [pi[c.call_id] * (1 - AUDIT_RATE) for c in unl]
    expected = ppi_mean(y, f, fu, alpha=0.1, inclusion=pi_lab, inclusion_unlabeled=pi_unl)
    assert group["n_judged"] == len(judged) and group["n_labelled"] == len(lab)
    assert group["ppi"]["estimate"] == pytest.approx(expected.estimate)
    assert group["ppi"]["ci_low"] == pytest.approx(expected.ci_low)
    assert group["ppi"]["ci_high"] == pytest.approx(expected.ci_high)
    assert group["ppi"]["confidence"] == pytest.approx(0.9)
    assert group["human_mean"] == pytest.approx(classic_mean(y, inclusion=pi_lab).estimate)
    weights = [1 / pi[c.call_id] for c in judged]
    judge_mean = sum(w * (c.judge or 0) for w, c in zip(weights, judged, strict=True))
    assert group["judge_mean"] == pytest.approx(judge_mean / sum(weights))
    kappa = cohen_kappa(
        [human(c) for c in lab], [c.judge for c in lab], weights="quadratic", labels=range(1, 6)
    )
    assert group["kappa"] == pytest.approx(kappa.statistic)
    assert group["judge_model"] == "judge-model" and group["rubric"] == "helpfulness"
