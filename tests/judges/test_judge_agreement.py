"""Agreement statistics against scikit-learn and scipy golden values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion_matrix

from judges.agreement import agreement_over_time, cohen_kappa, confusion_matrix, spearman


def _ordinal_pair(rng: np.random.Generator, n: int, noise: float) -> tuple[list[int], list[int]]:
    latent = rng.normal(size=n)
    human = np.clip(np.round(3 + 1.2 * latent), 1, 5).astype(int)
    judge = np.clip(np.round(3.3 + 1.2 * latent + rng.normal(scale=noise, size=n)), 1, 5)
    return human.tolist(), judge.astype(int).tolist()


@pytest.mark.parametrize("weights", ["none", "linear", "quadratic"])
@pytest.mark.parametrize("noise", [0.3, 1.0, 3.0])
def test_weighted_kappa_matches_sklearn(weights: str, noise: float) -> None:
    rng = np.random.default_rng(11)
    human, judge = _ordinal_pair(rng, 400, noise)
    ours = cohen_kappa(human, judge, weights=weights)  # type: ignore[arg-type]
    golden = cohen_kappa_score(human, judge, weights=None if weights == "none" else weights)
    assert ours.statistic == pytest.approx(golden, abs=1e-12)
    assert ours.n == 400
    assert ours.observed_agreement == pytest.approx(np.mean(np.equal(human, judge)))


def test_kappa_with_explicit_labels_and_unobserved_category() -> None:
    rng = np.random.default_rng(3)
    human, judge = _ordinal_pair(rng, 200, 0.8)
    human = [min(h, 4) for h in human]
    judge = [min(j, 4) for j in judge]  # score 5 never used
    labels = [1, 2, 3, 4, 5]
    ours = cohen_kappa(human, judge, weights="quadratic", labels=labels)
    golden = cohen_kappa_score(human, judge, weights="quadratic", labels=labels)
    assert ours.statistic == pytest.approx(golden, abs=1e-12)


def test_pass_fail_strings_and_unknowns_are_skipped() -> None:
    human = ["pass", "fail", "pass", None, "pass", "fail", "fail", "pass"]
    judge = ["pass", "fail", "fail", "pass", "pass", "pass", "fail", None]
    ours = cohen_kappa(human, judge, weights="none")
    kept = [(h, j) for h, j in zip(human, judge, strict=True) if h is not None and j is not None]
    golden = cohen_kappa_score([h for h, _ in kept], [j for _, j in kept])
    assert ours.n == 6
    assert ours.statistic == pytest.approx(golden)


def test_kappa_undefined_is_none_not_zero() -> None:
    result = cohen_kappa([3, 3, 3], [3, 3, 3])
    assert result.statistic is None
    assert result.observed_agreement == 1.0
    assert cohen_kappa([], []).statistic is None
    with pytest.raises(ValueError, match="same length"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="labels"):
        cohen_kappa([1, 2], [1, 7], labels=[1, 2])


def test_spearman_matches_scipy() -> None:
    rng = np.random.default_rng(5)
    human, judge = _ordinal_pair(rng, 150, 1.0)
    ours = spearman(human, judge)
    golden = stats.spearmanr(human, judge)
    assert ours.statistic == pytest.approx(golden.statistic)
    assert ours.pvalue == pytest.approx(golden.pvalue)
    assert spearman([1, 1, 1, 1], [1, 2, 3, 4]).statistic is None


def test_confusion_matrix_matches_sklearn_with_precision_recall() -> None:
    rng = np.random.default_rng(9)
    human, judge = _ordinal_pair(rng, 300, 1.0)
    ours = confusion_matrix(human, judge, labels=[1, 2, 3, 4, 5])
    golden = sk_confusion_matrix(human, judge, labels=[1, 2, 3, 4, 5])
    assert np.array_equal(np.array(ours.counts), golden)
    for k in range(5):
        column, row = golden[:, k].sum(), golden[k, :].sum()
        expected_p = golden[k, k] / column if column else None
        expected_r = golden[k, k] / row if row else None
        assert ours.precision[k] == (pytest.approx(expected_p) if expected_p is not None else None)
        assert ours.recall[k] == (pytest.approx(expected_r) if expected_r is not None else None)


def test_agreement_over_time_buckets() -> None:
    rng = np.random.default_rng(21)
    day = 86400.0
    human_a, _ = _ordinal_pair(rng, 100, 0.0)
    human_b, judge_b = _ordinal_pair(rng, 100, 2.0)
    times = [10.0 + i for i in range(100)] + [day + 5.0 + i for i in range(100)]
    human = human_a + human_b
    judge = human_a + judge_b  # perfect on day 0, noisy on day 1
    buckets = agreement_over_time(times, human, judge, bucket_s=day, labels=[1, 2, 3, 4, 5])
    assert [(b.start_s, b.end_s, b.n) for b in buckets] == [(0.0, day, 100), (day, 2 * day, 100)]
    assert buckets[0].kappa == pytest.approx(1.0)
    assert buckets[0].mean_gap == 0.0
    golden = cohen_kappa_score(human_b, judge_b, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert buckets[1].kappa == pytest.approx(golden)
    assert buckets[1].mean_gap == pytest.approx(np.mean(np.subtract(human_b, judge_b)))
    sparse = agreement_over_time([0.0, 5.0], [1, 2], [1, 2], bucket_s=1.0)
    assert [b.kappa for b in sparse] == [None, None]
    with pytest.raises(ValueError, match="bucket_s"):
        agreement_over_time([0.0], [1], [1], bucket_s=0)
