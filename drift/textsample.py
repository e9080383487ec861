"""Signals that need per-text Python work, on bounded random samples of each window × segment.

Language identification (py3langid, about 0.1–1 ms per text) and prompt embeddings
(all-MiniLM-L6-v2 on CPU, about 10 ms per prompt on 2 cores) cannot run on every call of a
large window, so each window × segment contributes a uniform random sample: rows are ordered
by a hash of their ids salted from ``rng`` and the first ``text_sample`` /
``embedding_sample`` are kept. Tests on a uniform sample are valid tests of the window's
distribution, with the power of the sample size.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from drift.columnar import ColumnWindow
from drift.errors import EmbeddingModelUnavailableError
from drift.textsignals import LanguageGuess, detect_language, language_mismatch

if TYPE_CHECKING:
    from drift.signals import ExtractConfig

log = logging.getLogger(__name__)

Segments = dict[int | None, tuple[str | None, dict[str, str | None]]]


def _sample(
    con: duckdb.DuckDBPyConnection, k: int, salt: int, per_segment: bool, cols: Sequence[str]
) -> list[tuple[Any, ...]]:
    """Up to ``k`` rows of table ``s`` per (segment, window) — or per window for all traffic."""
    part = "seg_id, win" if per_segment else "win"
    where = "seg_id >= 0" if per_segment else "TRUE"
    return con.execute(
        f"SELECT seg_id, win, rn, {', '.join(cols)} FROM (SELECT *, row_number() OVER ("
        f"PARTITION BY {part} ORDER BY hash(trace_id || ':' || span_id || ':' || {int(salt)})"
        f") AS rn FROM s WHERE {where}) WHERE rn <= {int(k)}"
    ).fetchall()


def sampled_text_columns(
    con: duckdb.DuckDBPyConnection,
    config: ExtractConfig,
    segments: Segments,
    skipped: dict[str, str],
    rng: np.random.Generator,
) -> list[ColumnWindow]:
    """Language and embedding columns from samples of DuckDB table ``s``.

    Args:
        con: DuckDB connection holding table ``s`` (one row per call with ``seg_id``, ``win``,
            ``trace_id``, ``span_id`` and ``input_text`` / ``output_text`` when read).
        config: signals and sample sizes (:class:`drift.signals.ExtractConfig`).
        segments: segment id (``None`` = all traffic) → (label, keys).
        skipped: signal → reason; embedding signals are added here when the model is missing.
        rng: salts the sample order.

    Returns:
        ``prompt_language`` / ``output_language`` (categorical counts of ISO 639-1 codes),
        ``language_mismatch`` (booleans) and ``prompt_embedding`` (classifier test) /
        ``prompt_centroid`` (mean-embedding distance) windows, per segment.
    """
    wanted = set(config.signals)
    cols = [c for c in ("input_text", "output_text") if c in _columns(con)]
    if not cols:
        return []
    k = max(config.text_sample, config.embedding_sample)
    salt = int(rng.integers(0, 2**31))
    rows: dict[tuple[int | None, int], list[tuple[int, dict[str, str | None]]]] = {}
    for per_segment in (True, False):
        if not per_segment and None not in segments:
            continue
        for seg_id, win, rn, *texts in _sample(con, k, salt, per_segment, cols):
            key = (seg_id if per_segment else None, int(win))
            rows.setdefault(key, []).append((int(rn), dict(zip(cols, texts, strict=True))))
    out: list[ColumnWindow] = []
    langs = [s for s in ("prompt_language", "output_language", "language_mismatch") if s in wanted]
    if langs:
        out += _language_columns(rows, segments, langs, config.text_sample)
    emb = [s for s in ("prompt_embedding", "prompt_centroid") if s in wanted]
    if emb and "input_text" in cols:
        out += _embedding_columns(rows, segments, emb, config, skipped)
    return out


def _columns(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("DESCRIBE s").fetchall()}


def _language_columns(
    rows: dict[tuple[int | None, int], list[tuple[int, dict[str, str | None]]]],
    segments: Segments,
    names: Sequence[str],
    k: int,
) -> list[ColumnWindow]:
    memo: dict[str, LanguageGuess | None] = {}

    def lang(text: str | None) -> LanguageGuess | None:
        if text is None:
            return None
        if text not in memo:
            memo[text] = detect_language(text[:2000])
        return memo[text]

    out: list[ColumnWindow] = []
    for seg_id, (label, _) in segments.items():
        per_win: list[dict[str, tuple[Counter[Any], int]]] = []
        for win in (0, 1):
            acc: dict[str, tuple[Counter[Any], int]] = {n: (Counter(), 0) for n in names}
            for rn, texts in rows.get((seg_id, win), []):
                if rn > k:
                    continue
                p, o = lang(texts.get("input_text")), lang(texts.get("output_text"))
                values = {
                    "prompt_language": None if p is None else p.language,
                    "output_language": None if o is None else o.language,
                    "language_mismatch": language_mismatch(p, o),
                }
                for n in names:
                    counts, nulls = acc[n]
                    if values[n] is None:
                        acc[n] = (counts, nulls + 1)
                    else:
                        counts[values[n]] += 1
            per_win.append(acc)
        for n in names:
            (rc, rn_), (cc, cn) = per_win[0][n], per_win[1][n]
            out.append(
                ColumnWindow(
                    n,
                    "categorical",
                    label,
                    reference_counts=dict(rc),
                    current_counts=dict(cc),
                    reference_nulls=rn_,
                    current_nulls=cn,
                )
            )
    return out


def _embedding_columns(
    rows: dict[tuple[int | None, int], list[tuple[int, dict[str, str | None]]]],
    segments: Segments,
    names: Sequence[str],
    config: ExtractConfig,
    skipped: dict[str, str],
) -> list[ColumnWindow]:
    from drift.embeddings import load_embedder

    try:
        embedder = load_embedder(max_seq_length=config.embedding_max_seq)
    except EmbeddingModelUnavailableError as exc:
        for n in names:
            skipped[n] = str(exc)
        return []
    texts: dict[tuple[int | None, int], list[str]] = {}
    for key, items in rows.items():
        texts[key] = [
            text
            for rn, t in sorted(items, key=lambda it: it[0])
            if rn <= config.embedding_sample and (text := t.get("input_text")) is not None
        ]
    unique = list(dict.fromkeys(t for group in texts.values() for t in group))
    vectors = dict(zip(unique, embedder.embed(unique), strict=True)) if unique else {}
    width = embedder.dim
    out: list[ColumnWindow] = []
    for seg_id, (label, _) in segments.items():
        mats = []
        for win in (0, 1):
            group = texts.get((seg_id, win), [])
            mats.append(
                np.vstack([vectors[t] for t in group]).astype(np.float64)
                if group
                else np.zeros((0, width))
            )
        for n in names:
            method = "classifier_auc" if n == "prompt_embedding" else "mean_embedding_distance"
            out.append(
                ColumnWindow(
                    n, "embedding", label, reference=mats[0], current=mats[1], method=method
                )
            )
    return out
