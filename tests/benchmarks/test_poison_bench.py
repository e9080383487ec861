"""The poison benchmark's inputs are what they claim (``benchmarks/poison.py``): adversarial
prompts of 4-16 KB in the two shapes of issue 35, evaluation-only log exports that the
collector's own decoder reads as one evaluation and no content, timed >= 2**63 when asked."""

from __future__ import annotations

import random

import pytest

from benchmarks.poison import LOG_POISON, adversarial, log_export, p99
from collector.ingest.decode import PROTOBUF
from collector.ingest.logs import decode_logs


@pytest.mark.parametrize("kind", ["token_redos", "email_redos"])
def test_adversarial_prompts_are_4_to_16_kb(kind: str) -> None:
    rng = random.Random(1)
    for _ in range(50):
        prompt = adversarial(kind, rng)
        assert 4000 <= len(prompt) <= 16384
        if kind == "token_redos":
            assert prompt.startswith("token=abc .token") and prompt.endswith(".token")
        else:
            assert prompt.startswith("a!a!") and prompt.endswith("!@")


@pytest.mark.parametrize("kind", LOG_POISON)
def test_log_exports_hold_one_evaluation_and_nothing_else(kind: str) -> None:
    batch = decode_logs(log_export(kind, 7), PROTOBUF)
    assert len(batch.evaluations) == 1 and not batch.content and batch.rejected == 0
    ev = batch.evaluations[0]
    assert (ev.time_unix_nano >= 2**63) == (kind == "eval_time_2_63")
    assert ("\x00" in ev.name) == (kind == "eval_nul_name")
    assert (len(ev.name) == 5000) == (kind == "eval_long_name")


def test_p99_takes_an_observed_value_and_counts_unseen_as_infinite() -> None:
    assert p99([float(i) for i in range(1, 101)]) == 99.0
    assert p99([0.1] * 98 + [float("inf")] * 2) == float("inf")
