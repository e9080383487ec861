"""The demo story on real vLLM: collector, vLLM with two LoRA adapters, the gateway with canary
rollouts, the judge, drift, alerts to a local signed-webhook receiver, the dashboard, and traffic
from the load generator with simulated users and feedback.

Nothing is scripted to "happen": the summary reads the collector's API and reports what the
statistics decided (or that they did not decide).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from alerts.signing import generate_secret
from driftline.demo.api_client import Api, upsert_rules
from driftline.demo.datadir import prepare_data_dir
from driftline.demo.processes import Processes, port_free, wait_http
from driftline.demo.receiver import WebhookReceiver
from driftline.demo.story_config import (
    ALERT_RULES,
    BAD_FIRST_PCT,
    BASE_MODEL,
    GOOD_FIRST_PCT,
    ROLLOUT_BAD,
    ROLLOUT_GOOD,
    collector_env,
    gateway_config,
    receivers_config,
    rollout_body,
)
from driftline.demo.warmup import LoadPlan, measure_throughput, plan_load

__all__ = [
    "ALERT_RULES",
    "BASE_MODEL",
    "ROLLOUT_BAD",
    "ROLLOUT_GOOD",
    "DemoConfig",
    "collector_env",
    "rollout_body",
    "run_story",
]

MIX = "billing=3,account=2,shipping=3,returns=2"
SHIFT = "complaint=3,technical=3,product=2"
#: canary steps (%). The risky candidate starts as a 10 % canary; the second one is an A/B test
#: at 50 %: showing *non-inferiority* (no worse than the margin) needs far more votes than showing
#: harm (~100 thumbs votes here, measured), which a 10 % share of what two CPU cores serve while
#: a LoRA adapter is in the batch (~2.2 req/s at 16 tokens) does not give in five minutes
BAD_STEPS = (10.0, 50.0, 100.0)
GOOD_STEPS = (50.0, 100.0)
assert BAD_STEPS[0] == BAD_FIRST_PCT and GOOD_STEPS[0] == GOOD_FIRST_PCT  # gateway.yaml's start
#: the A/B rollout starts this long after the traffic (s), on its own share of the load
GOOD_START_S = 20.0
#: share of ``--rate`` sent to the A/B rollout; the canary gets the rest
GOOD_LOAD_SHARE = 0.4
#: seconds between two progress lines (headless too: a CI log shows the evidence growing)
PROGRESS_EVERY_S = 15.0
#: seconds between the end of the traffic and the summary (spans, decisions and alerts land)
DRAIN_S = 15.0
#: seconds into the traffic when the topic mix shifts (at most half-way through ``--duration``):
#: fixed, so a long cap (``--duration 600``) does not push the shift, and the drift flag, late
SHIFT_AFTER_S = 120.0
#: headless: once the canary decided and drift flagged, seconds the A/B rollout may still take
#: before the traffic ends (it needs more votes; a slow machine would otherwise run to the cap)
AB_GRACE_S = 60.0


@dataclass
class DemoConfig:
    """Ports, durations and load of one demo run (seconds, requests/s)."""

    data_dir: Path
    duration_s: float | None
    headless: bool
    rate: float = 1.5
    concurrency: int = 6
    max_tokens: int = 16
    seed: int = 0
    http_port: int = 4318
    grpc_port: int = 4317
    gateway_port: int = 8000
    engine_port: int = 8100
    dashboard_port: int = 8501
    receiver_port: int = 9099
    dashboard: bool = True
    reset: bool = False
    #: ``vllm`` (the real engine) or ``echo`` (serving/echo_engine.py, no model: a slow-engine
    #: rehearsal with ``engine_ttft_s``)
    engine: str = "vllm"
    engine_ttft_s: float = 0.0
    #: the rate the user asked for (--rate); None: fitted to the engine's measured throughput
    rate_requested: float | None = None
    secret: str = field(default_factory=generate_secret)

    @property
    def collector_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "driftline.cli", *args]


def _step(msg: str) -> None:
    click.echo(click.style("» ", fg="cyan") + msg)


def ensure_serving(cfg: DemoConfig) -> None:
    """Install the vLLM CPU environment and prepare model + adapters (both idempotent)."""
    _step("vLLM environment: `driftline serving install` (first time ~3 min, then instant)")
    subprocess.run(_cli("serving", "install"), check=True)
    _step("model + LoRA adapters: `driftline serving prepare-model` (first time ~30 s)")
    subprocess.run(_cli("serving", "prepare-model"), check=True)


def start_load(
    procs: Processes,
    cfg: DemoConfig,
    name: str,
    rollout: str,
    seconds: float,
    env: dict[str, str],
    rate: float,
    shift_after_s: float = SHIFT_AFTER_S,
) -> None:
    """Start a load generator on ``rollout`` for ``seconds`` at ``rate`` requests/s whose topic
    mix shifts ``shift_after_s`` seconds in (at most half-way)."""
    requests = max(20, int(rate * seconds))
    shift_at = min(0.5, max(0.01, shift_after_s / seconds))  # workload.py: in (0, 1)
    procs.start(
        name,
        _cli(
            "load",
            "--gateway-url",
            f"http://127.0.0.1:{cfg.gateway_port}",
            "--model",
            rollout,
            "--requests",
            str(requests),
            "--rate",
            f"{rate:g}",
            "--concurrency",
            str(cfg.concurrency),
            "--mix",
            MIX,
            "--shift-to",
            SHIFT,
            "--shift-at",
            f"{shift_at:.3f}",
            "--max-tokens",
            str(cfg.max_tokens),
            "--collector-url",
            cfg.collector_url,
            "--feedback-rate",
            "0.8",
            "--agent-rate",
            "0.1",
            # many users, each sticky to one arm: with few, the candidate's share of requests
            # is whatever share of those users hashes to it (50 users gave ~4 % at 10 %)
            "--users",
            "1000",
            "--seed",
            str(cfg.seed + len(procs.procs)),
        ),
        env,
    )


def start_engine(procs: Processes, cfg: DemoConfig, env: dict[str, str]) -> None:
    """vLLM (``serving up``) or the echo stand-in on ``cfg.engine_port``; waits for health."""
    if cfg.engine == "echo":
        _step(f"echo engine on :{cfg.engine_port} (no model; TTFT {cfg.engine_ttft_s:g} s)")
        argv = [sys.executable, "-m", "driftline.demo.echo", "--port", str(cfg.engine_port)]
        procs.start("engine", [*argv, "--ttft-s", str(cfg.engine_ttft_s)], env)
        wait_http(f"http://127.0.0.1:{cfg.engine_port}/health", procs, 60, "the echo engine")
        return
    _step(
        f"vLLM (CPU) on :{cfg.engine_port} with LoRA adapters candidate-good, candidate-bad "
        "(start-up ~40 s)"
    )
    otlp = f"http://127.0.0.1:{cfg.grpc_port}"
    procs.start(
        "vllm",
        _cli("serving", "up", "--port", str(cfg.engine_port), "--otlp-endpoint", otlp),
        env,
    )
    wait_http(f"http://127.0.0.1:{cfg.engine_port}/health", procs, 420, "vLLM")


def fit_load(cfg: DemoConfig) -> LoadPlan:
    """Measure the engine's throughput (warm-up) and set ``cfg.rate`` to what it can serve
    (unless --rate was given); say how long the canary's first step needs."""
    thr = measure_throughput(
        f"http://127.0.0.1:{cfg.engine_port}",
        BASE_MODEL,
        max_tokens=cfg.max_tokens,
        concurrency=cfg.concurrency,
    )
    body = rollout_body(ROLLOUT_BAD, "candidate-bad", BAD_STEPS)
    plan = plan_load(
        thr,
        requested_rps=cfg.rate_requested,
        canary_share=1 - GOOD_LOAD_SHARE,
        candidate_weight=BAD_STEPS[0] / 100,
        min_samples=body["min_samples_per_step"],
        min_step_s=body["min_step_duration_s"],
    )
    cfg.rate = plan.rate_rps
    _step(
        f"warm-up: the engine served {thr:.2f} req/s ({cfg.max_tokens} tokens, {cfg.concurrency} "
        f"in flight) → offering {plan.rate_rps:.2f} req/s; the canary's first step needs "
        f"~{plan.first_step_s:.0f} s for {body['min_samples_per_step']} candidate calls"
    )
    if not plan.fits(cfg.duration_s):
        _step(
            f"--duration {cfg.duration_s:g} s is shorter than that: the canary will likely not "
            f"decide (give --duration {plan.first_step_s * 2:.0f} or more)"
        )
    return plan


def _alert_line(annotations: dict[str, Any]) -> str:
    """An alert's summary, with the canary's reasons when the alert carries them."""
    summary = str(annotations.get("summary", ""))
    reasons = annotations.get("reasons")
    return f"{summary} ({reasons})" if reasons else summary


def run_story(cfg: DemoConfig) -> dict[str, Any]:
    """Bring everything up, run the traffic, and return the final summary (see summary.py)."""
    from driftline.demo.summary import final_summary, render, snapshot

    ports = [cfg.http_port, cfg.grpc_port, cfg.gateway_port, cfg.engine_port, cfg.receiver_port]
    if cfg.dashboard:
        ports.append(cfg.dashboard_port)
    for port in ports:
        if not port_free("127.0.0.1", port):
            raise click.ClickException(f"port {port} is in use: stop what uses it and retry")
    _step(prepare_data_dir(cfg.data_dir, reset=cfg.reset, fresh_store=True))
    log_dir = cfg.data_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    if cfg.engine == "vllm":
        ensure_serving(cfg)
    procs = Processes(log_dir)
    alerts: list[dict[str, Any]] = []

    def on_alert(record: dict[str, Any]) -> None:
        alerts.append(record)
        p = record["payload"]
        click.echo(
            click.style("ALERT ", fg="red", bold=True)
            + f"[{p.get('status')}] {p.get('commonLabels', {}).get('alertname', '?')} "
            + f"signature {'valid' if record['signature_valid'] else 'INVALID'}: "
            + "; ".join(_alert_line(a.get("annotations", {})) for a in p.get("alerts", []))
        )

    receiver = WebhookReceiver(cfg.receiver_port, cfg.secret, log_dir / "alerts.jsonl", on_alert)
    receiver.start()
    env = collector_env(cfg, receivers_config(cfg, receiver.url))
    t0 = time.time()
    try:
        where = f"SQLite in {cfg.data_dir}"
        _step(f"collector on {cfg.collector_url} (OTLP gRPC :{cfg.grpc_port}), {where}")
        procs.start(
            "collector",
            _cli(
                "collector",
                "--dev",
                "--port",
                str(cfg.http_port),
                "--grpc-port",
                str(cfg.grpc_port),
            ),
            env,
        )
        wait_http(f"{cfg.collector_url}/healthz", procs, 90, "the collector")
        start_engine(procs, cfg, env)
        plan = fit_load(cfg)
        api = Api(cfg.collector_url)
        upsert_rules(api, ALERT_RULES)
        _step(
            f"alert rules: {', '.join(r['name'] for r in ALERT_RULES)} "
            f"→ webhook {receiver.url} (Standard Webhooks signed)"
        )
        r = api.post("/api/v1/rollouts", rollout_body(ROLLOUT_BAD, "candidate-bad", BAD_STEPS))
        if r.status_code not in (200, 201):
            raise click.ClickException(f"creating rollout {ROLLOUT_BAD} failed: {r.text}")
        _step(
            f"rollout {ROLLOUT_BAD} (canary): baseline {BASE_MODEL}, candidate candidate-bad "
            f"at {BAD_STEPS[0]:g} %"
        )
        _step(f"gateway on :{cfg.gateway_port}")
        procs.start(
            "gateway",
            _cli(
                "gateway",
                "--config",
                str(gateway_config(cfg)),
                "--port",
                str(cfg.gateway_port),
                "--engine-url",
                f"http://127.0.0.1:{cfg.engine_port}",
                "--collector-url",
                cfg.collector_url,
                "--otlp-endpoint",
                f"{cfg.collector_url}/v1/traces",
            ),
            env,
        )
        wait_http(f"http://127.0.0.1:{cfg.gateway_port}/healthz", procs, 60, "the gateway")
        if cfg.dashboard:
            _step(f"dashboard on http://127.0.0.1:{cfg.dashboard_port}")
            procs.start(
                "dashboard", _cli("dashboard", "--dev", "--port", str(cfg.dashboard_port)), env
            )
        total = cfg.duration_s or 3600.0
        _step(
            f"traffic: ~{cfg.rate:.2f} req/s through the gateway, topic shift after "
            f"{min(SHIFT_AFTER_S, total / 2):.0f} s ({MIX} → {SHIFT}), simulated feedback"
        )
        start_load(procs, cfg, "load-1", ROLLOUT_BAD, total, env, cfg.rate * (1 - GOOD_LOAD_SHARE))
        second_started = False
        started = time.monotonic()
        deadline = started + total
        last_line = 0.0
        settled_at: float | None = None  # when the canary had decided and drift had flagged
        while time.monotonic() < deadline:
            time.sleep(5)
            procs.check()
            snap = snapshot(api, alerts)
            if time.monotonic() - last_line >= PROGRESS_EVERY_S:
                click.echo(render(snap, time.time() - t0), nl=True)
                last_line = time.monotonic()
            decided = snap["rollouts"].get(ROLLOUT_BAD, {}).get("status") not in (None, "running")
            if cfg.headless and second_started and decided and snap["drift_flags"]:
                settled_at = settled_at or time.monotonic()
                others = [v["status"] for v in snap["rollouts"].values()]
                if "running" not in others:
                    _step("both rollouts decided and drift flagged: ending the traffic early")
                    break
                if time.monotonic() - settled_at >= AB_GRACE_S:
                    _step(
                        f"the canary decided and drift flagged {AB_GRACE_S:g} s ago; the A/B "
                        "rollout is still gathering votes: ending the traffic early"
                    )
                    break
            if not second_started and (decided or time.monotonic() > started + GOOD_START_S):
                body = rollout_body(ROLLOUT_GOOD, "candidate-good", GOOD_STEPS)
                r = api.post("/api/v1/rollouts", body)
                if r.status_code in (200, 201):
                    _step(f"rollout {ROLLOUT_GOOD} (A/B): candidate-good at {GOOD_STEPS[0]:g} %")
                    start_load(
                        procs,
                        cfg,
                        "load-2",
                        ROLLOUT_GOOD,
                        max(30.0, deadline - time.monotonic()),
                        env,
                        cfg.rate * GOOD_LOAD_SHARE,
                        shift_after_s=SHIFT_AFTER_S - (time.monotonic() - started),
                    )
                else:
                    _step(f"creating rollout {ROLLOUT_GOOD} failed: {r.text}")
                second_started = True
        # drain: vLLM exports spans in ~5 s batches, the canary job runs every 10 s and an
        # alert waits group_wait (5 s) before it is sent; let what already happened land (the
        # load generators finish their last requests; stopping them would cancel answers)
        time.sleep(DRAIN_S)
        out = final_summary(api, alerts, time.time() - t0)
        out["load_plan"] = {
            "engine": cfg.engine,
            "throughput_rps": round(plan.throughput_rps, 3),
            "offered_rps": round(plan.rate_rps, 3),
            "first_step_s": round(plan.first_step_s, 1),
            "duration_s": cfg.duration_s,
        }
        return out
    finally:
        procs.stop()
        receiver.stop()
        threading.Event().wait(0.2)
