"""The demo's verdict lines: they report what the statistics decided, and say so when not."""

from __future__ import annotations

from typing import Any

from driftline.demo.summary import drift_line, story_lines


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
