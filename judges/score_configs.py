"""Score configs shared by judges, human review and scores sent from outside.

A score config says what a score named ``name`` may hold: ``numeric`` (a float, optionally in
``[min_value, max_value]``), ``categorical`` (one of ``categories``, each label with its
numeric value) or ``boolean`` (0 = false / fail, 1 = true / pass). Every rubric has one: a
Likert rubric is numeric 1..5 (its anchors' labels accepted), pass/fail is boolean, a
categorical rubric is categorical with values 0..n-1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from judges.rubrics import Rubric

DataType = Literal["numeric", "categorical", "boolean"]
DATA_TYPES: tuple[DataType, ...] = ("numeric", "categorical", "boolean")
_BOOL_LABELS = {"false": 0.0, "fail": 0.0, "no": 0.0, "true": 1.0, "pass": 1.0, "yes": 1.0}


@dataclass(frozen=True, slots=True)
class ScoreConfig:
    """What a score may hold (see the module docstring); ``categories``: ``(label, value)``."""

    name: str
    data_type: DataType
    min_value: float | None = None
    max_value: float | None = None
    categories: tuple[tuple[str, float], ...] = ()

    def normalize(self, value: float | None, label: str | None) -> tuple[float | None, str | None]:
        """``(value, label)`` checked against this config, each filled from the other.

        Raises:
            ValueError: naming ``value`` or ``label`` when off the config.
        """
        if value is not None and (isinstance(value, bool) or not math.isfinite(float(value))):
            raise ValueError(f"value must be a finite number, got {value!r}")
        if self.data_type == "numeric":
            if value is None and label is not None and self.categories:
                value = dict(self.categories).get(label)
            if value is None:
                raise ValueError(f"score {self.name!r} is numeric: value is required")
            lo, hi = self.min_value, self.max_value
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ValueError(f"value {value} is outside [{lo}, {hi}] of score {self.name!r}")
            by_value = {v: lb for lb, v in self.categories}
            return float(value), label if label is not None else by_value.get(float(value))
        if self.data_type == "boolean":
            if value is None and label is not None:
                if label.lower() not in _BOOL_LABELS:
                    raise ValueError(f"label must be one of {sorted(_BOOL_LABELS)}, got {label!r}")
                value = _BOOL_LABELS[label.lower()]
            if value not in (0, 1):
                raise ValueError(f"score {self.name!r} is boolean: value must be 0 or 1")
            if label is None:  # the rubric's own word (pass / fail) when it has one
                label = {v: lb for lb, v in self.categories}.get(float(value))
            return float(value), label if label is not None else ("true" if value else "false")
        labels = dict(self.categories)
        if label is None:
            by_value = {v: lb for lb, v in self.categories}
            if value is None or float(value) not in by_value:
                raise ValueError(f"score {self.name!r} is categorical: label is required")
            label = by_value[float(value)]
        if labels and label not in labels:
            raise ValueError(f"label must be one of {sorted(labels)}, got {label!r}")
        return labels.get(label, None if value is None else float(value)), label


def config_of_rubric(rubric: Rubric) -> ScoreConfig:
    """The score config of a rubric's scale."""
    levels = tuple((lv.label, float(lv.score)) for lv in rubric.scale.levels)
    if rubric.scale.kind == "pass_fail":
        return ScoreConfig(rubric.name, "boolean", 0.0, 1.0, levels)
    if rubric.scale.kind == "categorical":
        return ScoreConfig(rubric.name, "categorical", categories=levels)
    lo, hi = min(rubric.scale.scores), max(rubric.scale.scores)
    return ScoreConfig(rubric.name, "numeric", float(lo), float(hi), levels)


def resolve(name: str, data_type: str | None, rubrics: dict[str, Rubric]) -> ScoreConfig:
    """The config of a score: its rubric's when ``name`` is a rubric, else a free config of
    ``data_type``.

    Raises:
        ValueError: unknown ``data_type``, a ``data_type`` contradicting the rubric, or none
            given for a name that is not a rubric.
    """
    if data_type is not None and data_type not in DATA_TYPES:
        raise ValueError(f"data_type must be one of {', '.join(DATA_TYPES)}, got {data_type!r}")
    if name in rubrics:
        cfg = config_of_rubric(rubrics[name])
        if data_type is not None and data_type != cfg.data_type:
            raise ValueError(f"score {name!r} is {cfg.data_type} (rubric), got {data_type!r}")
        return cfg
    if data_type is None:
        raise ValueError(f"data_type is required for {name!r} (not a rubric)")
    return ScoreConfig(name, data_type)
