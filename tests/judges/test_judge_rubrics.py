"""Rubrics as data: the shipped TOML files and clear errors for bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges.errors import JudgeError, RubricError
from judges.prompts import pointwise_messages, pointwise_schema
from judges.rubrics import (
    builtin_rubric,
    builtin_rubrics,
    load_rubric,
    load_rubric_dir,
    parse_rubric,
)

VALID = """
name = "conciseness"
version = "2"
description = "Is the answer as short as it can be?"
instructions = "Check for padding."

[scale]
kind = "pass_fail"

[[scale.levels]]
score = 1
label = "pass"
description = "No padding."

[[scale.levels]]
score = 0
label = "fail"
description = "Padded."
"""


def test_shipped_rubrics() -> None:
    rubrics = builtin_rubrics()
    assert set(rubrics) == {"helpfulness", "correctness", "harmlessness", "instruction_following"}
    for name in ("helpfulness", "correctness", "instruction_following"):
        scale = rubrics[name].scale
        assert scale.kind == "likert"
        assert scale.scores == (1, 2, 3, 4, 5)
        assert all(level.description for level in scale.levels)
    harm = rubrics["harmlessness"]
    assert harm.scale.kind == "pass_fail"
    assert harm.scale.label_for(0) == "fail" and harm.scale.label_for(1) == "pass"
    assert "refus" in harm.instructions
    assert builtin_rubric("correctness") == rubrics["correctness"]


def test_parse_valid_rubric_sorts_levels_and_fingerprints() -> None:
    rubric = parse_rubric(VALID)
    assert rubric.name == "conciseness" and rubric.version == "2"
    assert rubric.scale.scores == (0, 1)
    assert rubric.reference_answer is None
    bumped = parse_rubric(VALID.replace('version = "2"', 'version = "3"'))
    assert bumped.fingerprint != rubric.fingerprint
    assert parse_rubric(VALID).fingerprint == rubric.fingerprint


def test_rubric_reaches_the_prompt_and_schema() -> None:
    rubric = builtin_rubric("instruction_following")
    system, user = pointwise_messages(rubric, prompt="P?", answer="A.", reference="R.")
    for level in rubric.scale.levels:
        assert level.description in system["content"]
    assert "<reference_answer>\nR.\n</reference_answer>" in user["content"]
    enum = pointwise_schema(rubric)["properties"]["score"]["anyOf"][0]["enum"]
    assert enum == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (lambda t: t.replace('kind = "pass_fail"', 'kind = "likert"'), "likert scale needs"),
        (lambda t: t.replace('label = "pass"', 'label = "ok"'), "must be labelled 'pass'"),
        (lambda t: t.replace('instructions = "Check for padding."\n', ""), "instructions"),
        (lambda t: t.replace('name = "conciseness"', 'name = "Concise Ness"'), "name"),
        (lambda t: t + '\ncolour = "blue"\n', "colour"),
        (lambda t: t.replace('version = "2"', "version = "), "invalid TOML"),
        (lambda t: t.replace('kind = "pass_fail"', 'kind = "stars"'), "scale.kind"),
    ],
)
def test_bad_rubric_file_gives_a_clear_error(
    tmp_path: Path, mutation: object, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(mutation(VALID))  # type: ignore[operator]
    with pytest.raises(RubricError, match=message) as caught:
        load_rubric(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, JudgeError)


def test_rubric_dir_and_lookup_errors(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(VALID)
    assert set(load_rubric_dir(tmp_path)) == {"conciseness"}
    (tmp_path / "b.toml").write_text(VALID)
    with pytest.raises(RubricError, match="duplicate rubric name"):
        load_rubric_dir(tmp_path)
    with pytest.raises(RubricError, match="cannot read"):
        load_rubric(tmp_path / "missing.toml")
    with pytest.raises(RubricError, match="unknown rubric 'tone'"):
        builtin_rubric("tone")
