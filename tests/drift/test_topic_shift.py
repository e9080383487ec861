"""Topic-shift scenario on real prompts (databricks-dolly-15k, tests/fixtures/data).

Reference: prompts without pasted context (open QA, brainstorming, creative writing, ...).
Current: a mix that shifts towards prompts with pasted context (closed QA, extraction,
summarisation). The shift must be detected on input length and on prompt embeddings, and a
window drawn from the reference population must not alarm.
"""

from __future__ import annotations

import numpy as np
import pytest

from drift.embeddings import load_embedder
from drift.report import SignalWindow, drift_report
from tests.support.fixtures import dolly_rows

MAX_SEQ = 128  # same as tests/drift/test_embeddings.py: one cached model per process


@pytest.fixture(scope="module")
def pools() -> tuple[list[str], list[str]]:
    """(prompts without context, prompts with context), each shuffled with a fixed seed."""
    plain: list[str] = []
    context: list[str] = []
    for row in dolly_rows():
        (context if row["has_context"] else plain).append(row["prompt"])
    rng = np.random.default_rng(15011)
    return [plain[i] for i in rng.permutation(len(plain))], [
        context[i] for i in rng.permutation(len(context))
    ]


def _window(plain: list[str], context: list[str], n: int, share: float) -> list[str]:
    k = round(n * share)
    return context[:k] + plain[: n - k]


def test_dataset_has_the_two_populations(pools: tuple[list[str], list[str]]) -> None:
    plain, context = pools
    assert (len(plain), len(context)) == (10533, 4461)  # tests/fixtures/data/README.md


def test_shift_towards_pasted_context_is_detected_on_input_length(
    pools: tuple[list[str], list[str]],
) -> None:
    plain, context = pools
    reference = [float(len(p)) for p in plain[:600]]
    verdicts = {}
    for i, share in enumerate((0.0, 0.1, 0.3, 0.5)):
        # each window uses prompts seen neither in the reference nor in another window
        cur = _window(plain[600 + 300 * i :], context[300 * i :], 300, share)
        report = drift_report(
            [SignalWindow("input_chars", "numerical", reference, [float(len(p)) for p in cur])]
        )
        result = report.get("input_chars").result
        assert result.method == "ks"
        verdicts[share] = result.drifted
    assert verdicts[0.0] is False
    assert verdicts[0.3] is True and verdicts[0.5] is True


def test_shift_is_detected_on_prompt_embeddings(pools: tuple[list[str], list[str]]) -> None:
    plain, context = pools
    n = 120
    embedder = load_embedder(max_seq_length=MAX_SEQ)
    reference = embedder.embed(plain[:n])
    stationary = embedder.embed(plain[n : 2 * n])
    shifted = embedder.embed(_window(plain[2 * n :], context, n, 0.5))
    rng = np.random.default_rng(42)
    verdicts = {}
    for name, cur in (("stationary", stationary), ("shifted", shifted)):
        report = drift_report(
            [
                SignalWindow("prompt_embedding", "embedding", list(reference), list(cur)),
                SignalWindow(
                    "prompt_centroid",
                    "embedding",
                    list(reference),
                    list(cur),
                    method="mean_embedding_distance",
                ),
            ],
            rng=rng,
            # the budget of 1 false alarm per 100 windows: a valid test alarms on a
            # stationary window with probability q, so q = 0.01 (permutation p-values reach
            # 1/1001 and 1/501, far below it when the shift is real)
            fdr_q=0.01,
        )
        verdicts[name] = (
            report.get("prompt_embedding").drifted,
            report.get("prompt_centroid").drifted,
        )
        if name == "shifted":
            auc = report.get("prompt_embedding").result.statistic
            assert auc is not None and auc > 0.65
    assert verdicts == {"stationary": (False, False), "shifted": (True, True)}
