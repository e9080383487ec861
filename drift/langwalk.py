"""py3langid's classifier run on many texts at once, with the library's arithmetic.

``py3langid`` (>= 0.4) classifies one text in three steps: a walk of the text's UTF-8 bytes
through a byte n-gram automaton (a Python loop, one iteration per byte), the naive Bayes score
``log1p(counts) @ ptc[features] + pc`` over the visited features (``ptc`` is stored as
float16, and converting the gathered rows to float32 for the product costs as much again),
and a length-normalised softmax. :class:`BatchClassifier` advances the automaton of every
text of a batch one byte position per numpy step, converts the rows of ``ptc`` that the
batch visits once, and then scores each text on its own with the same numpy expressions in
the same order (same dtypes, shapes and operand layouts: the float16 rows are converted
exactly, as the library's product converts them), so labels and confidences are equal bit for
bit. :func:`batch_classifier` checks that on probe texts against the installed library and
returns ``None`` (callers then use the library text by text) when the library's layout or
arithmetic is another one.

Source: Lui & Baldwin (2012), "langid.py: An Off-the-shelf Language Identification Tool",
ACL System Demonstrations; ``py3langid`` 0.4 (``LanguageIdentifier._decide``, ``visit_counts``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: texts walked together (the walk's arrays hold one entry per byte of the batch's texts)
WALK_BATCH = 512
#: texts on which :func:`batch_classifier` compares itself with the library
PROBES = (
    "Why can camels survive for long without water?",
    "Pourquoi les chameaux peuvent-ils survivre longtemps sans eau ?",
    "Warum können Kamele lange ohne Wasser überleben?",
    "Почему верблюды могут долго жить без воды?",
    "为什么骆驼可以长时间不喝水？",
    "WRITE A SHORT POEM ABOUT THE SEA",
    "ok",
)
_NEEDED = (
    "tk_nextmove", "tk_row", "tk_output", "nb_ptc", "nb_pc", "nb_classes", "min_confidence",
    "_encode", "_alias_pairs", "_norm_probs",
)  # fmt: skip


class BatchClassifier:
    """``identifier.classify`` (a py3langid ``LanguageIdentifier`` with ``norm_probs=True``)
    over many texts; build it with :func:`batch_classifier`, which checks the equality."""

    def __init__(self, identifier: Any) -> None:
        self._ident = identifier
        self._nextmove = np.asarray(identifier.tk_nextmove)
        self._rowbase = np.asarray(identifier.tk_row, dtype=np.int64) << 8
        self._output = np.asarray(identifier.tk_output, dtype=np.int64)
        self._n_features = int(self._output.max()) + 1

    def classify(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """(language, confidence) of every text, in order, as ``identifier.classify``."""
        encoded = [self._ident._encode(t) for t in texts]
        out: list[tuple[str, float]] = [("", 0.0)] * len(encoded)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        by_length = np.argsort(-lengths, kind="stable")  # longest first: the active texts a prefix
        for lo in range(0, by_length.size, WALK_BATCH):
            ids = by_length[lo : lo + WALK_BATCH].tolist()
            for i, scores in zip(ids, self._scores([encoded[i] for i in ids]), strict=True):
                out[i] = self._decide(scores, len(encoded[i]))
        return out

    def _walk(self, batch: Sequence[bytes]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(output feature of the state entered at each byte of every text, −1 where none, the
        texts' bytes concatenated, shape (total bytes,); each text's length in bytes);
        ``batch`` sorted longest first."""
        n = len(batch)
        lengths = np.fromiter(map(len, batch), dtype=np.int64, count=n)
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        data = np.frombuffer(b"".join(batch), dtype=np.uint8)
        width = int(lengths[0])
        active = np.searchsorted(-lengths, -np.arange(width), side="left")  # lengths > pos
        state = np.zeros(n, dtype=np.int64)
        feats = np.empty(data.size, dtype=np.int64)
        for pos in range(width):
            k = int(active[pos])
            at = starts[:k] + pos  # byte ``pos`` of each text still active
            state[:k] = self._nextmove[self._rowbase[state[:k]] + data[at]]
            feats[at] = self._output[state[:k]]
        return feats, lengths

    def _scores(self, batch: Sequence[bytes]) -> list[NDArray[np.float32] | None]:
        """Naive Bayes scores ``log1p(counts) @ ptc[features] + pc`` per text (features in the
        order of first visit, as py3langid's ``Counter``), None for a text with no feature."""
        out: list[NDArray[np.float32] | None] = [None] * len(batch)
        if not batch or not batch[0]:
            return out
        feats, lengths = self._walk(batch)
        at = np.flatnonzero(feats >= 0)  # text-major, positions ascending within a text
        if at.size == 0:
            return out
        text = np.repeat(np.arange(len(batch), dtype=np.int64), lengths)[at]
        key = text * self._n_features + feats[at]
        uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        order = np.argsort(first, kind="stable")  # by text, then by first visit
        owner = text[first[order]]
        feature = uniq[order] - owner * self._n_features
        rows, local = np.unique(feature, return_inverse=True)
        table = self._ident.nb_ptc[rows].astype(np.float32)  # exact: float16 ⊂ float32
        counts = counts[order]
        bounds = np.searchsorted(owner, np.arange(len(batch) + 1))
        for j in range(len(batch)):
            a, b = int(bounds[j]), int(bounds[j + 1])
            if b > a:  # fresh operands of the library's dtypes and shapes
                logc = np.log1p(counts[a:b].astype(np.float32))
                out[j] = logc @ table[local[a:b]] + self._ident.nb_pc
        return out

    def _decide(self, scores: NDArray[np.float32] | None, n_bytes: int) -> tuple[str, float]:
        """py3langid's ``_decide`` (``norm_probs``) and ``classify`` from the raw scores."""
        ident = self._ident
        if scores is None:  # no feature: 0.0 under norm_probs (uniform)
            scores = np.full(len(ident.nb_classes), 0.0, dtype=np.float32)
        scores *= 1.0 / math.sqrt(n_bytes or 1)
        np.exp(scores - scores.max(), out=scores)
        scores /= scores.sum()
        for i, j in ident._alias_pairs:
            scores[i] += scores[j]
            scores[j] = 0.0
        best = int(scores.argmax())
        conf = float(scores[best])
        if ident.min_confidence is not None and conf < ident.min_confidence:
            return "und", conf
        return str(ident.nb_classes[best]), conf


def batch_classifier(identifier: Any) -> BatchClassifier | None:
    """A :class:`BatchClassifier` of ``identifier`` when it has py3langid 0.4's layout
    (deduplicated automaton rows, one output feature per state, ``norm_probs=True``) and
    classifies :data:`PROBES` exactly as ``identifier.classify`` does; else None."""
    if not all(hasattr(identifier, a) for a in _NEEDED) or identifier._norm_probs is not True:
        return None
    output = np.asarray(identifier.tk_output)
    if output.ndim != 1 or output.dtype.kind not in "iu" or output.size != len(identifier.tk_row):
        return None
    batch = BatchClassifier(identifier)
    probes = [*PROBES, " ".join(PROBES)]
    expected = [identifier.classify(t) for t in probes]
    if batch.classify(probes) != [(str(lang), float(conf)) for lang, conf in expected]:
        return None
    return batch
