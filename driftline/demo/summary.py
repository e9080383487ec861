"""What the demo shows: a one-screen snapshot while it runs and the final summary, both read
from the collector's REST API (the statistics decide; the summary only reports)."""

from __future__ import annotations

from typing import Any

from driftline.demo.api_client import Api
from driftline.demo.story import ROLLOUT_BAD, ROLLOUT_GOOD


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
        "drift_runs_tested": sum(1 for r in drift_runs if (r.get("n_evaluated") or 0) > 0),
        "judge_queue": judge_queue(api),
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
                "evidence": evidence_vs_bar(r),
            }
            for n, r in rollouts.items()
        },
        "alerts": len(alerts),
        "alerts_valid": sum(1 for a in alerts if a["signature_valid"]),
    }


def evidence_vs_bar(rollout: dict[str, Any]) -> dict[str, Any]:
    """The latest look's e-values against their bar (``threshold`` = K/alpha): per metric
    ``(harm e, non-inferiority e)``, with the step's request counts per arm."""
    ev = (rollout.get("latest") or {}).get("evidence") or {}
    metrics = {}
    for m in ev.get("metrics") or []:
        harm = (m.get("harm") or {}).get("e_value")
        ni = (m.get("non_inferiority") or {}).get("e_value")
        metrics[str(m.get("name"))] = (harm, ni)
    return {
        "bar": ev.get("threshold"),
        "metrics": metrics,
        "n": (ev.get("step_baseline_count"), ev.get("step_candidate_count")),
    }


def judge_queue(api: Any) -> dict[str, float] | None:
    """The judge queue from the collector's ``/metrics`` (judges/queue_health.py): pending,
    claimed, oldest claim age (s) and expired claims; None before the first judge round."""
    try:
        text = api.http.get("/metrics").text
    except Exception:  # the progress line then says n/a
        return None
    found: dict[str, float] = {}
    names = {
        'driftline_judge_samples{status="pending"}': "pending",
        'driftline_judge_samples{status="claimed"}': "claimed",
        "driftline_judge_oldest_claim_seconds": "oldest_claim_s",
        "driftline_judge_expired_claims": "expired",
    }
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key in names:
            found[names[key]] = float(value)
    return found or None


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


def drift_line(flags: dict[str, dict[str, Any]], n_runs: int, n_tested: int | None = None) -> str:
    """The drift verdict: was the injected topic shift (prompt side) flagged, with evidence.
    ``n_tested``: runs in which at least one signal had enough samples to be tested; a run
    without is "not enough data to test", not "no drift"."""
    tested = n_runs if n_tested is None else n_tested
    untested = n_runs - tested
    if not flags and tested == 0:
        return (
            f"drift: not enough data to test in {n_runs} run(s) (each window needs "
            "DRIFTLINE_DRIFT_MIN_SAMPLES calls) — the topic shift could not be tested"
        )
    if not flags:
        more = f" ({untested} more run(s) had too little data to test)" if untested else ""
        return (
            f"drift: no signal flagged in {tested} tested run(s){more} — the topic shift was "
            "NOT detected"
        )
    inputs = [_flag_text(s, e) for s, e in flags.items() if e["input_side"]]
    others = [s for s, e in flags.items() if not e["input_side"]]
    head = (
        "the prompt topic shift was flagged on " + "; ".join(inputs)
        if inputs
        else "the prompt topic shift was NOT flagged on any prompt signal"
    )
    tail = f"; also flagged: {', '.join(others)} (latency/output, e.g. load changes)"
    return f"drift: {head}" + (tail if others else "")


def _e(value: float | None) -> str:
    return f"{value:.3g}" if value is not None else "–"


def _rollout_progress(name: str, v: dict[str, Any]) -> str:
    ev = v.get("evidence") or {}
    n_base, n_cand = ev.get("n") or (None, None)
    metrics = " ".join(
        f"{m} harm {_e(h)}/ni {_e(n)}" for m, (h, n) in (ev.get("metrics") or {}).items()
    )
    return (
        f"{name}={v['status']} n={n_base}/{n_cand} "
        f"e-values vs bar {_e(ev.get('bar'))}: {metrics or 'no look yet'}"
    )


def render(s: dict[str, Any], elapsed_s: float) -> str:
    """The progress line (printed every 15 s, headless too): calls stored, each rollout's
    e-values against their bar, drift runs tested, the judge queue and its stalls."""
    ro = "; ".join(_rollout_progress(n, v) for n, v in s["rollouts"].items())
    q = s.get("judge_queue")
    queue = (
        f"judge queue {q.get('pending', 0):.0f} pending/{q.get('claimed', 0):.0f} claimed, "
        f"oldest claim {q.get('oldest_claim_s', 0):.0f} s, stalled {q.get('expired', 0):.0f}"
        if q
        else "judge queue n/a"
    )
    return (
        f"[{elapsed_s:5.0f} s] calls stored={s['requests']} p95 TTFT={_fmt_s(s['p95_ttft_s'])} "
        f"| {ro or 'no rollout yet'} | drift runs {s['drift_runs']} "
        f"({s.get('drift_runs_tested', 0)} tested, flags: {','.join(s['drift_flags']) or '-'}) "
        f"| judged={s['judged']}, {queue} | alerts={s['alerts']}"
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
    lines.append(
        drift_line(summary["drift_flags"], summary["drift_runs"], summary.get("drift_runs_tested"))
    )
    plan = summary.get("load_plan")
    bad = (summary["rollouts"].get(ROLLOUT_BAD) or {}).get("status")
    if plan and bad in (None, "running", "paused"):
        cap = plan.get("duration_s")
        short = cap is not None and plan["first_step_s"] > cap
        lines.append(
            f"why no canary decision: the engine served {plan['throughput_rps']:g} req/s at "
            f"warm-up, {plan['offered_rps']:g} req/s were offered, and the first step needs "
            f"~{plan['first_step_s']:g} s for its minimum candidate calls"
            + (f", more than --duration {cap:g} s" if short else "")
        )
    lines.append(
        f"alerts: {summary['alerts']} webhook(s) received, {summary['alerts_valid']} with a valid "
        "Standard Webhooks signature"
    )
    return lines
