"""``driftline demo``: the whole product on its embedded default.

Default: real vLLM (CPU build here), the collector on SQLite under ``./driftline-data``, the
gateway with canary rollouts, judge, drift, alerts to a local signed-webhook receiver, the
dashboard, and load-generator traffic (see :mod:`driftline.demo.story`). ``--replay`` runs only
the collector with synthetic spans (no vLLM; seconds to start).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import httpx
import numpy as np

from driftline.demo.datadir import prepare_data_dir
from driftline.demo.processes import Processes, port_free, wait_http
from driftline.demo.replay import DEMO_SERVICE, replay


def _replay_summary(url: str, since: float) -> dict[str, Any]:
    items = httpx.get(
        f"{url}/api/v1/calls", params={"since": since, "limit": 1000}, timeout=10
    ).json()["items"]
    ttft = [c["ttft_s"] for c in items if c["ttft_s"] is not None]
    return {
        "calls": len(items),
        "merged": sum(1 for c in items if c["engine_span_id"]),
        "p95_ttft_s": float(np.percentile(ttft, 95)) if ttft else None,
        "cost_usd": sum(c["cost_usd"] for c in items if c["cost_usd"] is not None),
        "unpriced": sum(1 for c in items if "unpriced" in c["flags"]),
    }


def _replay_line(s: dict[str, Any]) -> str:
    p95 = f"{s['p95_ttft_s']:.3f} s" if s["p95_ttft_s"] is not None else "n/a"
    return (
        f"calls={s['calls']} (gateway+vLLM merged: {s['merged']})  p95 TTFT={p95}  "
        f"cost=${s['cost_usd']:.4f} (unpriced calls: {s['unpriced']})"
    )


def run_replay(
    data_dir: Path,
    duration: float | None,
    headless: bool,
    rate: float,
    seed: int,
    http_port: int,
    grpc_port: int,
    reset: bool = False,
) -> None:
    for port in (http_port, grpc_port):
        if not port_free("127.0.0.1", port):
            raise click.ClickException(f"port {port} is in use: stop what uses it and retry")
    click.echo(prepare_data_dir(data_dir, reset=reset, fresh_store=False))
    env = {
        **os.environ,
        "DRIFTLINE_DATABASE_URL": f"sqlite:///{data_dir.resolve()}/driftline.db",
        "DRIFTLINE_JUDGE_ENABLED": "false",
    }
    procs = Processes(data_dir)
    stop = threading.Event()
    url = f"http://127.0.0.1:{http_port}"
    started = time.time()
    try:
        click.echo(f"starting the collector (logs: {data_dir}/collector.log)")
        procs.start(
            "collector",
            [
                sys.executable,
                "-m",
                "driftline.cli",
                "collector",
                "--dev",
                "--port",
                str(http_port),
                "--grpc-port",
                str(grpc_port),
            ],
            env,
        )
        wait_http(f"{url}/healthz", procs, 90, "the collector")
        click.echo(
            f"collector: {url}  (API docs {url}/docs, metrics {url}/metrics, "
            f"OTLP/gRPC 127.0.0.1:{grpc_port})"
        )
        click.echo(
            f"replaying synthetic sample spans at ~{rate:g} calls/s (service.name={DEMO_SERVICE})"
        )
        sender = threading.Thread(
            target=replay, daemon=True, args=(f"{url}/v1/traces", stop, random.Random(seed), rate)
        )
        sender.start()
        deadline = time.monotonic() + duration if duration else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(min(3.0, max(0.1, (deadline or 1e18) - time.monotonic())))
            procs.check()
            if not headless:
                click.echo(_replay_line(_replay_summary(url, started)))
        stop.set()
        sender.join(15)
        time.sleep(1.0)
        click.echo("summary: " + _replay_line(_replay_summary(url, started)))
    except KeyboardInterrupt:
        click.echo("stopping")
    finally:
        stop.set()
        procs.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@click.command("demo")
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option("--headless", is_flag=True, help="No live screen; print a summary and exit 0.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("driftline-data"))
@click.option(
    "--replay", is_flag=True, help="Collector + synthetic spans only (no vLLM, starts in seconds)."
)
@click.option("--rate", type=float, default=None, help="Requests (or replayed calls) per second.")
@click.option("--no-dashboard", is_flag=True, help="Do not start the Streamlit dashboard.")
@click.option(
    "--engine",
    type=click.Choice(["vllm", "echo"]),
    default="vllm",
    show_default=True,
    help="echo: a model-free stand-in (rehearsal, slow-engine test); no real answers.",
)
@click.option("--engine-ttft", type=float, default=0.0, help="Echo engine: seconds to 1st token.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--reset",
    is_flag=True,
    help="Delete the previous run's database, logs and summary in the data folder first.",
)
@click.option("--port", "http_port", type=int, default=4318, show_default=True)
@click.option("--grpc-port", type=int, default=4317, show_default=True)
@click.option("--gateway-port", type=int, default=8000, show_default=True)
@click.option("--engine-port", type=int, default=8100, show_default=True)
@click.option("--dashboard-port", type=int, default=8501, show_default=True)
@click.option("--receiver-port", type=int, default=9099, show_default=True)
def demo(
    duration: float | None,
    headless: bool,
    data_dir: Path,
    replay: bool,
    rate: float | None,
    no_dashboard: bool,
    engine: str,
    engine_ttft: float,
    seed: int,
    reset: bool,
    http_port: int,
    grpc_port: int,
    gateway_port: int,
    engine_port: int,
    dashboard_port: int,
    receiver_port: int,
) -> None:
    """Run driftline end to end on its embedded default (Ctrl-C stops everything)."""
    # `kill` / a CI timeout (SIGTERM) stops the children like Ctrl-C does: no orphans
    signal.signal(signal.SIGTERM, _interrupt)
    if replay:
        run_replay(data_dir, duration, headless, rate or 5.0, seed, http_port, grpc_port, reset)
        return
    from driftline.demo.story import DemoConfig, run_story
    from driftline.demo.summary import story_lines

    cfg = DemoConfig(
        data_dir=data_dir,
        duration_s=duration,
        headless=headless,
        seed=seed,
        http_port=http_port,
        grpc_port=grpc_port,
        gateway_port=gateway_port,
        engine_port=engine_port,
        dashboard_port=dashboard_port,
        receiver_port=receiver_port,
        dashboard=not no_dashboard,
        reset=reset,
        engine=engine,
        engine_ttft_s=engine_ttft,
        rate_requested=rate,
    )
    try:
        summary = run_story(cfg)
    except KeyboardInterrupt:
        click.echo("stopped")
        return
    (data_dir / "demo-summary.json").write_text(json.dumps(summary, indent=2, default=str))
    click.echo("\n" + click.style("What happened", bold=True))
    for line in story_lines(summary):
        click.echo("  - " + line)
    click.echo(f"(full evidence: {data_dir}/demo-summary.json)")
