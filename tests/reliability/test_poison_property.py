"""Issue 35, "Bad input": generated OTLP traces AND logs (protobuf and OTLP/JSON, poison among
them: see :mod:`tests.reliability.poison_strategies`) go through the real receivers, the spool
and the spool processor (thread mode, as ``DRIFTLINE_SPOOL_PROCESSOR=thread``) on SQLite and on
PostgreSQL. For every example:

* every answer is 200, or 400 for a request that is poison as a whole; never a 5xx;
* the processor reaches the end of the spool (committed offset == durable end) within
  ``DRAIN_S`` seconds: no record stops it;
* every plain span is stored exactly once (``spans``, one row per key, duplicates included),
  every invalid span is counted in ``partialSuccess`` and not stored;
* every odd item (hostile content, valid ids) is stored, or counted in ``partialSuccess``, or
  its spool record is counted on ``driftline_spool_quarantined_records_total``;
* plain evaluation results (evaluation-only exports among them) and content records are stored.

Each example runs its own collector (fresh spool) on one store per test, so that a stuck
processor fails that example alone. Derandomized and deadline-free; ``EXAMPLES`` per store
(``DRIFTLINE_PROPERTY_EXAMPLES`` for a longer run, ``DRIFTLINE_PROPERTY_SHRINK=1`` to shrink a
failure to a minimal example: each shrink step waits up to ``DRAIN_S``;
``DRIFTLINE_PROPERTY_SURVEY=1`` to run every example and list every failure).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, example, given, note, settings
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from sqlalchemy import Engine, text

from collector.store import engine as store_engine
from driftline.app import create_app
from tests.conftest import make_settings, wait_for
from tests.reliability import poison_build as build
from tests.reliability import poison_strategies as gen

EXAMPLES = int(os.environ.get("DRIFTLINE_PROPERTY_EXAMPLES", "30"))
#: seconds the processor may take to reach the spool's end after an example's last request
DRAIN_S = float(os.environ.get("DRIFTLINE_PROPERTY_DRAIN_S", "20"))
PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
if os.environ.get("DRIFTLINE_PROPERTY_SHRINK") == "1":
    PHASES.append(Phase.shrink)
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=PHASES,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)
#: ``DRIFTLINE_PROPERTY_SURVEY=1``: run every example and list each failure (no stop at the first)
SURVEY = os.environ.get("DRIFTLINE_PROPERTY_SURVEY") == "1"
QUARANTINED = "driftline_spool_quarantined_records_total"


def quarantined(client: TestClient) -> float:
    """Sum of :data:`QUARANTINED` over its labels on ``/metrics`` (0 when not exposed)."""
    total = 0.0
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(QUARANTINED) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def rejected_of(exp: build.Expect, status: int, body: bytes) -> int:
    """The ``partialSuccess`` count of a 200 answer in the request's encoding."""
    if status != 200:
        return 0
    if exp.spec.signal == "traces":
        if exp.spec.media == "json":
            ps = json.loads(body or b"{}").get("partialSuccess") or {}
            return int(ps.get("rejectedSpans", 0))
        return int(ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans)
    if exp.spec.media == "json":
        ps = json.loads(body or b"{}").get("partialSuccess") or {}
        return int(ps.get("rejectedLogRecords", 0))
    return int(ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records)


class Store:
    """Read access to the test's store (counts by key, by evaluation-name prefix)."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = store_engine.make_engine(url)

    def span_rows(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        return self._by_key("spans", keys)

    def log_rows(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        return self._by_key("gen_ai_log_events", keys)

    def _by_key(self, table: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        if not keys:
            return {}
        traces = sorted({t for t, _ in keys})
        sql = text(
            f"SELECT trace_id, span_id, COUNT(*) FROM {table} WHERE trace_id IN "
            f"({','.join(f':t{i}' for i in range(len(traces)))}) GROUP BY trace_id, span_id"
        )
        with self.engine.connect() as conn:
            rows = conn.execute(sql, {f"t{i}": t for i, t in enumerate(traces)}).all()
        return {(t, s): n for t, s, n in rows}

    def evals(self, prefix: str) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    text("SELECT COUNT(*) FROM external_scores WHERE name LIKE :p"),
                    {"p": prefix + "%"},
                ).scalar_one()
            )


def check_example(store: Store, sent: list[tuple[build.Expect, int, int]], q_delta: float) -> None:
    """The assertions of the module docstring over one example's requests ``(expect, status,
    rejected)``, after the processor has reached the spool's end."""
    unexplained: list[str] = []  # requests with odd items neither stored nor counted rejected
    for exp, status, rejected in sent:
        what = f"{exp.spec.signal}/{exp.spec.media} request"
        assert status == 200 or (status == 400 and exp.may_400), (what, status)
        spans = store.span_rows(exp.plain_spans + exp.odd_spans + exp.invalid_spans)
        logs = store.log_rows(exp.plain_contents + exp.odd_contents)
        if status == 400:  # refused whole: nothing of it stored
            assert not any(spans.get(k) for k in exp.invalid_spans + exp.odd_spans), what
            continue
        for key in exp.plain_spans:
            assert spans.get(key) == 1, f"{what}: plain span {key} stored {spans.get(key, 0)}x"
        for key in exp.invalid_spans:
            assert key not in spans, f"{what}: invalid span {key} was stored"
        for key in exp.odd_spans:
            assert spans.get(key, 0) <= 1, f"{what}: odd span {key} stored {spans[key]}x"
        for prefix in exp.plain_evals:
            assert store.evals(prefix) == 1, f"{what}: plain evaluation {prefix} not stored once"
        for key in exp.plain_contents:
            assert logs.get(key, 0) >= 1, f"{what}: plain content record {key} not stored"
        extra = rejected - exp.invalid_count
        assert extra >= 0, (
            f"{what}: {rejected} rejected, fewer than its {exp.invalid_count} invalid"
        )
        lost: list[Any] = [k for k in exp.odd_spans if k not in spans]
        lost += [p for p in exp.odd_evals if store.evals(p) == 0]
        lost += [k for k in exp.odd_contents if k not in logs]
        assert extra <= len(lost), f"{what}: {extra} odd items rejected, {len(lost)} missing"
        if len(lost) > extra:
            unexplained.append(f"{what} (rejected {rejected}): {[exp.specs[k] for k in lost]}")
    assert len(unexplained) <= q_delta, (
        f"{len(unexplained)} requests lost odd items neither rejected nor quarantined "
        f"(quarantined records: {q_delta}): {unexplained}"
    )


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.engine.dispose()


def run_example(
    db_url: str, spool_dir: Path, store: Store, scenario: list[gen.RequestSpec], salt: int
) -> None:
    """One collector (fresh spool, thread processor) on ``db_url``: send ``scenario``, wait for
    the processor to reach the spool's end, check the store."""
    settings_ = make_settings(
        db_url,
        grpc_enabled=False,
        scheduler_enabled=False,
        spool_enabled=True,
        spool_dir=spool_dir,
        spool_processor="thread",
    )
    with TestClient(create_app(settings_), raise_server_exceptions=False) as client:
        spool: Any = client.app.state.driftline.spool  # type: ignore[attr-defined]
        q0 = quarantined(client)
        plain_keys: list[tuple[bytes, bytes]] = []
        sent: list[tuple[build.Expect, int, int]] = []
        n = 0
        for spec in scenario:
            exp, n = build.build_request(spec, salt, n, plain_keys)
            path = "/v1/traces" if spec.signal == "traces" else "/v1/logs"
            r = client.post(path, content=exp.body, headers={"Content-Type": exp.content_type})
            note(f"{path} {spec} -> {r.status_code} {r.content[:300]!r}")
            assert r.status_code < 500, (spec, r.status_code, r.text[:500])
            sent.append((exp, r.status_code, rejected_of(exp, r.status_code, r.content)))
        end = spool.durable_end
        try:
            wait_for(lambda: spool.sync_committed(0.0) >= end, timeout_s=DRAIN_S)
        except AssertionError:
            raise AssertionError(
                f"the processor did not reach the spool's end in {DRAIN_S} s: committed "
                f"{spool.committed} of {end}"
            ) from None
        q_delta = quarantined(client) - q0
        assert client.get("/healthz").status_code == 200
    check_example(store, sent, q_delta)


def _then_a_span(first: gen.RequestSpec) -> list[gen.RequestSpec]:
    """``first``, then a plain span: the processor must get past ``first`` to store it."""
    span = gen.SpanSpec("plain", "chat gpt-4o", gen.NOW_NS, 1000, ())
    return [first, gen.RequestSpec("traces", "protobuf", spans=(span,))]


#: the reproductions of issue 35 item 1, run first in every run (hypothesis' explicit phase)
EXPLICIT = [
    _then_a_span(gen.RequestSpec(signal, media, logs=(gen.LogSpec("eval", cls, "ok", 0.5, p),)))
    for signal, media in [("logs", "protobuf"), ("logs", "json")]
    for cls, p in [
        ("plain", None),  # an evaluation-only export
        ("odd", "time_2_63"),
        ("odd", "nul_name"),
        ("odd", "long_name"),
        ("odd", "long_label"),
    ]
] + [
    _then_a_span(gen.RequestSpec("logs", "json", logs=(gen.LogSpec("content", "odd", "x", 0, p),)))
    for p in ["time_2_63", "nul_body"]
]


# a value past its PostgreSQL column (user_id varchar(256)) beside a plain span in one export
EXPLICIT.append(
    _then_a_span(
        gen.RequestSpec(
            "traces",
            "json",
            spans=(
                gen.SpanSpec("odd", "chat", gen.NOW_NS, 5, (gen.Attr("user.id", "s", "u" * 257),)),
                gen.SpanSpec("plain", "chat", gen.NOW_NS, 5, ()),
            ),
        )
    )
)


def test_poison_exports_never_stop_the_processor(db_url: str, store: Store, tmp_path: Path) -> None:
    salts = itertools.count(1)
    failures: list[str] = []

    def run(scenario: list[gen.RequestSpec]) -> None:
        salt = next(salts)
        try:
            run_example(db_url, tmp_path / f"spool-{salt}", store, scenario, salt)
        except AssertionError as exc:
            if not SURVEY:
                raise
            failures.append(f"example {salt}: {str(exc)[:300]}\n  scenario: {scenario!r}"[:3000])

    for explicit in EXPLICIT:
        run = example(explicit)(run)
    PROPERTY(given(gen.scenarios)(run))()
    for f in failures:
        print(f)
    assert not failures, f"{len(failures)} of {EXAMPLES} examples failed (survey mode)"
