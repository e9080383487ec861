"""Latency the gateway adds over calling the engine directly, at 50 concurrent SSE streams.

Set-up: the deterministic echo engine (``serving.echo_engine``: 20 ms to the first token, then
10 ms per token, 16 tokens) in one process, the gateway (routing, admission, token budget,
CLIENT span through a BatchSpanProcessor, SSE relay) in another, the client here. Waves of
``--concurrency`` simultaneous streaming chat requests alternate between the engine and the
gateway, so both see the same machine load. Reported:

* ``gateway_added_p50_ms`` / ``gateway_added_p99_ms``: percentile of end-to-end time through
  the gateway minus the same percentile direct (milliseconds);
* ``gateway_added_ttft_p50_ms``: the same for time to first content chunk.

Run: ``.venv/bin/python benchmarks/gateway.py`` (default < 60 s).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_engine(port: int, ttft_s: float, itl_s: float, tokens: int) -> None:
    import uvicorn

    from serving.echo_engine import EchoEngineState, create_echo_engine

    state = EchoEngineState(
        models=("base", "cand"), ttft_s=ttft_s, itl_s=itl_s, default_max_tokens=tokens
    )
    uvicorn.run(
        create_echo_engine(state),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )


def _run_gateway(port: int, engine_url: str) -> None:
    import uvicorn
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from serving.config import demo_config
    from serving.gateway import create_gateway_app
    from serving.settings import GatewaySettings

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    settings = GatewaySettings(
        engine_url=engine_url, collector_url=None, gateway_otlp_endpoint=None, max_concurrency=256
    )
    app = create_gateway_app(
        settings,
        demo_config("base", "cand", 0.5),
        tracer_provider=provider,
        rng=np.random.default_rng(0),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _wait(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)


async def _one(client: httpx.AsyncClient, url: str, model: str, i: int) -> tuple[float, float]:
    body = {
        "model": model,
        "stream": True,
        "user": f"user-{i}",
        "messages": [{"role": "user", "content": f"question number {i} about billing"}],
    }
    t0 = time.perf_counter()
    ttft = float("nan")
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if ttft != ttft and '"content":"' in line and '"content":""' not in line:
                ttft = time.perf_counter() - t0
    return time.perf_counter() - t0, ttft


async def _measure(engine: str, gateway: str, waves: int, conc: int) -> dict[str, np.ndarray]:
    out: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
    limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        for warm in range(2):  # warm up connections on both paths
            await asyncio.gather(*(_one(client, engine, "base", i) for i in range(conc)))
            await asyncio.gather(*(_one(client, gateway, "support-bot", i) for i in range(conc)))
            del warm
        for w in range(waves):
            order = [("direct", engine, "base"), ("gateway", gateway, "support-bot")]
            if w % 2:
                order.reverse()
            for name, url, model in order:
                res = await asyncio.gather(
                    *(_one(client, url, model, w * conc + i) for i in range(conc))
                )
                out[name].extend(res)
    return {k: np.array(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print ``RESULT`` lines."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--waves", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    ep, gp = _free_port(), _free_port()
    engine_url, gateway_url = f"http://127.0.0.1:{ep}", f"http://127.0.0.1:{gp}"
    procs = [
        ctx.Process(
            target=_run_engine,
            args=(ep, args.ttft_ms / 1000, args.itl_ms / 1000, args.tokens),
            daemon=True,
        ),
        ctx.Process(target=_run_gateway, args=(gp, engine_url), daemon=True),
    ]
    for p in procs:
        p.start()
    try:
        _wait(f"{engine_url}/health")
        _wait(f"{gateway_url}/healthz")
        t0 = time.perf_counter()
        res = asyncio.run(_measure(engine_url, gateway_url, args.waves, args.concurrency))
        elapsed = time.perf_counter() - t0
    finally:
        for p in procs:
            p.terminate()
            p.join(timeout=10)
    d, g = res["direct"], res["gateway"]
    p50 = (np.percentile(g[:, 0], 50) - np.percentile(d[:, 0], 50)) * 1000
    p99 = (np.percentile(g[:, 0], 99) - np.percentile(d[:, 0], 99)) * 1000
    ttft50 = (np.nanpercentile(g[:, 1], 50) - np.nanpercentile(d[:, 1], 50)) * 1000
    print(
        f"# {len(d)} direct + {len(g)} gateway streams at concurrency {args.concurrency}, "
        f"{elapsed:.1f} s; direct e2e p50 {np.percentile(d[:, 0], 50) * 1000:.1f} ms "
        f"p99 {np.percentile(d[:, 0], 99) * 1000:.1f} ms"
    )
    print(f"RESULT gateway_added_p50_ms={p50:.2f} ms")
    print(f"RESULT gateway_added_p99_ms={p99:.2f} ms")
    print(f"RESULT gateway_added_ttft_p50_ms={ttft50:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
