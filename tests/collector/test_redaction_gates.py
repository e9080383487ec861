"""The redaction pre-checks ("gates") decide which detectors run: their fast forms must give
exactly the answer of their plain definitions, or a finding could be skipped."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.ingest import redaction as r
from collector.ingest import redaction_gates as g

FRAGMENTS = [
    "key",
    "KEY",
    "secret",
    "token",
    "passw",
    "pwd",
    "auth",
    "credential",
    "session",
    ":",
    "=",
    " ",
    " " * 50,
    '"',
    "'",
    "_",
    "-",
    ".",
    "\n",
    "sk-",
    "AKIA",
    "ghp_",
    "github_pat_",
    "xox",
    "_live_",
    "AIza",
    "eyJ",
    "-----BEGIN",
    "Bearer ",
    "@",
    "example.com",
    "10.0.0.1",
    "fe80::",
    "4111 1111 1111 1111",
    "(415) 555-0132",
    "Zx81Kq0Lm2Np3Qr4",
    "x" * 30,
    "[SECRET]",
    "api_key",
    '{"role": "user", "content": "',
]
TEXTS = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=30).map("".join),
)
KV_TAIL = re.compile(r"[a-z0-9_.-]{0,40}[\"']?\s*[:=]")


def key_value_possible_reference(low: str) -> bool:
    """The plain definition: some keyword occurrence has ``:``/``=`` in the 45 characters
    after it and the key tail pattern matches there."""
    for word in g.KEY_WORDS:
        i = low.find(word)
        while i != -1:
            end = i + len(word)
            tail = low[end : end + 45]
            if ("=" in tail or ":" in tail) and KV_TAIL.match(low, end):
                return True
            i = low.find(word, end)
    return False


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS)
def test_gates_equal_their_definitions(text: str) -> None:
    low = text.lower()
    assert g.key_value_possible(low) == key_value_possible_reference(low)
    assert g.secret_possible(text) == any(m in text for m in g.SECRET_MARKERS)
    assert g.has_digit(text) == any(ch in "0123456789" for ch in text)


def test_key_value_gate_on_separator_dense_text() -> None:
    """More separators than windows: the keyword-by-keyword scan is used."""
    dense = '{"a": 1, "b": 2, ' * 20
    assert g.key_value_possible((dense + '"api_key": "x"}').lower())
    assert not g.key_value_possible((dense + '"other": "token x"}').lower())
    far = "token" + " " * 60 + "= 12345678abc"  # separator beyond 45 characters
    assert not g.key_value_possible(far) and not key_value_possible_reference(far)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS)
def test_redact_count_matches_redact(text: str) -> None:
    full = r.redact(text)
    assert full.counts is not None
    assert r.redact_count(text) == (full.text, full.counts.total)
