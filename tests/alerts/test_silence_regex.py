"""Silence matchers run in linear time: ``(a+)+$`` and friends are accepted (RE2 has no
backtracking) and cost the same as ``a+`` on growing hostile inputs; syntax RE2 does not have
(backreferences, lookaround) is a clear 400, never a 5xx."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from alerts.grouping import Matcher
from driftline.app import create_app
from tests.conftest import make_settings

#: catastrophic on a backtracking engine (Python's ``re``: 2^n steps on ``"a" * n + "b"``)
EVIL = ["(a+)+$", "(a|a)*$", "(a*)*b", "(.*a){20}", "((a+)+)+c"]


@pytest.fixture
def api(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    with TestClient(create_app(make_settings(sqlite_url, grpc_enabled=False))) as c:
        yield c


def test_evil_patterns_match_in_linear_time_over_growing_inputs() -> None:
    """In a child process with a deadline, so the old backtracking engine fails the test (at
    n = 30 it needs ~10^9 steps per pattern) instead of hanging the suite."""
    script = textwrap.dedent(
        f"""
        import time
        from alerts.grouping import Matcher
        for pattern in {EVIL!r}:
            m = Matcher("model", pattern, "=~")
            for n in (10, 30, 1_000, 100_000):
                t = time.perf_counter()
                for s in ("a" * n + "b", "a" * n + "!", "a" * n):
                    m.matches({{"model": s}})
                print(pattern, n, round(time.perf_counter() - t, 6))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    rows = [line.rsplit(" ", 2) for line in out.stdout.splitlines()]
    assert len(rows) == len(EVIL) * 4
    # 100,000 characters: linear (RE2) takes about a millisecond; generous for a busy machine
    assert all(float(t) < 5.0 for _, _, t in rows), out.stdout


def test_matchers_keep_alertmanager_semantics() -> None:
    m = Matcher("model", "(a+)+$", "=~")
    assert m.matches({"model": "aaaa"}) and not m.matches({"model": "aab"})
    assert Matcher("model", "gpt-.*", "!~").matches({"model": "llama"})
    assert not Matcher("model", "gpt", "=~").matches({"model": "gpt-4o"})  # fully anchored
    assert Matcher("model", ".*", "=~").matches({"model": "a\ud800"})  # lone surrogate


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (r"(a)\1", "RE2"),  # backreference
        ("(?=a)a", "RE2"),  # lookahead
        ("(", "missing"),
        ("a" * 2000, "longer than"),
        ("\ud800", "surrogate"),
    ],
)
def test_api_rejects_what_re2_cannot_run_with_a_clear_400(
    api: TestClient, value: str, why: str
) -> None:
    body = {"matchers": [{"name": "model", "value": value, "op": "=~"}], "duration_s": 60}
    r = api.post(  # json.dumps escapes a lone surrogate as \ud800, as a client would send it
        "/api/v1/alerts/silences",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400, r.text
    assert why in r.json()["error"]["message"]


def test_api_accepts_nested_quantifiers_and_silences_match(api: TestClient) -> None:
    body = {"matchers": [{"name": "model", "value": "(a+)+$", "op": "=~"}], "duration_s": 60}
    r = api.post("/api/v1/alerts/silences", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["matchers"][0]["value"] == "(a+)+$"
