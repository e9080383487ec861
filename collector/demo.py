"""``driftline demo``: run the product on its embedded default and show it working.

Current stage: the collector (SQLite under ``./driftline-data``, OTLP/HTTP 4318, OTLP/gRPC 4317)
plus a replay of sample spans sent through the real OpenTelemetry SDK exporter: OpenAI-style
semconv client spans and gateway spans with their vLLM ``llm_request`` children (merged into
one call record by the collector). The replay is synthetic and labelled so
(``service.name=driftline-demo-replay``). A live summary is printed until Ctrl-C, or for
``--duration`` seconds with ``--headless``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import httpx
import numpy as np

DEMO_SERVICE = "driftline-demo-replay"


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class Processes:
    """Child processes started in their own process group, all stopped on exit."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        fh = log.open("ab")
        proc = subprocess.Popen(
            argv, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append((name, proc))

    def check(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise click.ClickException(f"{name} exited with code {proc.returncode}")

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for _, proc in reversed(self.procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def wait_healthy(url: str, procs: Processes, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        procs.check()
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise click.ClickException(f"{url} did not become healthy in {timeout_s:.0f} s")


def replay(endpoint: str, stop: threading.Event, rng: random.Random, rate_per_s: float) -> None:
    """Send sample spans through the real OTLP/HTTP exporter until ``stop`` is set."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    def provider(service: str) -> TracerProvider:
        p = TracerProvider(resource=Resource.create({"service.name": service}))
        p.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=500)
        )
        return p

    app, gateway, engine = (
        provider(DEMO_SERVICE),
        provider(f"{DEMO_SERVICE}-gateway"),
        provider(f"{DEMO_SERVICE}-vllm"),
    )
    app_t = app.get_tracer("opentelemetry.instrumentation.openai_v2")
    gw_t = gateway.get_tracer("driftline.gateway")
    vllm_t = engine.get_tracer("vllm.tracing.otel")
    try:
        while not stop.is_set():
            now = time.time_ns()
            out_tokens = rng.randint(20, 300)
            ttft = rng.lognormvariate(-2.3, 0.4)
            tpot = rng.uniform(0.015, 0.04)
            e2e = ttft + tpot * (out_tokens - 1)
            if rng.random() < 0.5:
                model = rng.choice(["gpt-4o-mini", "gpt-4o", "claude-sonnet-4"])
                s = app_t.start_span(f"chat {model}", kind=trace.SpanKind.CLIENT, start_time=now)
                s.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": model,
                        "gen_ai.usage.input_tokens": rng.randint(50, 1500),
                        "gen_ai.usage.output_tokens": out_tokens,
                        "gen_ai.response.time_to_first_chunk": ttft,
                        "gen_ai.response.finish_reasons": [rng.choice(["stop"] * 9 + ["length"])],
                        "user.id": f"user-{rng.randint(1, 50)}",
                    }
                )
                s.end(end_time=now + int(e2e * 1e9))
            else:
                variant = "candidate" if rng.random() < 0.1 else "base"
                g = gw_t.start_span(f"chat {variant}", kind=trace.SpanKind.CLIENT, start_time=now)
                g.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "vllm",
                        "gen_ai.request.model": variant,
                        "driftline.rollout": "support-assistant",
                        "driftline.variant": variant,
                        "gen_ai.usage.input_tokens": rng.randint(50, 800),
                        "gen_ai.usage.output_tokens": out_tokens,
                        "gen_ai.response.time_to_first_chunk": ttft + 0.002,
                    }
                )
                ctx = trace.set_span_in_context(g)
                queue = rng.uniform(0.0, 0.02)
                e = vllm_t.start_span(
                    "llm_request",
                    context=ctx,
                    kind=trace.SpanKind.SERVER,
                    start_time=now + 1_000_000,
                )
                e.set_attributes(
                    {
                        "gen_ai.latency.time_in_queue": queue,
                        "gen_ai.latency.time_in_model_prefill": max(ttft - queue, 0.001),
                        "gen_ai.latency.time_in_model_decode": e2e - ttft,
                        "gen_ai.latency.time_to_first_token": ttft,
                        "gen_ai.latency.e2e": e2e,
                        "gen_ai.usage.completion_tokens": out_tokens,
                    }
                )
                e.end(end_time=now + int(e2e * 1e9))
                g.end(end_time=now + int((e2e + 0.003) * 1e9))
            stop.wait(rng.expovariate(rate_per_s))
    finally:
        for p in (app, gateway, engine):
            p.shutdown()


def summary(url: str, since: float) -> dict[str, Any]:
    items = httpx.get(
        f"{url}/api/v1/calls", params={"since": since, "limit": 1000}, timeout=10
    ).json()["items"]
    ttft = [c["ttft_s"] for c in items if c["ttft_s"] is not None]
    costs = [c["cost_usd"] for c in items if c["cost_usd"] is not None]
    merged = sum(1 for c in items if c["engine_span_id"])
    return {
        "calls": len(items),
        "merged_gateway_vllm": merged,
        "p95_ttft_s": float(np.percentile(ttft, 95)) if ttft else None,
        "cost_usd": sum(costs),
        "unpriced": sum(1 for c in items if "unpriced" in c["flags"]),
    }


def _fmt(s: dict[str, Any]) -> str:
    p95 = f"{s['p95_ttft_s']:.3f} s" if s["p95_ttft_s"] is not None else "n/a"
    return (
        f"calls={s['calls']} (gateway+vLLM merged: {s['merged_gateway_vllm']})  "
        f"p95 TTFT={p95}  cost=${s['cost_usd']:.4f} (unpriced calls: {s['unpriced']})"
    )


@click.command("demo")
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option("--headless", is_flag=True, help="No live screen; print a summary and exit 0.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("driftline-data"))
@click.option("--rate", type=float, default=5.0, show_default=True, help="Replayed calls/s.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--port", "http_port", type=int, default=4318, show_default=True)
@click.option("--grpc-port", type=int, default=4317, show_default=True)
def demo(
    duration: float | None,
    headless: bool,
    data_dir: Path,
    rate: float,
    seed: int,
    http_port: int,
    grpc_port: int,
) -> None:
    """Run the collector on SQLite and replay sample gen_ai spans into it (Ctrl-C stops)."""
    host = "127.0.0.1"
    for port in (http_port, grpc_port):
        if not port_free(host, port):
            raise click.ClickException(f"port {port} is in use: stop what uses it and retry")
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": f"sqlite:///{data_dir.resolve()}/driftline.db"}
    procs = Processes()
    stop = threading.Event()
    url = f"http://{host}:{http_port}"
    started = time.time()
    try:
        click.echo(f"starting the collector (logs: {data_dir}/collector.log)")
        procs.start(
            "collector",
            [
                sys.executable,
                "-m",
                "collector.cli",
                "collector",
                "--dev",
                "--port",
                str(http_port),
                "--grpc-port",
                str(grpc_port),
            ],
            env,
            data_dir / "collector.log",
        )
        wait_healthy(url, procs)
        click.echo(
            f"collector: {url}  (API docs {url}/docs, metrics {url}/metrics, "
            f"OTLP/gRPC {host}:{grpc_port})"
        )
        click.echo(
            f"replaying synthetic sample spans at ~{rate:g} calls/s (service.name={DEMO_SERVICE})"
        )
        sender = threading.Thread(
            target=replay, args=(f"{url}/v1/traces", stop, random.Random(seed), rate), daemon=True
        )
        sender.start()
        deadline = time.monotonic() + duration if duration else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(min(3.0, max(0.1, (deadline or 1e18) - time.monotonic())))
            procs.check()
            if not headless:
                click.echo(_fmt(summary(url, started)))
        stop.set()
        sender.join(15)
        time.sleep(1.0)
        click.echo("summary: " + _fmt(summary(url, started)))
    except KeyboardInterrupt:
        click.echo("stopping")
    finally:
        stop.set()
        procs.stop()
