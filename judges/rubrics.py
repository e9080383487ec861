"""Rubrics as data: TOML files loaded into frozen pydantic models.

A rubric has a name, a version, instructions, an anchored scale (1–5 Likert with one description per
level, or pass/fail) and an optional reference answer. Explicit anchors per level follow reference
§3.3 ("Rubric design"); the fingerprint versions the judge prompt (reference §3.4: "version the
judge (prompt hash + model id)").

File format (see ``judges/rubrics/*.toml``)::

    name = "helpfulness"          # [a-z][a-z0-9_]*
    version = "1"
    description = "one line"
    instructions = "what the judge checks, step by step"
    requires_reference = false    # true: a reference answer must be given at judge time
    reference_answer = "..."      # optional, used when the caller passes none

    [scale]
    kind = "likert"               # "likert" (1..5), "pass_fail" (0 = fail, 1 = pass) or
                                  # "categorical" (labels, scores 0..n-1)

    [[scale.levels]]
    score = 1
    label = "unhelpful"
    description = "anchor text for this level"
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from judges.errors import RubricError

_LIKERT_SCORES = (1, 2, 3, 4, 5)
_PASS_FAIL = {0: "fail", 1: "pass"}


class ScaleLevel(BaseModel):
    """One anchored level of a scale: integer score, low-cardinality label, anchor text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: int
    label: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)


class RubricScale(BaseModel):
    """A 1–5 Likert scale (five levels), a pass/fail scale (0 = fail, 1 = pass), or a
    categorical scale (two or more labels, scores 0..n-1 in the given order)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["likert", "pass_fail", "categorical"]
    levels: tuple[ScaleLevel, ...]

    @field_validator("levels")
    @classmethod
    def _sort_levels(cls, levels: tuple[ScaleLevel, ...]) -> tuple[ScaleLevel, ...]:
        return tuple(sorted(levels, key=lambda level: level.score))

    @model_validator(mode="after")
    def _check_levels(self) -> RubricScale:
        scores = tuple(sorted(level.score for level in self.levels))
        if self.kind == "likert" and scores != _LIKERT_SCORES:
            raise ValueError(f"a likert scale needs exactly the scores 1..5, got {list(scores)}")
        if self.kind == "pass_fail":
            if scores != (0, 1):
                raise ValueError(
                    f"a pass_fail scale needs exactly the scores 0 and 1, got {scores}"
                )
            for level in self.levels:
                if level.label != _PASS_FAIL[level.score]:
                    raise ValueError(
                        f"pass_fail score {level.score} must be labelled "
                        f"{_PASS_FAIL[level.score]!r}, got {level.label!r}"
                    )
        if self.kind == "categorical" and scores != tuple(range(len(scores))):
            raise ValueError(f"a categorical scale needs the scores 0..n-1, got {list(scores)}")
        if self.kind == "categorical" and len(scores) < 2:
            raise ValueError("a categorical scale needs at least two labels")
        labels = [level.label for level in self.levels]
        if len(set(labels)) != len(labels):
            raise ValueError(f"scale labels must be distinct, got {labels}")
        return self

    @property
    def scores(self) -> tuple[int, ...]:
        """The allowed scores, ascending."""
        return tuple(level.score for level in self.levels)

    def label_for(self, score: int) -> str:
        """The label of ``score``; raises ValueError naming ``score`` when it is off the scale."""
        for level in self.levels:
            if level.score == score:
                return level.label
        raise ValueError(f"score {score} is not on this scale {list(self.scores)}")


class Rubric(BaseModel):
    """A judge rubric (see the module docstring for the file format)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: str = Field(min_length=1)
    description: str = Field(min_length=1)
    instructions: str = Field(min_length=1)
    scale: RubricScale
    requires_reference: bool = False
    reference_answer: str | None = None

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex, first 16 chars) of the rubric's canonical JSON: pins the judge prompt."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "rubric"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_rubric(text: str, *, source: str = "<string>") -> Rubric:
    """Parse TOML ``text`` into a Rubric.

    Raises RubricError naming ``source`` and the offending field on invalid TOML or invalid data.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RubricError(f"{source}: invalid TOML: {exc}") from exc
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        raise RubricError(f"{source}: invalid rubric: {_describe(exc)}") from exc


def load_rubric(path: str | Path) -> Rubric:
    """Load one rubric TOML file; raises RubricError (unreadable file, bad TOML, bad fields)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RubricError(f"{path}: cannot read rubric file: {exc}") from exc
    return parse_rubric(text, source=str(path))


def load_rubric_dir(directory: str | Path) -> dict[str, Rubric]:
    """Load every ``*.toml`` rubric in ``directory``, keyed by rubric name.

    Raises RubricError for an invalid file or two files declaring the same name.
    """
    rubrics: dict[str, Rubric] = {}
    for path in sorted(Path(directory).glob("*.toml")):
        rubric = load_rubric(path)
        if rubric.name in rubrics:
            raise RubricError(f"{path}: duplicate rubric name {rubric.name!r}")
        rubrics[rubric.name] = rubric
    return rubrics


def builtin_rubrics() -> dict[str, Rubric]:
    """The rubrics shipped in ``judges/rubrics/`` (package data), keyed by name (a new dict
    each call; the files are parsed once)."""
    return dict(_shipped())


@functools.cache
def _shipped() -> dict[str, Rubric]:
    rubrics: dict[str, Rubric] = {}
    folder = resources.files("judges").joinpath("rubrics")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            rubric = parse_rubric(entry.read_text(encoding="utf-8"), source=f"judges/{entry.name}")
            rubrics[rubric.name] = rubric
    return rubrics


def builtin_rubric(name: str) -> Rubric:
    """One shipped rubric by name; raises RubricError listing the known names."""
    rubrics = builtin_rubrics()
    if name not in rubrics:
        raise RubricError(f"unknown rubric {name!r}; shipped: {sorted(rubrics)}")
    return rubrics[name]
