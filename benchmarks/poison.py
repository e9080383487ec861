"""Poison benchmark (issue 35): no input of one tenant stops or slows another's ingestion.

A real collector process (``driftline collector``, API keys, spool on, default redaction) takes
OpenTelemetry SDK load from TWO tenants:

* tenant A: gen_ai chat spans through a ``TracerProvider`` + ``BatchSpanProcessor`` +
  OTLP/HTTP exporter (``--a-rate`` spans/s), 1 % of its records poison: spans with times
  >= 2**63, spans with NUL characters, adversarial redaction prompts of 4-16 KB
  (``"token=abc " + ".token" * N`` and ``"a!" * n + "@"``), and OTLP log exports with
  evaluation results only (one plain, one timed >= 2**63, one with a NUL in its name, one with
  a 5,000-character name);
* tenant B: ordinary gen_ai spans, one export per span (``SimpleSpanProcessor``,
  ``--b-rate`` spans/s); a watcher polls the store every 50 ms and notes when each B span is
  queryable.

The same load runs twice, each on a fresh collector and store: first without poison (the null
baseline), then with it. Prints, per phase, what was acknowledged and stored, and
``RESULT poison_valid_stored_ratio`` (valid spans stored / valid spans acknowledged, poison
phase; must be 1.0), ``RESULT poison_other_tenant_delay_p99_s`` (p99 of B's send-to-queryable
delay, poison phase; target <= 1 s on the 2-core machine) and the null baseline's.

A span is valid when its times fit int64 (NUL text and adversarial prompts are valid: stored,
cleaned and redacted). A B span never seen counts as an infinite delay.

    python benchmarks/poison.py                        # ~2 x 30 s of load
    python benchmarks/poison.py --duration 300 --a-rate 400
    python benchmarks/poison.py --pg-admin-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import psycopg
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ingest import wait_healthy
from collector.auth import create_key
from collector.store import engine as store_engine

A, B = "tenant-a", "tenant-b"
Key = tuple[str, str]
SPAN_POISON = ("time_2_63", "nul", "token_redos", "email_redos")
LOG_POISON = ("eval_only", "eval_time_2_63", "eval_nul_name", "eval_long_name")


def key_of(span: ReadableSpan) -> Key:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


class RecordingExporter(OTLPSpanExporter):
    """The OTLP/HTTP exporter, noting the keys of every span of a batch it exported (SUCCESS:
    the collector acknowledged the batch; its invalid spans are in ``invalid``)."""

    def __init__(
        self, acked: dict[Key, float], lock: threading.Lock, endpoint: str, headers: dict[str, str]
    ) -> None:
        super().__init__(endpoint=endpoint, headers=headers, timeout=30)
        self.acked, self.lock = acked, lock

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is SpanExportResult.SUCCESS:
            now = time.time()
            with self.lock:
                self.acked.update((key_of(s), now) for s in spans)
        return result


@dataclass
class Load:
    """What one phase sent and saw."""

    acked: dict[Key, float] = field(default_factory=dict)  # key -> acknowledged at
    invalid: set[Key] = field(default_factory=set)  # times past int64: must be rejected
    b_sent: dict[Key, float] = field(default_factory=dict)  # B span -> ended (sent) at
    b_seen: dict[Key, float] = field(default_factory=dict)  # B span -> queryable at
    poison: dict[str, int] = field(default_factory=dict)
    log_answers: dict[int, int] = field(default_factory=dict)  # status (-200: rejected) -> n
    log_kinds: dict[str, str] = field(default_factory=dict)  # response id -> poison kind
    lock: threading.Lock = field(default_factory=threading.Lock)


def chat_attrs(i: int, prompt: str) -> dict[str, str | int]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.id": f"chatcmpl-{i}",
        "gen_ai.usage.input_tokens": 100 + i % 50,
        "gen_ai.usage.output_tokens": 20 + i % 30,
        "gen_ai.prompt": prompt,
    }


def adversarial(kind: str, rng: random.Random) -> str:
    """A 4-16 KB prompt that backtracking redaction patterns take super-linear time on."""
    size = rng.randint(4096, 16384)
    if kind == "token_redos":
        return "token=abc " + ".token" * ((size - 10) // 6)
    return "a!" * ((size - 1) // 2) + "@"


def log_export(kind: str, i: int) -> bytes:
    """An OTLP log export holding one ``gen_ai.evaluation.result`` record and nothing else."""
    req = ExportLogsServiceRequest()
    rec = req.resource_logs.add().scope_logs.add().log_records.add()
    rec.event_name = "gen_ai.evaluation.result"
    rec.time_unix_nano = 2**63 if kind == "eval_time_2_63" else time.time_ns()
    name = {"eval_nul_name": "rele\x00vance", "eval_long_name": "n" * 5000}.get(kind, "relevance")
    rec.attributes.extend(
        [
            KeyValue(key="gen_ai.evaluation.name", value=AnyValue(string_value=name)),
            KeyValue(key="gen_ai.evaluation.score.value", value=AnyValue(double_value=0.5)),
            KeyValue(key="gen_ai.response.id", value=AnyValue(string_value=f"chatcmpl-{i}")),
        ]
    )
    return req.SerializeToString()


def tenant_a(
    url: str, api_key: str, rate: float, stop: threading.Event, load: Load, poison: bool
) -> None:
    """Tenant A's spans at ``rate`` per second; every 100th record poison when ``poison``."""
    headers = {"Authorization": f"Bearer {api_key}"}
    exporter = RecordingExporter(
        load.acked, load.lock, endpoint=f"{url}/v1/traces", headers=headers
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "tenant-a"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    tracer = provider.get_tracer("poison-bench")
    rng = random.Random(35)
    http = httpx.Client(timeout=30, headers={**headers, "Content-Type": "application/x-protobuf"})
    t0, i, n_poison = time.perf_counter(), 0, 0
    while not stop.is_set():
        i += 1
        kind = None
        if poison and i % 100 == 0:
            n_poison += 1
            kinds = SPAN_POISON + LOG_POISON
            kind = kinds[n_poison % len(kinds)]
            load.poison[kind] = load.poison.get(kind, 0) + 1
        if kind in LOG_POISON:
            load.log_kinds[f"chatcmpl-{i}"] = kind
            r = http.post(f"{url}/v1/logs", content=log_export(kind, i))
            answer = r.status_code
            if (
                answer == 200
                and ExportLogsServiceResponse.FromString(
                    r.content
                ).partial_success.rejected_log_records
            ):
                answer = -200  # 200 with the record rejected in partialSuccess
            load.log_answers[answer] = load.log_answers.get(answer, 0) + 1
        else:
            prompt = f"order {i}: where is my parcel? mail me at user{i}@example.com"
            if kind == "nul":
                prompt = f"order {i}\x00 NUL inside"
            elif kind in ("token_redos", "email_redos"):
                prompt = adversarial(kind, rng)
            start = 2**63 + i if kind == "time_2_63" else time.time_ns()
            span = tracer.start_span(
                "chat gpt-4o-mini",
                kind=trace.SpanKind.CLIENT,
                start_time=start,
                attributes=chat_attrs(i, prompt),
            )
            span.end(end_time=start + 1000 if kind == "time_2_63" else None)
            if kind == "time_2_63":
                with load.lock:
                    load.invalid.add(key_of(span))  # type: ignore[arg-type]
        time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
    http.close()
    provider.shutdown()  # flushes what is queued


def tenant_b(url: str, api_key: str, rate: float, stop: threading.Event, load: Load) -> None:
    """Tenant B's ordinary spans at ``rate`` per second, one export each; notes send times."""
    exporter = RecordingExporter(
        load.acked,
        load.lock,
        endpoint=f"{url}/v1/traces",
        headers={"Authorization": f"Bearer {api_key}"},
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "tenant-b"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("poison-bench")
    t0, i = time.perf_counter(), 0
    while not stop.is_set():
        i += 1
        span = tracer.start_span(
            "chat gpt-4o-mini",
            kind=trace.SpanKind.CLIENT,
            attributes=chat_attrs(i, f"b question {i}"),
        )
        with load.lock:
            load.b_sent[key_of(span)] = time.time()  # type: ignore[arg-type]
        span.end()  # exported now (SimpleSpanProcessor)
        time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
    provider.shutdown()


def watch_b(db_url: str, stop: threading.Event, load: Load) -> None:
    """Every 50 ms: which of B's spans are in the store, noting when each first was."""
    eng = store_engine.make_engine(db_url)
    sql = text("SELECT trace_id, span_id FROM spans WHERE tenant = :t")
    try:
        while not stop.is_set():
            with eng.connect() as conn:
                rows = conn.execute(sql, {"t": B}).all()
            now = time.time()
            with load.lock:
                for t, s in rows:
                    load.b_seen.setdefault((t, s), now)
            stop.wait(0.05)
    finally:
        eng.dispose()


def metric_sum(url: str, api_key: str, name: str) -> float:
    """Sum of ``name`` over its labels on ``/metrics`` (0 when not exposed)."""
    body = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {api_key}"}).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def p99(values: list[float]) -> float:
    """Nearest-rank 99th percentile (an observed value; NaN when empty)."""
    return float(np.percentile(values, 99, method="inverted_cdf")) if values else float("nan")


def start(db_url: str, port: int, tmp: Path) -> subprocess.Popen[bytes]:
    """``driftline collector`` (API keys, spool on, default redaction) on ``db_url``."""
    spool = {"DRIFTLINE_SPOOL_ENABLED": "true", "DRIFTLINE_SPOOL_DIR": str(tmp / "spool")}
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": db_url, **spool}
    cmd = [sys.executable, "-m", "driftline.cli", "collector", "--port", str(port)]
    log = open(tmp / "collector.log", "wb")  # noqa: SIM115 (the process writes it)
    cmd += ["--grpc-port", "0", "--log-level", "warning"]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def drained(url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/healthz", timeout=10).json().get("spool_bytes", 0) == 0:
            return True
        time.sleep(0.2)
    return False


def run_phase(args: argparse.Namespace, db_url: str, tmp: Path, poison: bool) -> dict[str, float]:
    """One phase on a fresh store at ``db_url``: load for ``args.duration`` s, then drain."""
    store_engine.upgrade(db_url)
    eng = store_engine.make_engine(db_url)
    keys = {t: create_key(eng, t, "ingest") for t in (A, B)}
    ops = create_key(eng, "ops", "platform-admin")
    url = f"http://127.0.0.1:{args.port}"
    proc = start(db_url, args.port, tmp)
    load, stop_load, stop_watch = Load(), threading.Event(), threading.Event()
    try:
        wait_healthy(url, proc)
        threads = [
            threading.Thread(target=watch_b, args=(db_url, stop_watch, load)),
            threading.Thread(
                target=tenant_a, args=(url, keys[A], args.a_rate, stop_load, load, poison)
            ),
            threading.Thread(target=tenant_b, args=(url, keys[B], args.b_rate, stop_load, load)),
        ]
        for t in threads:
            t.start()
        time.sleep(args.duration)
        stop_load.set()
        for t in threads[1:]:
            t.join(120)
        ok = drained(url, args.drain_timeout)
        time.sleep(0.5)  # the watcher's last look
        stop_watch.set()
        threads[0].join(10)
        quarantined = metric_sum(url, ops, "driftline_spool_quarantined_records_total")
        health = httpx.get(f"{url}/healthz", timeout=10).json()
    finally:
        proc.terminate()
        proc.wait(60)
    with eng.connect() as conn:
        stored = {(t, s) for t, s in conn.execute(text("SELECT trace_id, span_id FROM spans"))}
        scores = conn.execute(
            text("SELECT response_id FROM external_scores WHERE tenant = :t"), {"t": A}
        ).all()
    evals: dict[str, int] = {}
    for (response_id,) in scores:
        kind = load.log_kinds.get(response_id, "?")
        evals[kind] = evals.get(kind, 0) + 1
    eng.dispose()
    valid = set(load.acked) - load.invalid
    delays = [
        load.b_seen.get(k, float("inf")) - sent
        for k, sent in load.b_sent.items()
        if k in load.acked
    ]
    name = "poison" if poison else "null baseline"
    print(
        f"{name}: valid spans acknowledged {len(valid)}, stored {len(valid & stored)}; "
        f"invalid acknowledged {len(load.invalid & set(load.acked))}, stored "
        f"{len(load.invalid & stored)}; B spans {len(delays)}, never queryable "
        f"{sum(d == float('inf') for d in delays)}, delay p50 "
        f"{np.percentile(delays, 50) if delays else float('nan'):.3f} s p99 {p99(delays):.3f} s "
        f"max {max(delays, default=float('nan')):.3f} s; poison sent {load.poison}; log "
        f"answers {load.log_answers}; evaluations stored {evals}; quarantined "
        f"{quarantined:.0f}; drained {ok}; healthz {health.get('status')}"
    )
    return {
        "ratio": len(valid & stored) / max(len(valid), 1),
        "delay_p99": p99(delays),
        "drained": float(ok),
    }


def fresh_store(args: argparse.Namespace, tmp: Path, phase: str) -> tuple[str, str | None]:
    """(database URL, PostgreSQL database to drop afterwards or None) for one phase."""
    if not args.pg_admin_url:
        return f"sqlite:///{tmp}/{phase}.db", None
    name = f"driftline_poison_{phase}_{os.getpid()}"
    with psycopg.connect(args.pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    base = args.pg_admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return f"{base}/{name}", name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load per phase")
    ap.add_argument("--a-rate", type=float, default=200.0, help="tenant A's spans per second")
    ap.add_argument("--b-rate", type=float, default=10.0, help="tenant B's spans per second")
    ap.add_argument("--port", type=int, default=14335)
    ap.add_argument("--drain-timeout", type=float, default=180.0)
    ap.add_argument(
        "--pg-admin-url",
        default=None,
        help="run on PostgreSQL: a fresh database per phase, created through this URL",
    )
    args = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    for phase, poison in (("null", False), ("poison", True)):
        tmp = Path(tempfile.mkdtemp(prefix=f"driftline-poison-{phase}-"))
        db_url, pg_name = fresh_store(args, tmp, phase)
        try:
            results[phase] = run_phase(args, db_url, tmp, poison)
        finally:
            if pg_name is not None:
                with psycopg.connect(args.pg_admin_url, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
    print(f"RESULT poison_valid_stored_ratio={results['poison']['ratio']:.4f} ratio")
    print(f"RESULT poison_other_tenant_delay_p99_s={results['poison']['delay_p99']:.3f} s")
    print(f"RESULT poison_null_baseline_delay_p99_s={results['null']['delay_p99']:.3f} s")
    print(f"RESULT poison_null_baseline_valid_stored_ratio={results['null']['ratio']:.4f} ratio")


if __name__ == "__main__":
    main()
