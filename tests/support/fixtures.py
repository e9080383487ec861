"""Where the test data lives: ``tests/fixtures/`` in this repository, nothing outside it.

- :data:`CASES`: the OTLP, drift, feedback and canary edge cases (``NN_name.json``) and
  ``EXPECTED.md``, the values a correct collector must produce for each.
- :data:`PRICE_FIXTURE`: case 00, the price table the cost cases are computed with (USD per
  1M tokens; test values, not real prices).
- :data:`DOLLY`: databricks-dolly-15k's prompts (14,994 rows, CC BY-SA 3.0; licence and
  provenance in ``tests/fixtures/data/dolly15k_prompts.ATTRIBUTION.md``), gzip-compressed
  (3.0 MB instead of 14.1 MB); read it with :func:`dolly_lines` or :func:`dolly_rows`.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES = FIXTURES / "cases"
PRICE_FIXTURE = CASES / "00_price_table.json"
DOLLY = FIXTURES / "data" / "dolly15k_prompts.jsonl.gz"


def dolly_lines() -> list[str]:
    """Every line of the Dolly prompt set, in file order, newline kept (14,994 JSON lines,
    each with ``id``, ``instruction``, ``context``, ``prompt``, ``has_context``)."""
    with gzip.open(DOLLY, "rt", encoding="utf-8") as f:
        return f.readlines()


def dolly_rows() -> Iterator[dict[str, Any]]:
    """The Dolly rows, decoded, in file order (see :func:`dolly_lines` for the fields)."""
    for line in dolly_lines():
        row: dict[str, Any] = json.loads(line)
        yield row
