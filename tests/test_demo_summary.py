"""The demo's verdict lines: they report what the statistics decided, and say so when not."""

from __future__ import annotations

from typing import Any

from driftline.demo.summary import drift_line, evidence_vs_bar, render, story_lines


def _flag(input_side: bool, p: float = 0.004) -> dict[str, Any]:
    return {
        "runs": 2,
        "segments": ["all traffic", "model=m"],
        "best": {"method": "classifier_auc", "statistic": 0.85, "adjusted_pvalue": p},
        "input_side": input_side,
    }


def test_drift_line_names_the_prompt_shift_with_evidence() -> None:
    line = drift_line({"prompt_embedding": _flag(True), "ttft_s": _flag(False)}, 5)
    assert "prompt topic shift was flagged on prompt_embedding" in line
    assert "classifier_auc 0.85, adjusted p 0.004" in line
    assert "also flagged: ttft_s" in line


def test_drift_line_says_when_the_shift_was_not_detected() -> None:
    assert "NOT flagged" in drift_line({"ttft_s": _flag(False)}, 5)
    assert "NOT detected" in drift_line({}, 3)


def test_story_lines_report_undecided_rollouts_as_such() -> None:
    summary: dict[str, Any] = {
        "requests": 10,
        "p95_ttft_s": None,
        "judged": 0,
        "drift_runs": 0,
        "drift_flags": {},
        "alerts": 0,
        "alerts_valid": 0,
        "rollouts": {
            "support-assistant": {
                "status": "running",
                "weights": {"base": 0.9, "candidate-bad": 0.1},
                "latest_reasons": ["thumbs_down_rate: undecided (harm e 8.39)"],
            }
        },
        "rollout_decisions": {"support-assistant": []},
    }
    lines = story_lines(summary)
    assert any("did not decide yet" in ln and "harm e 8.39" in ln for ln in lines)
    assert any("not started in this run" in ln for ln in lines)
    assert any("p95 TTFT n/a" in ln for ln in lines)


def test_drift_line_tells_untested_from_not_detected() -> None:
    assert "not enough data to test in 4 run(s)" in drift_line({}, 4, 0)
    line = drift_line({}, 6, 1)
    assert "no signal flagged in 1 tested run(s) (5 more run(s) had too little data" in line
    assert "NOT detected" in line


def test_progress_line_shows_evidence_against_the_bar_and_the_judge_queue() -> None:
    rollout = {
        "status": "running",
        "latest": {
            "evidence": {
                "threshold": 60.0,
                "step_baseline_count": 40,
                "step_candidate_count": 5,
                "metrics": [
                    {
                        "name": "thumbs_down_rate",
                        "harm": {"e_value": 12.5},
                        "non_inferiority": {"e_value": 0.2},
                    },
                    {"name": "ttft_s", "harm": None, "non_inferiority": None},
                ],
            }
        },
    }
    snap = {
        "requests": 45,
        "p95_ttft_s": 2.0,
        "judged": 3,
        "drift_runs": 2,
        "drift_runs_tested": 1,
        "drift_flags": {},
        "alerts": 0,
        "judge_queue": {"pending": 4, "claimed": 1, "oldest_claim_s": 130, "expired": 1},
        "rollouts": {
            "support-assistant": {"status": "running", "evidence": evidence_vs_bar(rollout)}
        },
    }
    line = render(snap, 75)
    assert "calls stored=45" in line
    assert "n=40/5 e-values vs bar 60: thumbs_down_rate harm 12.5/ni 0.2 ttft_s harm –/ni –" in line
    assert "drift runs 2 (1 tested" in line
    assert "4 pending/1 claimed, oldest claim 130 s, stalled 1" in line
