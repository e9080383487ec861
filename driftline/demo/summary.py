"""What the demo shows: a one-screen snapshot while it runs and the final summary, both read
from the collector's REST API (the statistics decide; the summary only reports)."""

from __future__ import annotations

from typing import Any

from driftline.demo.story import ROLLOUT_BAD, ROLLOUT_GOOD, Api


def _fmt_s(value: float | None) -> str:
    return f"{value:.3f} s" if value is not None else "n/a"


def snapshot(api: Any, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """Current counts from the API (every value may be None while a subsystem warms up)."""
    stats = (api.get("/api/v1/stats") or {}).get("items") or [{}]
    judged = api.get("/api/v1/judge/results", limit=1000) or {}
    drift_runs = (api.get("/api/v1/drift/runs", limit=20) or {}).get("items") or []
    rollouts: dict[str, dict[str, Any]] = {}
    for name in (ROLLOUT_BAD, ROLLOUT_GOOD):
        r = api.get(f"/api/v1/rollouts/{name}")
        if r:
            rollouts[name] = r
    flags = drift_flags(api, drift_runs)
    return {
        "requests": stats[0].get("count"),
        "p95_ttft_s": stats[0].get("ttft_s_p95"),
        "error_rate": stats[0].get("error_rate"),
        "judged": len(judged.get("items") or []),
        "drift_runs": len(drift_runs),
        "drift_runs_flagged": sum(1 for r in drift_runs if (r.get("n_drifted") or 0) > 0),
        "drift_flags": flags,
        "rollouts": {
            n: {
                "status": r.get("status"),
                "weights": r.get("weights"),
                "latest_reasons": (r.get("latest") or {}).get("reasons") or [],
            }
            for n, r in rollouts.items()
        },
        "alerts": len(alerts),
        "alerts_valid": sum(1 for a in alerts if a["signature_valid"]),
    }


#: signals that read the prompts (what a topic shift moves); the rest are latency / output
INPUT_SIGNALS = ("prompt_embedding", "prompt_centroid", "input_tokens", "prompt_length")


def drift_flags(api: Any, runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Flagged signals over the drift runs, one entry per signal: how many runs and segments
    flagged it, and the strongest evidence (smallest BH-adjusted p) with its method."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        if not (run.get("n_drifted") or 0):
            continue
        detail = api.get(f"/api/v1/drift/runs/{run['run_id']}", drifted_only=True) or {}
        for res in detail.get("results") or []:
            sig = str(res.get("signal"))
            entry = out.setdefault(sig, {"runs": set(), "segments": set(), "best": None})
            entry["runs"].add(run["run_id"])
            entry["segments"].add(res.get("segment") or "all traffic")
            p = res.get("adjusted_pvalue")
            best = entry["best"]
            if p is not None and (best is None or p < best["adjusted_pvalue"]):
                entry["best"] = {
                    k: res.get(k) for k in ("method", "statistic", "adjusted_pvalue", "segment")
                }
    return {
        sig: {
            "runs": len(e["runs"]),
            "segments": sorted(e["segments"]),
            "best": e["best"],
            "input_side": sig in INPUT_SIGNALS,
        }
        for sig, e in sorted(out.items())
    }


def _flag_text(sig: str, e: dict[str, Any]) -> str:
    best = e.get("best") or {}
    ev = ""
    if best.get("adjusted_pvalue") is not None:
        ev = (
            f"{best.get('method')} {best.get('statistic'):.3g}, adjusted p "
            f"{best['adjusted_pvalue']:.2g}; "
        )
    return f"{sig} ({ev}{len(e['segments'])} segment(s), {e['runs']} run(s))"


def drift_line(flags: dict[str, dict[str, Any]], n_runs: int) -> str:
    """The drift verdict: was the injected topic shift (prompt side) flagged, with evidence."""
    if not flags:
        return f"drift: no signal flagged in {n_runs} run(s) — the topic shift was NOT detected"
    inputs = [_flag_text(s, e) for s, e in flags.items() if e["input_side"]]
    others = [s for s, e in flags.items() if not e["input_side"]]
    head = (
        "the prompt topic shift was flagged on " + "; ".join(inputs)
        if inputs
        else "the prompt topic shift was NOT flagged on any prompt signal"
    )
    tail = f"; also flagged: {', '.join(others)} (latency/output, e.g. load changes)"
    return f"drift: {head}" + (tail if others else "")


def render(s: dict[str, Any], elapsed_s: float) -> str:
    """One line per refresh (works in any terminal and in CI logs)."""
    ro = ", ".join(f"{n}={v['status']} {v['weights']}" for n, v in s["rollouts"].items())
    return (
        f"[{elapsed_s:5.0f} s] requests={s['requests']} p95 TTFT={_fmt_s(s['p95_ttft_s'])} "
        f"judged={s['judged']} drift runs={s['drift_runs']} "
        f"flags={','.join(s['drift_flags']) or '-'} "
        f"rollouts: {ro or '-'} alerts={s['alerts']}"
    )


def final_summary(api: Api, alerts: list[dict[str, Any]], elapsed_s: float) -> dict[str, Any]:
    """Everything the story claims, each with its evidence from the API."""
    snap = snapshot(api, alerts)
    out: dict[str, Any] = {"elapsed_s": round(elapsed_s, 1), **snap, "rollout_decisions": {}}
    for name in (ROLLOUT_BAD, ROLLOUT_GOOD):
        decisions = (api.get(f"/api/v1/rollouts/{name}/decisions", limit=20) or {}).get("items")
        out["rollout_decisions"][name] = [
            {
                **{k: d.get(k) for k in ("action", "reasons", "weights_after")},
                # the API names a decision's time decided_at
                "created_at": d.get("decided_at") or d.get("created_at"),
            }
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


def _rollout_verdict(summary: dict[str, Any], name: str) -> str:
    state = summary["rollouts"].get(name)
    if state is None:
        return "not started in this run"
    decisions = [d for d in summary["rollout_decisions"].get(name, []) if d["action"] != "create"]
    status, weights = state["status"], state["weights"]

    def why(reasons: list[Any]) -> str:
        return "; ".join(str(r) for r in reasons[:3]) or "no reason recorded"

    if status == "rolled_back":
        last = next((d for d in decisions if d["action"] == "rollback"), decisions[0])
        return f"ROLLED BACK (weights {weights}) — {why(last['reasons'] or [])}"
    promotions = [d for d in decisions if d["action"] == "promote"]
    if promotions:
        return (
            f"PROMOTED {len(promotions)} step(s), now {status} at {weights} — "
            f"{why(promotions[0]['reasons'] or [])}"
        )
    if status == "paused":
        return f"paused as inconclusive — {why(decisions[0]['reasons'] or [] if decisions else [])}"
    return (
        f"still {status} at {weights}: the evidence did not decide yet — "
        f"{why(state['latest_reasons'])}"
    )


def story_lines(summary: dict[str, Any]) -> list[str]:
    """Plain-language verdicts: what happened, or that the statistics did not support it."""
    lines = [
        f"traffic: {summary['requests']} LLM calls stored, p95 TTFT "
        f"{_fmt_s(summary['p95_ttft_s'])}, {summary['judged']} judged by the LLM judge",
    ]
    for name, candidate in ((ROLLOUT_BAD, "candidate-bad"), (ROLLOUT_GOOD, "candidate-good")):
        lines.append(f"canary {name} ({candidate}): " + _rollout_verdict(summary, name))
    lines.append(drift_line(summary["drift_flags"], summary["drift_runs"]))
    lines.append(
        f"alerts: {summary['alerts']} webhook(s) received, {summary['alerts_valid']} with a valid "
        "Standard Webhooks signature"
    )
    return lines
