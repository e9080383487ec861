"""What the story demo configures: the collector's environment (time compressed for a
five-minute run), the canary policies of its two rollouts, and the alert rules on-call gets."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from driftline.demo.story import DemoConfig

BASE_MODEL = "smollm2-135m-instruct"
ROLLOUT_BAD = "support-assistant"
ROLLOUT_GOOD = "support-assistant-v2"
#: first canary steps (%) of the two rollouts (story.py has the full step lists)
BAD_FIRST_PCT = 10.0
GOOD_FIRST_PCT = 50.0


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
        # the demo's own loopback webhook receiver and gateway (the Capacity page reads its
        # /metrics): outbound requests reach public addresses only unless listed
        "DRIFTLINE_EGRESS_ALLOW": f"127.0.0.1:{cfg.receiver_port},127.0.0.1:{cfg.gateway_port}",
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
    bad, good = BAD_FIRST_PCT / 100, GOOD_FIRST_PCT / 100
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
