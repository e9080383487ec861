"""The serving tier against echo engines: added latency, prefix routing, tenant and class isolation.

Set-up: three deterministic echo engines (``serving.echo_engine``: 20 ms to the first token,
then 10 ms per token, 16 tokens; each with its own **simulated** prefix cache, see that
module) in separate processes, and gateway processes in front of all three (``replicas``
config, routing on). The client is this process. Reported (``RESULT name=value unit``):

1. ``gateway_added_p50_ms`` / ``gateway_added_p99_ms`` / ``gateway_added_ttft_p50_ms``: waves of
   ``--concurrency`` streaming chats alternate between the engines directly (the client spreads
   them round-robin) and the prefix-routing gateway, so both see the same machine load; the
   percentile through the gateway minus the same percentile direct. ``gateway_cpu_ms_per_stream``
   is the gateway process's CPU time (user + system, ``/proc``) per stream relayed.
2. ``prefix_hit_rate_prefix`` / ``prefix_hit_rate_round_robin`` and their ratio: a shared-prompt
   workload (``--personas`` system prompts of 160 words, different user questions) through a
   prefix-aware gateway and through a round-robin gateway, each with its own persona set so
   neither warms the other; the hit rate is the engines' own ``vllm:prefix_cache_hits /
   queries`` delta. Each engine caches ``--cache-blocks`` blocks of 16 words, half the
   personas' working set: a finite KV cache, as on a real replica.
3. ``calm_p99_alone_ms`` / ``calm_p99_with_noisy_ms``: one tenant's p99 alone, then while a
   second tenant floods above its rate limit (``noisy_429_share`` of its requests get 429).
4. ``interactive_queue_p95_ms`` while a batch flood runs, against the queue SLO (500 ms).

What section 1 charges to the gateway (method notes): the client (this process) and the
engines do the same work per stream on both paths (same bodies, same tokens, same client
connection pool), and the gateway process idles during the direct waves, so the difference is the
gateway's own cost: its CPU, one more process hop per chunk, and, on a machine whose cores are
shared with the engines and the client (2 cores here, often with other jobs), the CPU queueing
its work causes for everyone. The last part is real on such a machine but would not exist on
dedicated gateway cores, so the added-latency figures are an upper bound there; the CPU per
stream is the load-independent figure (what it means: 50 streams of 16 tokens in 200 ms need
``50 * cpu_ms / 200`` of one core). Spans are encoded to OTLP protobuf and dropped (the encoding
CPU a deployment pays, less the HTTP post), not kept as Python objects. The waves start 50
requests at once: a burst the single gateway process serialises while direct requests are spread
over three engine processes; ``--concurrency 1 --waves 300`` (300 streams per path) shows the
added latency without that (its CPU per stream includes the health checks, amortised over fewer
streams).
The machine's load average is printed at the start and end of each run.

Run: ``.venv/bin/python benchmarks/gateway.py`` (a few minutes on 2 busy cores);
``--sections 1`` runs only the added-latency section, ``--profile PATH`` writes the routing
gateway's cProfile stats (read them with ``python -m pstats PATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing as mp
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


CALM = {"authorization": "Bearer sk-calm"}  # a tenant without limits


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_engine(port: int, ttft_s: float, itl_s: float, tokens: int, blocks: int) -> None:
    import uvicorn

    from serving.echo_engine import EchoEngineState, create_echo_engine

    state = EchoEngineState(
        models=("base",),
        ttft_s=ttft_s,
        itl_s=itl_s,
        default_max_tokens=tokens,
        prefix_cache_blocks=blocks,
    )
    app = create_echo_engine(state)
    # long server keep-alive: on a saturated machine a 5 s timer can fire while the client is
    # already reusing the connection (the httpx.ReadError of the first version of this script)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=75,
    )


def _run_gateway(
    port: int, config: dict[str, Any], max_concurrency: int, profile: str | None = None
) -> None:
    import uvicorn
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class EncodingExporter(SpanExporter):
        """Encode each batch to OTLP protobuf bytes (as the OTLP exporters do) and drop it."""

        def export(self, spans: Any) -> SpanExportResult:
            encode_spans(spans).SerializeToString()
            return SpanExportResult.SUCCESS

    from serving.config import parse_config
    from serving.gateway import create_gateway_app
    from serving.settings import GatewaySettings

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(EncodingExporter()))
    settings = GatewaySettings(
        collector_url=None, gateway_otlp_endpoint=None, max_concurrency=max_concurrency
    )
    app = create_gateway_app(
        settings, parse_config(config), tracer_provider=provider, rng=np.random.default_rng(0)
    )
    run = functools.partial(
        uvicorn.run,
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=75,
    )
    if profile is None:
        run()
        return
    import cProfile
    import signal

    # uvicorn shuts down on SIGTERM (Process.terminate), then re-raises it with the handler
    # that was there before: a no-op one lets run() return and the stats get written
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    # timer: CPU time of the event-loop thread, not wall time (on busy cores a wall-clock
    # profile charges a write() with the time the woken peer process ran)
    with cProfile.Profile(time.thread_time) as prof:
        run()
    prof.dump_stats(profile)


def _wait(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)


def _loadavg() -> str:
    """The 1, 5 and 15 min load averages (``/proc/loadavg``), as ``uptime`` prints them."""
    return ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_split_s(pid: int) -> tuple[float, float]:
    """``(user_s, system_s)`` CPU time of process ``pid`` so far (``/proc``, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


async def _one(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[float, float, int, float]:
    """``(e2e_s, ttft_s, status, gateway_queue_s)`` of one streamed chat; status 0 when the
    connection failed (counted and reported, not timed)."""
    t0 = time.perf_counter()
    ttft = float("nan")
    try:
        async with client.stream(
            "POST", f"{url}/v1/chat/completions", json={**body, "stream": True}, headers=headers
        ) as r:
            queue = float(r.headers.get("x-driftline-queue-s", "nan"))
            async for line in r.aiter_lines():
                if ttft != ttft and '"content":"' in line and '"content":""' not in line:
                    ttft = time.perf_counter() - t0
    except httpx.TransportError:
        return float("nan"), float("nan"), 0, float("nan")
    return time.perf_counter() - t0, ttft, r.status_code, queue


def _chat(i: int, system: str = "you are a helpful billing assistant") -> dict[str, Any]:
    return {
        "model": "base",
        "user": f"user-{i}",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": f"question number {i} about billing"},
        ],
    }


def _client(conc: int) -> httpx.AsyncClient:
    # keep-alive below the servers' (uvicorn 5 s) so no request rides a closing connection
    limits = httpx.Limits(
        max_connections=conc * 4, max_keepalive_connections=conc * 4, keepalive_expiry=1.0
    )
    return httpx.AsyncClient(limits=limits, timeout=120)


async def _latency(engines: list[str], gateway: str, waves: int, conc: int) -> dict[str, Any]:
    out: dict[str, list[tuple[float, float, int, float]]] = {"direct": [], "gateway": []}
    async with _client(conc) as client:

        async def wave(name: str, w: int) -> list[tuple[float, float, int, float]]:
            urls = [gateway] * conc if name == "gateway" else [engines[i % 3] for i in range(conc)]
            return await asyncio.gather(
                *(_one(client, urls[i], _chat(w * conc + i), CALM) for i in range(conc))
            )

        await wave("direct", -1), await wave("gateway", -1)  # warm connections
        for w in range(waves):
            order = ["direct", "gateway"] if w % 2 == 0 else ["gateway", "direct"]
            for name in order:
                out[name].extend(await wave(name, w))
    return {k: np.array(v) for k, v in out.items()}


async def _hit_rate(engines: list[str], gateway: str, tag: str, n: int, personas: int) -> float:
    async def counters() -> tuple[float, float]:
        q = h = 0.0
        async with httpx.AsyncClient(timeout=10) as c:
            for e in engines:
                for line in (await c.get(f"{e}/metrics")).text.splitlines():
                    if line.startswith("vllm:prefix_cache_queries_total"):
                        q += float(line.split()[-1])
                    elif line.startswith("vllm:prefix_cache_hits_total"):
                        h += float(line.split()[-1])
        return q, h

    words = [f"{tag}{k}rule{j}" for k in range(personas) for j in range(160)]
    systems = [" ".join(words[k * 160 : (k + 1) * 160]) for k in range(personas)]
    rng = np.random.default_rng(1)
    q0, h0 = await counters()
    async with _client(10) as client:
        for start in range(0, n, 10):
            await asyncio.gather(
                *(
                    _one(client, gateway, _chat(i, systems[int(rng.integers(personas))]), CALM)
                    for i in range(start, min(n, start + 10))
                )
            )
    q1, h1 = await counters()
    return (h1 - h0) / (q1 - q0)


async def _tenants(gateway: str, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    calm = CALM
    noisy = {"authorization": "Bearer sk-noisy"}
    async with _client(20) as client:

        async def calm_run() -> np.ndarray:
            res = []
            for start in range(0, n, 10):
                res += await asyncio.gather(
                    *(_one(client, gateway, _chat(i), calm) for i in range(start, start + 10))
                )
            return np.array([r[0] for r in res if r[2] == 200])  # 429s are the other tenant

        alone = await calm_run()
        stop = asyncio.Event()
        statuses: list[int] = []

        async def flood() -> None:
            while not stop.is_set():
                got = await asyncio.gather(
                    *(_one(client, gateway, _chat(i), noisy) for i in range(10))
                )
                statuses.extend(g[2] for g in got)
                await asyncio.sleep(0.05)

        task = asyncio.create_task(flood())
        together = await calm_run()
        stop.set()
        await task
    return alone, together, float(np.mean(np.array(statuses) == 429))


async def _classes(gateway: str, n: int) -> np.ndarray:
    async with _client(60) as client:
        batch = [
            asyncio.create_task(_one(client, gateway, _chat(i), {"x-driftline-class": "batch"}))
            for i in range(200)
        ]
        inter = []
        for start in range(0, n, 8):
            inter += await asyncio.gather(
                *(_one(client, gateway, _chat(i)) for i in range(start, start + 8))
            )
        await asyncio.gather(*batch)
    return np.array([r[3] for r in inter if r[2] == 200])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print ``RESULT`` lines."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--waves", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--prefix-requests", type=int, default=300)
    ap.add_argument("--personas", type=int, default=12)
    ap.add_argument(
        "--sections",
        default="1,2,3,4",
        help="comma-separated sections of the module doc to run (default: all)",
    )
    ap.add_argument(
        "--profile",
        default=None,
        metavar="PATH",
        help="run the routing gateway under cProfile (thread CPU time) and write its stats to "
        "PATH (pstats)",
    )
    args = ap.parse_args(argv)
    try:
        sections = {int(x) for x in args.sections.split(",") if x.strip()}
    except ValueError:
        ap.error(f"--sections: comma-separated numbers 1-4, got {args.sections!r}")
    if not sections or not sections <= {1, 2, 3, 4}:
        ap.error(f"--sections: comma-separated numbers 1-4, got {args.sections!r}")
    blocks = args.personas * 10 // 2  # half of the personas' 10 blocks each
    ctx = mp.get_context("spawn")
    eports = [_free_port() for _ in range(3)]
    engines = [f"http://127.0.0.1:{p}" for p in eports]
    replicas = [{"url": u, "models": ["base"]} for u in engines]
    limits = {"tenants": {"noisy": {"requests_per_s": 5, "burst": 5}}}
    keys = {"sk-calm": "calm", "sk-noisy": "noisy"}
    gw_cfg = {"replicas": replicas, "api_keys": keys, "limits": limits}
    rr_cfg = {"replicas": replicas, "api_keys": keys, "routing": {"policy": "round_robin"}}
    cls_cfg = {"replicas": replicas, "traffic": {"batch_share": 0.25}}
    gports = [_free_port() for _ in range(3)]
    gws = [f"http://127.0.0.1:{p}" for p in gports]
    procs = [
        ctx.Process(
            target=_run_engine,
            args=(p, args.ttft_ms / 1000, args.itl_ms / 1000, args.tokens, blocks),
            daemon=True,
        )
        for p in eports
    ]
    needed = {0: bool(sections & {1, 2, 3}), 1: 2 in sections, 2: 4 in sections}
    gw_procs: dict[int, Any] = {}
    for i, (port, cfg, conc) in enumerate(
        zip(gports, (gw_cfg, rr_cfg, cls_cfg), (256, 256, 24), strict=True)
    ):
        if needed[i]:
            prof = args.profile if i == 0 else None
            gw_procs[i] = ctx.Process(
                target=_run_gateway, args=(port, cfg, conc, prof), daemon=True
            )
    procs += gw_procs.values()
    for p in procs:
        p.start()
    try:
        for e in engines:
            _wait(f"{e}/health")
        for i in gw_procs:
            _wait(f"{gws[i]}/healthz")
        print(f"# load average at start: {_loadavg()}", flush=True)
        if 1 in sections:
            gpid = gw_procs[0].pid
            assert gpid is not None
            print(f"# routing gateway pid {gpid} (attach a sampling profiler)", flush=True)
            (u0, s0), t0 = _cpu_split_s(gpid), time.perf_counter()
            res = asyncio.run(_latency(engines, gws[0], args.waves, args.concurrency))
            u1, s1 = _cpu_split_s(gpid)
            cpu_user, cpu_sys = u1 - u0, s1 - s0
            cpu = cpu_user + cpu_sys
            elapsed = time.perf_counter() - t0
        if 2 in sections:
            hit_p = asyncio.run(
                _hit_rate(engines, gws[0], "p", args.prefix_requests, args.personas)
            )
            hit_rr = asyncio.run(
                _hit_rate(engines, gws[1], "r", args.prefix_requests, args.personas)
            )
        if 3 in sections:
            alone, together, share429 = asyncio.run(_tenants(gws[0], 100))
        if 4 in sections:
            inter_q = asyncio.run(_classes(gws[2], 96))
        print(f"# load average at end: {_loadavg()}", flush=True)
    finally:
        for p in procs:
            p.terminate()
            p.join(timeout=30)
    if 1 in sections:
        d_all, g_all = res["direct"], res["gateway"]
        d, g = d_all[d_all[:, 2] == 200], g_all[g_all[:, 2] == 200]
        added = {
            q: (np.percentile(g[:, 0], q) - np.percentile(d[:, 0], q)) * 1000 for q in (50, 99)
        }
        ttft50 = (np.nanpercentile(g[:, 1], 50) - np.nanpercentile(d[:, 1], 50)) * 1000
        print(
            f"# {len(d)} direct + {len(g)} gateway streams at concurrency {args.concurrency} "
            f"over 3 replicas, {elapsed:.1f} s; direct e2e p50 "
            f"{np.percentile(d[:, 0], 50) * 1000:.1f} ms "
            f"p99 {np.percentile(d[:, 0], 99) * 1000:.1f} ms (2 shared cores: CPU contention "
            "dominates both)"
        )
        print(f"RESULT direct_failed_streams={int((d_all[:, 2] != 200).sum())} streams")
        print(f"RESULT gateway_failed_streams={int((g_all[:, 2] != 200).sum())} streams")
        print(f"RESULT gateway_added_p50_ms={added[50]:.2f} ms")
        print(f"RESULT gateway_added_p99_ms={added[99]:.2f} ms")
        print(f"RESULT gateway_added_ttft_p50_ms={ttft50:.2f} ms")
        print(
            f"# gateway CPU per stream: user {cpu_user / len(g) * 1000:.2f} ms, "
            f"system {cpu_sys / len(g) * 1000:.2f} ms"
        )
        print(f"RESULT gateway_cpu_ms_per_stream={cpu / len(g) * 1000:.2f} ms")
    if 2 in sections:
        print(f"RESULT prefix_hit_rate_prefix={hit_p:.3f} ratio")
        print(f"RESULT prefix_hit_rate_round_robin={hit_rr:.3f} ratio")
        print(f"RESULT prefix_hit_rate_prefix_over_round_robin={hit_p / max(hit_rr, 1e-9):.2f} x")
    if 3 in sections:
        print(f"RESULT calm_p99_alone_ms={np.percentile(alone, 99) * 1000:.1f} ms")
        print(f"RESULT calm_p99_with_noisy_ms={np.percentile(together, 99) * 1000:.1f} ms")
        print(f"RESULT noisy_429_share={share429:.3f} ratio")
    if 4 in sections:
        q95 = np.percentile(inter_q, 95) * 1000
        print(f"RESULT interactive_queue_p95_ms={q95:.1f} ms (slo 500)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
