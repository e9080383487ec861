"""User rubrics from a folder (``DRIFTLINE_JUDGE_RUBRIC_DIR``): YAML or TOML files.

A user file is friendlier than the shipped format and is turned into a :class:`Rubric`::

    name: tone                       # [a-z][a-z0-9_]*
    version: "1"                     # optional, default "1"
    description: Is the answer polite?
    instructions: Read the answer.   # optional when criteria are given
    criteria:                        # optional: each becomes a numbered step of the prompt
      - no insults
      - addresses the user's question
    scale: likert                    # likert | pass_fail | a full [scale] table (see rubrics)
    # or, instead of scale, categorical labels (scores 0..n-1, in this order):
    labels:
      - {label: rude, description: insults or dismisses the user}
      - {label: neutral, description: neither}
      - {label: polite, description: courteous throughout}
    examples:                        # optional few-shot examples shown to the judge
      - {input: "hi", output: "go away", label: rude, explanation: dismissive}

Criteria and examples are folded into the judge instructions (G-Eval's evaluation steps,
reference §3.1), so the prompt and the fingerprint follow the file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judges.errors import RubricError
from judges.rubrics import Rubric, RubricScale, _describe, builtin_rubrics

SUFFIXES = (".toml", ".yaml", ".yml")
_LIKERT = (
    (1, "very_poor", "does not meet the criteria at all"),
    (2, "poor", "meets few of the criteria"),
    (3, "fair", "meets some of the criteria"),
    (4, "good", "meets most of the criteria"),
    (5, "excellent", "meets every criterion"),
)
_PASS_FAIL = ((0, "fail", "does not meet the criteria"), (1, "pass", "meets the criteria"))


class Label(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)


class Example(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str
    output: str
    score: int | None = None
    label: str | None = None
    explanation: str | None = None

    @model_validator(mode="after")
    def _verdict(self) -> Example:
        if self.score is None and self.label is None:
            raise ValueError("an example needs a score or a label")
        return self


class UserRubric(BaseModel):
    """The user file format (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: str = Field(default="1", min_length=1)
    description: str = Field(min_length=1)
    instructions: str | None = None
    criteria: tuple[str, ...] = ()
    scale: str | RubricScale | None = None
    labels: tuple[Label, ...] = ()
    examples: tuple[Example, ...] = ()
    requires_reference: bool = False
    reference_answer: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> UserRubric:
        if (self.scale is None) == (not self.labels):
            raise ValueError("give exactly one of 'scale' or 'labels'")
        if isinstance(self.scale, str) and self.scale not in ("likert", "pass_fail"):
            raise ValueError(f"scale must be likert, pass_fail or a table, got {self.scale!r}")
        if not self.instructions and not self.criteria:
            raise ValueError("give 'instructions' or 'criteria'")
        return self

    def to_rubric(self) -> Rubric:
        """The judge rubric; raises ValueError when an example is off the scale."""
        if self.labels:
            levels = [(i, x.label, x.description) for i, x in enumerate(self.labels)]
            scale = RubricScale.model_validate(
                {
                    "kind": "categorical",
                    "levels": [{"score": s, "label": lb, "description": d} for s, lb, d in levels],
                }
            )
        elif isinstance(self.scale, RubricScale):
            scale = self.scale
        else:
            preset = _LIKERT if self.scale == "likert" else _PASS_FAIL
            scale = RubricScale.model_validate(
                {
                    "kind": self.scale,
                    "levels": [{"score": s, "label": lb, "description": d} for s, lb, d in preset],
                }
            )
        parts = [self.instructions] if self.instructions else []
        if self.criteria:
            steps = "\n".join(f"{i}. {c}" for i, c in enumerate(self.criteria, 1))
            parts.append(f"Criteria:\n{steps}")
        labels = {lv.label for lv in scale.levels}
        shots = []
        for i, ex in enumerate(self.examples):
            if ex.score is not None and ex.score not in scale.scores:
                raise ValueError(f"examples.{i}.score {ex.score} is not on the scale")
            if ex.label is not None and ex.label not in labels:
                raise ValueError(f"examples.{i}.label {ex.label!r} is not one of {sorted(labels)}")
            verdict = ex.label if ex.label is not None else scale.label_for(int(ex.score or 0))
            why = f" ({ex.explanation})" if ex.explanation else ""
            shots.append(f"Input: {ex.input}\nAnswer: {ex.output}\nVerdict: {verdict}{why}")
        if shots:
            parts.append("Examples:\n" + "\n\n".join(shots))
        return Rubric(
            name=self.name,
            version=self.version,
            description=self.description,
            instructions="\n\n".join(parts),
            scale=scale,
            requires_reference=self.requires_reference,
            reference_answer=self.reference_answer,
        )


def load_user_rubric(path: Path) -> Rubric:
    """One user rubric file (TOML by suffix ``.toml``, else YAML).

    Raises:
        RubricError: unreadable file, bad syntax or bad fields; the message starts with the path.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RubricError(f"{path}: cannot read rubric file: {exc}") from exc
    try:
        data: Any = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "YAML"
        raise RubricError(f"{path}: invalid {kind}: {exc}") from exc
    if not isinstance(data, dict):
        raise RubricError(f"{path}: a rubric file must hold a mapping, got {type(data).__name__}")
    try:
        return UserRubric.model_validate(data).to_rubric()
    except ValidationError as exc:
        raise RubricError(f"{path}: invalid rubric: {_describe(exc)}") from exc
    except ValueError as exc:
        raise RubricError(f"{path}: invalid rubric: {exc}") from exc


def load_user_rubrics(directory: str | Path) -> dict[str, Rubric]:
    """Every rubric file in ``directory`` (``*.toml``, ``*.yaml``, ``*.yml``) by name.

    Raises:
        RubricError: the folder is missing, a file is invalid, two files share a name, or a
            file reuses the name of a shipped rubric (the message names the file).
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise RubricError(f"{folder}: rubric folder does not exist")
    shipped = builtin_rubrics()
    out: dict[str, Rubric] = {}
    for path in sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES):
        rubric = load_user_rubric(path)
        if rubric.name in out:
            raise RubricError(f"{path}: duplicate rubric name {rubric.name!r}")
        if rubric.name in shipped:
            raise RubricError(f"{path}: rubric name {rubric.name!r} is a shipped rubric's name")
        out[rubric.name] = rubric
    return out


def all_rubrics(directory: str | Path | None) -> dict[str, Rubric]:
    """Shipped rubrics plus the user's from ``directory`` (None: shipped only)."""
    out = builtin_rubrics()
    if directory is not None:
        out.update(load_user_rubrics(directory))
    return out
