"""User rubrics from DRIFTLINE_JUDGE_RUBRIC_DIR (YAML / TOML) and score configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from judges.prompts import pointwise_messages
from judges.rubrics import builtin_rubric
from judges.score_configs import config_of_rubric, resolve
from judges.settings import JudgeConfigError, load_judge_settings
from judges.user_rubrics import load_user_rubrics
from tests.support.agent_traces import agent_run, record, send
from tests.support.review import queue_review_item

TONE = """
name: tone
description: Is the answer polite?
criteria:
  - no insults
  - answers the question
labels:
  - {label: rude, description: insults the user}
  - {label: neutral, description: neither}
  - {label: polite, description: courteous throughout}
examples:
  - {input: hi, output: go away, label: rude, explanation: dismissive}
"""
CONCISE = """
name = "concise"
description = "Short?"
instructions = "Check padding."
scale = "pass_fail"
"""


def test_yaml_and_toml_rubrics_load_and_reach_the_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tone.yaml").write_text(TONE)
    (tmp_path / "concise.toml").write_text(CONCISE)
    (tmp_path / "README.md").write_text("ignored")
    rubrics = load_user_rubrics(tmp_path)
    assert set(rubrics) == {"tone", "concise"}
    tone = rubrics["tone"]
    assert tone.scale.kind == "categorical" and tone.scale.scores == (0, 1, 2)
    assert (
        "1. no insults" in tone.instructions and "Verdict: rude (dismissive)" in tone.instructions
    )
    text = str(pointwise_messages(tone, prompt="hi", answer="hello", reference=None))
    assert "polite" in text and "no insults" in text
    monkeypatch.setenv("DRIFTLINE_JUDGE_RUBRIC_DIR", str(tmp_path))
    monkeypatch.setenv("DRIFTLINE_JUDGE_RUBRICS", '["tone", "helpfulness"]')
    settings = load_judge_settings()
    assert settings.rubric("tone") == tone
    assert config_of_rubric(tone).categories == (("rude", 0.0), ("neutral", 1.0), ("polite", 2.0))


def test_unknown_rubric_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRIFTLINE_JUDGE_RUBRICS", '["my_rubric"]')
    with pytest.raises(JudgeConfigError, match=r"DRIFTLINE_JUDGE_RUBRICS.*my_rubric.*RUBRIC_DIR"):
        load_judge_settings()


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bad.yaml", "name: [unclosed", "invalid YAML"),
        ("bad.toml", 'name = "x', "invalid TOML"),
        (
            "bad.yaml",
            "name: x\ndescription: d\ninstructions: i\n",
            "exactly one of 'scale' or 'labels'",
        ),
        (
            "bad.yaml",
            "name: helpfulness\ndescription: d\ninstructions: i\nscale: likert\n",
            "shipped",
        ),
        (
            "bad.yaml",
            "name: x\ndescription: d\ninstructions: i\nscale: pass_fail\n"
            "examples: [{input: a, output: b, score: 7}]\n",
            "examples.0.score 7",
        ),
        ("bad.yaml", "- a list", "must hold a mapping"),
    ],
)
def test_bad_rubric_file_is_named(tmp_path: Path, name: str, text: str, needle: str) -> None:
    (tmp_path / name).write_text(text)
    # a configuration error (one line from the CLI, exit 2) naming the variable and the file
    with pytest.raises(JudgeConfigError, match=needle) as info:
        load_judge_settings(rubric_dir=tmp_path)
    assert str(tmp_path / name) in str(info.value)
    assert str(info.value).startswith("DRIFTLINE_JUDGE_RUBRIC_DIR: ")


def test_score_configs() -> None:
    likert = config_of_rubric(builtin_rubric("helpfulness"))
    assert likert.data_type == "numeric" and (likert.min_value, likert.max_value) == (1.0, 5.0)
    assert likert.normalize(4, None)[0] == 4.0
    with pytest.raises(ValueError, match="outside"):
        likert.normalize(6, None)
    boolean = resolve("x", "boolean", {})
    assert boolean.normalize(None, "pass") == (1.0, "pass")
    with pytest.raises(ValueError, match="0 or 1"):
        boolean.normalize(0.5, None)
    cat = resolve("y", "categorical", {})
    assert cat.normalize(None, "blue") == (None, "blue")
    with pytest.raises(ValueError, match="data_type must be one of"):
        resolve("z", "float", {})
    with pytest.raises(ValueError, match="is numeric"):
        resolve("helpfulness", "boolean", {"helpfulness": builtin_rubric("helpfulness")})


def test_review_and_scores_use_the_user_rubrics_score_config(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sample judged on a user rubric is reviewed on that rubric (its labels, checked by its
    score config), and ``POST /api/v1/scores`` takes the same config."""
    folder = tmp_path / "rubrics"
    folder.mkdir()
    (folder / "tone.yaml").write_text(TONE)
    monkeypatch.setenv("DRIFTLINE_JUDGE_RUBRIC_DIR", str(folder))
    run = record(lambda p: agent_run(p, session="s", t0=1_780_000_000_000_000_000))
    send(client, run, expect_calls=2)
    call, other = client.get("/api/v1/calls").json()["items"][:2]
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    item_id = queue_review_item(engine, call, rubric="tone")
    task = client.get("/api/v1/review/next", params={"reviewer": "ana"}).json()["item"]
    assert task["id"] == item_id and task["rubric"]["name"] == "tone"
    off = client.post(f"/api/v1/review/{item_id}", json={"reviewer": "ana", "score": 5})
    assert off.status_code == 400 and "score" in off.json()["error"]["message"]
    ok = client.post(f"/api/v1/review/{item_id}", json={"reviewer": "ana", "score": 2})
    assert ok.status_code == 200, ok.text
    assert ok.json()["label"] == "polite"
    r = client.post(
        "/api/v1/scores", json={"trace_id": call["trace_id"], "name": "tone", "label": "rude"}
    )
    assert r.status_code == 201, r.text
    stored = client.get("/api/v1/scores", params={"trace_id": call["trace_id"]}).json()["items"]
    assert [(x["name"], x["value"], x["data_type"]) for x in stored] == [
        ("tone", 0.0, "categorical")
    ]
    monkeypatch.delenv("DRIFTLINE_JUDGE_RUBRIC_DIR")
    gone = client.get("/api/v1/review/next", params={"reviewer": "bob"})
    assert gone.status_code == 200 and gone.json()["item"] is None  # labelled, queue empty
    # without the folder, an item on "tone" waits for a process that has it: it must not
    # block the items behind it (it sorts first and failed every claim)
    queue_review_item(engine, other, rubric="tone")
    behind = queue_review_item(engine, other, rubric="harmlessness")
    nxt = client.get("/api/v1/review/next", params={"reviewer": "bob"})
    assert nxt.status_code == 200 and nxt.json()["item"]["id"] == behind
    done = client.post(f"/api/v1/review/{behind}", json={"reviewer": "bob", "score": 1})
    assert done.json()["label"] == "pass"  # the rubric's word, as the judge's labels
