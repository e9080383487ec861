"""``content._loads`` (orjson where it agrees with ``json``) reads every text as ``json.loads``."""

from __future__ import annotations

import json
import random
import re

import pytest

from collector.ingest.content import _has_digit_run, _loads

CASES = [
    '{"role": "user", "parts": [{"type": "text", "content": "hi"}]}',
    '{"a": 1, "a": 2}',
    "[18446744073709551615, 18446744073709551616, -9223372036854775809]",
    '{"n": 123456789012345678901234567890}',
    '["x 12345678901234567890 y", 1]',
    "[1.0, -0.0, 1e-320, 1.7976931348623157e308]",
    "[1e400, -1e400]",
    '["\\ud800", "\\u0000", "\\u00e9"]',
    "[NaN, Infinity]",
    "[" * 600 + "]" * 600,
]


def _same(a: object, b: object) -> bool:
    # json.dumps tells 1 from 1.0, -0.0 from 0.0 and keeps NaN and exact big ints
    return json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize("text", CASES)
def test_loads_gives_what_json_gives(text: str) -> None:
    assert _same(_loads(text), json.loads(text))


@pytest.mark.parametrize("text", ["{", "[1,]", "{'a': 1}", '"\\x"'])
def test_loads_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        _loads(text)


def test_digit_run_matches_the_regex() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        text = "".join(rng.choice("0123456789a ") for _ in range(rng.randint(0, 90)))
        assert _has_digit_run(text) == bool(re.search("[0-9]{20}", text)), text
