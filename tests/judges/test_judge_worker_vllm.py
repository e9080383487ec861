"""The judge worker against the real vLLM CPU engine (the bundled SmolLM2 as judge).

Started the way tests/serving does (``EngineProcess`` on ``build_launch``); skipped only when the
serving venv is absent AND ``CI`` is not set. Calls come in over OTLP into the real collector app;
``run_once`` judges them through ``openai.AsyncOpenAI`` with json_schema structured output.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from collector.store import engine as store_engine
from collector.store.models.judges import JudgeResultRow, JudgeSample
from driftline.app import create_app
from judges.settings import JudgeSettings
from judges.worker import run_once
from serving.engine import EngineProcess
from serving.install import has_gpu
from serving.launch import build_launch
from serving.prepare import prepare_model
from serving.settings import EngineSettings
from tests.conftest import make_settings, wait_for
from tests.support import free_port

REPO = Path(__file__).resolve().parents[2]
STATE_DIR = REPO / ".driftline"
VENV_PY = STATE_DIR / "vllm-venv" / "bin" / "python"
BASE = "smollm2-135m-instruct"

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not VENV_PY.exists() and not os.environ.get("CI"),
        reason="serving venv absent (run `make serving`); required when CI is set",
    ),
]


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert VENV_PY.exists(), "serving venv missing: run `make serving` (CI is set)"
    tmp = tmp_path_factory.mktemp("vllm-judge")
    es = EngineSettings(state_dir=STATE_DIR, engine_port=free_port())
    prepare_model(es)
    process = EngineProcess(build_launch(es, gpu=has_gpu()), log_path=tmp / "vllm.log")
    process.start()
    try:
        process.wait_ready(es.startup_timeout_s)
        yield f"{process.spec.url}/v1"
    finally:
        process.stop()


QUESTIONS = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What colour is the sky on a clear day?", "Bananas are yellow."),
]


def _otlp() -> dict[str, object]:
    spans = []
    for i, (question, answer) in enumerate(QUESTIONS):
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "served-model",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": question,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": answer,
        }
        spans.append(
            {
                "traceId": f"{i + 1:032x}",
                "spanId": f"{i + 1:016x}",
                "name": "chat served-model",
                "startTimeUnixNano": str(1_800_000_000_000_000_000 + i),
                "endTimeUnixNano": str(1_800_000_000_500_000_000 + i),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
            }
        )
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def test_worker_judges_through_the_real_cpu_engine(engine_url: str, tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path}/d.db"
    with TestClient(create_app(make_settings(db_url, grpc_enabled=False))) as client:
        assert client.post("/v1/traces", json=_otlp()).status_code == 200
        wait_for(lambda: len(client.get("/api/v1/calls").json()["items"]) == len(QUESTIONS))
    settings = JudgeSettings(
        base_url=engine_url,
        model=BASE,
        base_rate=1.0,
        settle_s=0.0,
        concurrency=2,
        max_tokens=400,
        timeout_s=300.0,
        audit_rate=1.0,
    )
    engine = store_engine.make_engine(db_url)

    async def go() -> object:
        client = openai.AsyncOpenAI(base_url=engine_url, api_key="EMPTY", max_retries=0)
        try:
            return await run_once(client, engine, settings, worker_id="vllm-test", pace=False)
        finally:
            await client.close()

    try:
        report = asyncio.run(go())
        with engine.connect() as conn:
            results = conn.execute(select(JudgeResultRow.__table__)).all()
            statuses = set(conn.execute(select(JudgeSample.status)).scalars())
    finally:
        engine.dispose()
    assert len(results) == len(QUESTIONS), report
    assert statuses <= {"done", "failed"}
    for r in results:
        assert r.judge_model == BASE and r.rubric_name == "helpfulness"
        if r.status == "ok":
            assert r.score is None or 1.0 <= r.score <= 5.0
            assert r.output_mode == "json_schema"
            assert r.input_tokens and r.input_tokens > 0 and r.latency_s > 0
            assert r.explanation is not None
        else:  # a small judge may ramble past max_tokens: a recorded failure, never a score
            assert r.error_kind == "parse" and r.score is None and r.label is None
    assert any(r.status == "ok" and r.score is not None for r in results), [
        (r.status, r.error) for r in results
    ]
