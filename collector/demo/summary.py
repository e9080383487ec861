"""What the demo shows: a one-screen snapshot while it runs and the final summary, both read
from the collector's REST API (the statistics decide; the summary only reports)."""

from __future__ import annotations

from typing import Any

from collector.demo.story import ROLLOUT_BAD, ROLLOUT_GOOD, Api


def _fmt_s(value: float | None) -> str:
    return f"{value:.3f} s" if value is not None else "n/a"


def snapshot(api: Any, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """Current counts from the API (every value may be None while a subsystem warms up)."""
    stats = (api.get("/api/v1/stats") or {}).get("items") or [{}]
    judged = api.get("/api/v1/judge/results", limit=1000) or {}
    drift_runs = (api.get("/api/v1/drift/runs", limit=5) or {}).get("items") or []
    rollouts: dict[str, dict[str, Any]] = {}
    for name in (ROLLOUT_BAD, ROLLOUT_GOOD):
        r = api.get(f"/api/v1/rollouts/{name}")
        if r:
            rollouts[name] = r
    flagged = [x for run in drift_runs for x in (run.get("flagged_signals") or [])]
    return {
        "requests": stats[0].get("count"),
        "p95_ttft_s": stats[0].get("ttft_s_p95"),
        "error_rate": stats[0].get("error_rate"),
        "judged": len(judged.get("items") or []),
        "drift_runs": len(drift_runs),
        "drift_flags": sorted(set(map(str, flagged))),
        "rollouts": {
            n: {"status": r.get("status"), "weights": r.get("weights")} for n, r in rollouts.items()
        },
        "alerts": len(alerts),
        "alerts_valid": sum(1 for a in alerts if a["signature_valid"]),
    }


def render(s: dict[str, Any], elapsed_s: float) -> str:
    """One line per refresh (works in any terminal and in CI logs)."""
    ro = ", ".join(f"{n}={v['status']} {v['weights']}" for n, v in s["rollouts"].items())
    return (
        f"[{elapsed_s:5.0f} s] requests={s['requests']} p95 TTFT={_fmt_s(s['p95_ttft_s'])} "
        f"judged={s['judged']} drift runs={s['drift_runs']} flags={s['drift_flags'] or '-'} "
        f"rollouts: {ro or '-'} alerts={s['alerts']}"
    )


def final_summary(api: Api, alerts: list[dict[str, Any]], elapsed_s: float) -> dict[str, Any]:
    """Everything the story claims, each with its evidence from the API."""
    snap = snapshot(api, alerts)
    out: dict[str, Any] = {"elapsed_s": round(elapsed_s, 1), **snap, "rollout_decisions": {}}
    for name in (ROLLOUT_BAD, ROLLOUT_GOOD):
        decisions = (api.get(f"/api/v1/rollouts/{name}/decisions", limit=20) or {}).get("items")
        out["rollout_decisions"][name] = [
            {k: d.get(k) for k in ("action", "reasons", "created_at", "weights_after")}
            for d in (decisions or [])
        ]
    out["alert_payloads"] = [
        {
            "status": a["payload"].get("status"),
            "signature_valid": a["signature_valid"],
            "alertname": a["payload"].get("commonLabels", {}).get("alertname"),
        }
        for a in alerts
    ]
    return out


def story_lines(summary: dict[str, Any]) -> list[str]:
    """Plain-language verdicts: what happened, or that the statistics did not support it."""
    lines = [
        f"traffic: {summary['requests']} LLM calls stored, p95 TTFT "
        f"{_fmt_s(summary['p95_ttft_s'])}, {summary['judged']} judged by the LLM judge",
    ]
    bad = summary["rollouts"].get(ROLLOUT_BAD, {})
    reasons = [
        r for d in summary["rollout_decisions"].get(ROLLOUT_BAD, []) for r in d["reasons"] or []
    ]
    if bad.get("status") == "rolled_back":
        lines.append(f"canary {ROLLOUT_BAD}: candidate-bad ROLLED BACK — " + "; ".join(reasons[:3]))
    else:
        lines.append(
            f"canary {ROLLOUT_BAD}: not rolled back (status {bad.get('status')}): "
            "the evidence did not reach the rollback threshold in this run"
        )
    good = summary["rollouts"].get(ROLLOUT_GOOD, {})
    promoted = any(
        d["action"] == "promote" for d in summary["rollout_decisions"].get(ROLLOUT_GOOD, [])
    )
    lines.append(
        f"canary {ROLLOUT_GOOD}: candidate-good "
        + (
            "PROMOTED a step"
            if promoted
            else f"not promoted (status {good.get('status')}): "
            "non-inferiority not yet shown with this many samples"
        )
    )
    lines.append(
        "drift: "
        + (
            f"flagged {', '.join(summary['drift_flags'])}"
            if summary["drift_flags"]
            else f"no signal flagged in {summary['drift_runs']} run(s)"
        )
    )
    lines.append(
        f"alerts: {summary['alerts']} webhook(s) received, {summary['alerts_valid']} with a valid "
        "Standard Webhooks signature"
    )
    return lines
