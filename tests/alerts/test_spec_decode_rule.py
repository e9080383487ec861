"""Speculative-decoding guard: a threshold rule on the draft acceptance rate of each scraped
engine, computed from the counters' increases in the window, fires naming the engine's URL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, insert

from alerts.rules import Breach, ThresholdRule, breach_of
from alerts.series import rule_series
from collector.store.models.api import EngineSample

T0 = 1_800_000_000.0


def _samples(engine: Engine, url: str, counters: list[tuple[int, int] | None]) -> None:
    rows: list[dict[str, Any]] = []
    for i, cnt in enumerate(counters):
        draft, acc = cnt if cnt is not None else (None, None)
        rows.append(
            {
                "tenant": "default",
                "url": url,
                "engine_kind": "vllm",
                "model_name": "smollm2",
                "scraped_unix_nano": int((T0 - 250 + 60 * i) * 1e9),
                "spec_decode_draft_tokens_total": draft,
                "spec_decode_accepted_tokens_total": acc,
            }
        )
    with engine.begin() as c:
        c.execute(insert(EngineSample), rows)


def test_low_acceptance_fires_for_the_engine_that_has_it(engine: Engine) -> None:
    _samples(engine, "http://good:8100/metrics", [(0, 0), (1000, 800), (2000, 1600)])
    _samples(engine, "http://bad:8100/metrics", [(0, 0), (1000, 300), (3000, 700)])
    _samples(engine, "http://nospec:8100/metrics", [None, None, None])  # no speculative decoding
    rule = ThresholdRule(
        name="spec_decode_acceptance_low",
        stat="spec_decode_acceptance_rate",
        op="<",
        threshold=0.5,
        receivers=("oncall",),
        group_labels=("url", "model"),
        min_samples=2,
    )
    with engine.connect() as c:
        got = {s.labels["url"]: s.samples[0].value for s in rule_series(c, "default", rule, T0)}
    assert got["http://good:8100/metrics"] == pytest.approx(0.8)
    assert got["http://bad:8100/metrics"] == pytest.approx(700 / 3000)
    assert "http://nospec:8100/metrics" not in got  # unknown, never 0
    assert breach_of(rule, got["http://bad:8100/metrics"], firing=False) == Breach.BREACHING
    assert breach_of(rule, got["http://good:8100/metrics"], firing=False) != Breach.BREACHING
