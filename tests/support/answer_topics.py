"""The answer-topic scenario on databricks-dolly-15k (tests/fixtures/data), shared by
``tests/drift/test_answer_drift.py`` and ``benchmarks/answer_drift_power.py``.

Rows that carry a pasted passage (mostly Wikipedia) become grounded calls: the prompt is the
row's instruction without the passage, the answer the passage's first sentence. A passage is
about sport when it names one of :data:`SPORT`'s words; those passages are the wrong index a
shifted window answers from, so only the answers change topic.
"""

from __future__ import annotations

import re

import numpy as np

from tests.support.fixtures import dolly_rows

#: a passage is about sport when it names one of these (case-insensitive, whole words)
SPORT = re.compile(
    r"\b(football|soccer|basketball|baseball|cricket|tennis|golf|rugby|hockey|olympics|"
    r"athletes?|fifa|nba|nfl|world cup|grand slam|formula one)\b",
    re.IGNORECASE,
)
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.DOTALL)


def first_sentence(passage: str) -> str:
    """The passage up to its first ``.``, ``!`` or ``?`` followed by a space (all of it if none)."""
    text = passage.strip()
    found = _FIRST_SENTENCE.match(text)
    return found.group(1) if found else text


def answer_pools(seed: int = 20) -> tuple[list[tuple[str, str]], list[str]]:
    """``(grounded, sport)``: (instruction, first sentence of its passage) of the rows whose
    passage is not about sport, and the first sentences of the sports passages; each shuffled
    by ``np.random.default_rng(seed)``. Sizes: 3,999 and 462."""
    grounded: list[tuple[str, str]] = []
    sport: list[str] = []
    for row in dolly_rows():
        if not row["has_context"]:
            continue
        if SPORT.search(row["context"]):
            sport.append(first_sentence(row["context"]))
        else:
            grounded.append((row["instruction"], first_sentence(row["context"])))
    rng = np.random.default_rng(seed)
    return [grounded[i] for i in rng.permutation(len(grounded))], [
        sport[i] for i in rng.permutation(len(sport))
    ]
