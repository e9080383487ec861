"""The poison benchmark's inputs are what they claim (``benchmarks/poison.py``): adversarial
prompts of 4-16 KB in the two shapes of issue 35, evaluation-only log exports (one
``gen_ai.evaluation.result`` record and nothing else) timed >= 2**63, with a NUL or with a
5,000-character name when asked."""

from __future__ import annotations

import random

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from benchmarks.poison import LOG_POISON, adversarial, log_export, p99


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
    req = ExportLogsServiceRequest.FromString(log_export(kind, 7))
    [rec] = [r for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert rec.event_name == "gen_ai.evaluation.result" and not rec.trace_id
    attrs = {kv.key: kv.value for kv in rec.attributes}
    name = attrs["gen_ai.evaluation.name"].string_value
    assert (rec.time_unix_nano >= 2**63) == (kind == "eval_time_2_63")
    assert ("\x00" in name) == (kind == "eval_nul_name")
    assert (len(name) == 5000) == (kind == "eval_long_name")
    assert attrs["gen_ai.response.id"].string_value == "chatcmpl-7"


def test_p99_takes_an_observed_value_and_counts_unseen_as_infinite() -> None:
    assert p99([float(i) for i in range(1, 101)]) == 99.0
    assert p99([0.1] * 98 + [float("inf")] * 2) == float("inf")
