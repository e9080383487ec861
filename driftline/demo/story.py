"""The demo story on real vLLM: collector, vLLM with two LoRA adapters, the gateway with canary
rollouts, the judge, drift, alerts to a local signed-webhook receiver, the dashboard, and traffic
from the load generator with simulated users and feedback.

Nothing is scripted to "happen": the summary reads the collector's API and reports what the
statistics decided (or that they did not decide).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import httpx

from alerts.signing import generate_secret
from driftline.demo.processes import Processes, port_free, wait_http
from driftline.demo.receiver import WebhookReceiver

BASE_MODEL = "smollm2-135m-instruct"
ROLLOUT_BAD = "support-assistant"
ROLLOUT_GOOD = "support-assistant-v2"
MIX = "billing=3,account=2,shipping=3,returns=2"
SHIFT = "complaint=3,technical=3,product=2"
#: canary steps (%). The risky candidate starts as a 10 % canary; the second one is an A/B test
#: at 50 %: showing *non-inferiority* (no worse than the margin) needs far more votes than showing
#: harm (~100 thumbs votes here, measured), which a 10 % share of what two CPU cores serve while
#: a LoRA adapter is in the batch (~2.2 req/s at 16 tokens) does not give in five minutes
BAD_STEPS = (10.0, 50.0, 100.0)
GOOD_STEPS = (50.0, 100.0)
#: the A/B rollout starts this long after the traffic (s), on its own share of the load
GOOD_START_S = 20.0
#: share of ``--rate`` sent to the A/B rollout; the canary gets the rest
GOOD_LOAD_SHARE = 0.4
#: seconds between the end of the traffic and the summary (spans, decisions and alerts land)
DRAIN_S = 15.0


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


def collector_env(cfg: DemoConfig, receivers_file: Path) -> dict[str, str]:
    engine = f"http://127.0.0.1:{cfg.engine_port}"
    return {
        **os.environ,
        "DRIFTLINE_DATABASE_URL": f"sqlite:///{cfg.data_dir.resolve()}/driftline.db",
        "DRIFTLINE_ENGINE_METRICS_URLS": json.dumps([f"{engine}/metrics"]),
        "DRIFTLINE_ENGINE_SCRAPE_INTERVAL_S": "10",
        "DRIFTLINE_GPU_COST_PER_HOUR": json.dumps({"driftline-gateway": 1.2}),
        "DRIFTLINE_JUDGE_BASE_URL": f"{engine}/v1",
        "DRIFTLINE_JUDGE_MODEL": BASE_MODEL,
        "DRIFTLINE_JUDGE_API_KEY": "not-needed",
        # a judge call costs a few answers of engine time: sample, do not judge everything
        "DRIFTLINE_JUDGE_BASE_RATE": "0.05",
        "DRIFTLINE_JUDGE_CANDIDATE_RATE": "0.25",
        "DRIFTLINE_JUDGE_SETTLE_S": "5",
        "DRIFTLINE_JUDGE_INTERVAL_S": "10",
        "DRIFTLINE_JUDGE_CONCURRENCY": "2",
        "DRIFTLINE_JUDGE_MAX_TOKENS": "200",
        # a 135M judge rambles: cap the reasoning (the schema's maxLength binds vLLM's decoder)
        "DRIFTLINE_JUDGE_REASONING_MAX_CHARS": "200",
        # a judge call shares the engine with ~8 answers in flight: ~5 tokens/s each
        "DRIFTLINE_JUDGE_TIMEOUT_S": "90",
        # drift: the last 90 s against the 90 s before, every 45 s (production: hours)
        "DRIFTLINE_DRIFT_INTERVAL_S": "45",
        "DRIFTLINE_DRIFT_CURRENT_HOURS": "0.025",
        "DRIFTLINE_DRIFT_REFERENCE_HOURS": "0.025",
        "DRIFTLINE_DRIFT_MIN_SAMPLES": "20",
        "DRIFTLINE_DRIFT_EMBEDDING_SAMPLE": "64",
        "DRIFTLINE_CANARY_INTERVAL_S": "10",
        "DRIFTLINE_CANARY_BUCKET_S": "30",
        "DRIFTLINE_ALERT_RECEIVERS_FILE": str(receivers_file),
        # the demo compresses time: evaluate alert rules every 5 s (production: 15 s)
        "DRIFTLINE_ALERT_EVAL_INTERVAL_S": "5",
    }


def rollout_body(name: str, candidate: str, steps_pct: tuple[float, ...]) -> dict[str, Any]:
    """A canary policy sized for a five-minute demo on two CPU cores (few samples, loose
    margins); production rollouts keep the defaults (200 samples, 10 minutes per step, a
    3-point thumbs-down margin)."""
    return {
        "name": name,
        "baseline_variant": BASE_MODEL,
        "candidate_variant": candidate,
        "steps_pct": list(steps_pct),
        "min_samples_per_step": 12,
        "min_step_duration_s": 30,
        "max_duration_s": 600,
        "guardrails": [
            # LoRA on a CPU engine costs latency (measured here: ~1.5-2x TTFT and TPOT);
            # the tolerated margin says how much the team accepts for a better model
            {"name": "ttft_s", "margin": 1.0, "relative": True},
            # quality must be shown, not assumed: without it a fast but broken adapter would
            # be promoted on latency alone (users' thumbs-down is the demo's quality signal).
            # 20 points tolerated: with ~100 votes a tighter margin cannot be shown either way
            # (the broken adapter is ~80 points worse: ~8 votes suffice to roll it back)
            {"name": "thumbs_down_rate", "margin": 0.2},
            {"name": "error_rate", "margin": 0.5, "relative": True, "required": False},
        ],
        "quality": {"name": "judge_score", "margin": 0.75, "required": False},
    }


#: what on-call is paged for in the demo (each rule is data; see /api/v1/alerts/rules)
ALERT_RULES: list[dict[str, Any]] = [
    {
        "kind": "event",
        "name": "canary_rollback",
        "event": "canary_rollback",
        "severity": "critical",
        "summary": "canary {labels.rollout} rolled back: {labels.candidate} now at {value} %",
        "receivers": ["oncall"],
        "grouping": {"group_wait_s": 5, "group_interval_s": 30, "repeat_interval_s": 3600},
    },
    {
        "kind": "event",
        "name": "drift_detected",
        "event": "drift_detected",
        "severity": "warning",
        "summary": "drift detected",
        "receivers": ["oncall"],
        "grouping": {"group_wait_s": 5, "group_interval_s": 60, "repeat_interval_s": 3600},
    },
    {
        "kind": "threshold",
        "name": "ttft_p95_high",
        "stat": "ttft_s",
        "quantile": 0.95,
        "op": ">",
        "threshold": 5.0,
        "resolve_threshold": 3.0,
        "window_s": 60,
        "min_samples": 10,
        "for_s": 30,
        "resolve_for_s": 30,
        "severity": "warning",
        "summary": "p95 TTFT {value} s > {threshold} s",
        "receivers": ["oncall"],
        "grouping": {"group_wait_s": 5, "group_interval_s": 60, "repeat_interval_s": 3600},
    },
]


def gateway_config(cfg: DemoConfig) -> Path:
    path = cfg.data_dir / "gateway.yaml"
    bad, good = BAD_STEPS[0] / 100, GOOD_STEPS[0] / 100
    path.write_text(
        "default_rollout: support-assistant\n"
        "rollouts:\n"
        f"  {ROLLOUT_BAD}:\n    variants:\n      {BASE_MODEL}: {1 - bad:g}\n"
        f"      candidate-bad: {bad:g}\n"
        f"  {ROLLOUT_GOOD}:\n    variants:\n      {BASE_MODEL}: {1 - good:g}\n"
        f"      candidate-good: {good:g}\n"
    )
    return path


def receivers_config(cfg: DemoConfig, url: str) -> Path:
    path = cfg.data_dir / "receivers.toml"
    path.write_text(
        "[[receivers]]\n"
        'name = "oncall"\ntenant = "default"\nkind = "alertmanager"\n'
        f'url = "{url}"\nsecret = "{cfg.secret}"\n'
    )
    return path


def start_load(
    procs: Processes,
    cfg: DemoConfig,
    name: str,
    rollout: str,
    seconds: float,
    env: dict[str, str],
    rate: float,
) -> None:
    requests = max(20, int(rate * seconds))
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
            "0.5",
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


class Api:
    """Small client of the collector's REST API for the story and its summary."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=30)

    def get(self, path: str, **params: Any) -> Any:
        """The JSON body, or None when the route is absent, fails or is slow (the summary
        then says 'n/a' instead of stopping the demo)."""
        try:
            r = self.http.get(path, params=params)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(path, json=body)


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
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    log_dir = cfg.data_dir / "logs"
    log_dir.mkdir(exist_ok=True)
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
        _step(
            f"vLLM (CPU) on :{cfg.engine_port} with LoRA adapters candidate-good, candidate-bad "
            "(start-up ~40 s)"
        )
        procs.start(
            "vllm",
            _cli(
                "serving",
                "up",
                "--port",
                str(cfg.engine_port),
                "--otlp-endpoint",
                f"http://127.0.0.1:{cfg.grpc_port}",
            ),
            env,
        )
        wait_http(f"http://127.0.0.1:{cfg.engine_port}/health", procs, 420, "vLLM")
        api = Api(cfg.collector_url)
        for rule in ALERT_RULES:
            r = api.post("/api/v1/alerts/rules", rule)
            if r.status_code not in (200, 201):
                raise click.ClickException(f"alert rule {rule['name']}: {r.text}")
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
            f"traffic: ~{cfg.rate:g} req/s through the gateway, topic shift half-way "
            f"({MIX} → {SHIFT}), simulated feedback"
        )
        start_load(procs, cfg, "load-1", ROLLOUT_BAD, total, env, cfg.rate * (1 - GOOD_LOAD_SHARE))
        second_started = False
        started = time.monotonic()
        deadline = started + total
        while time.monotonic() < deadline:
            time.sleep(5)
            procs.check()
            snap = snapshot(api, alerts)
            if not cfg.headless:
                click.echo(render(snap, time.time() - t0))
            decided = snap["rollouts"].get(ROLLOUT_BAD, {}).get("status") not in (None, "running")
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
                    )
                else:
                    _step(f"creating rollout {ROLLOUT_GOOD} failed: {r.text}")
                second_started = True
        # drain: vLLM exports spans in ~5 s batches, the canary job runs every 10 s and an
        # alert waits group_wait (5 s) before it is sent; let what already happened land (the
        # load generators finish their last requests; stopping them would cancel answers)
        time.sleep(DRAIN_S)
        return final_summary(api, alerts, time.time() - t0)
    finally:
        procs.stop()
        receiver.stop()
        threading.Event().wait(0.2)
