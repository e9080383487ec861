"""Signals that need per-text Python work, on bounded random samples of each window × segment.

Language identification (py3langid, about 0.1–1 ms per text; the run's distinct sampled texts
are identified in one batch, :func:`drift.textsignals.detect_languages`) and prompt / answer
embeddings (all-MiniLM-L6-v2 on CPU, about 10 ms per short text on 2 cores) cannot run on every
call of a large window, so each window × segment contributes a uniform random sample: rows are
ordered by a hash of their ids salted from ``rng``; the first ``text_sample`` calls get language
identification, and for each embedded text (prompt, answer) the first ``embedding_sample``
calls *that captured it* are embedded. A call whose text was not captured (``NULL``: content
capture off, or no answer recorded) is not in that text's sample and is counted as a null,
never embedded as an empty string. Tests on a uniform sample are valid tests of the window's
distribution (of the calls with that text captured), with the power of the sample size.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa

from collector.lake import driftsignals
from drift.columnar import ColumnWindow
from drift.errors import EmbeddingModelUnavailableError
from drift.textdraw import Nulls, draw, fetch_keys
from drift.textsignals import LanguageGuess, detect_languages, language_mismatch

if TYPE_CHECKING:
    from drift.signals import ExtractConfig

log = logging.getLogger(__name__)

Segments = dict[int | None, tuple[str | None, dict[str, str | None]]]


#: embedding signal → (captured text it embeds, its test): the classifier two-sample test and
#: the centroid distance (:mod:`drift.embeddings`), each on the prompts and on the answers
#: (the registry's ``embedded`` signals, :mod:`collector.lake.driftsignals`)
EMBEDDING_TESTS: dict[str, tuple[str, str]] = {
    sig.name: (sig.text or "", sig.test) for sig in driftsignals.signals(source="embedded")
}

Rows = dict[tuple[int | None, int], list[tuple[int, dict[str, str | None]]]]


#: ``(keys, columns) -> table``: the text ``columns`` of the calls in ``keys`` (``win``,
#: ``trace_id``, ``span_id``), as :attr:`drift.callreaders.CallReader.texts` of the run
FetchTexts = Callable[[pa.Table, Sequence[str]], pa.Table]


def sampled_text_columns(
    con: duckdb.DuckDBPyConnection,
    config: ExtractConfig,
    segments: Segments,
    skipped: dict[str, str],
    ids: pa.Table,
    fetch_texts: FetchTexts,
) -> list[ColumnWindow]:
    """Language and embedding columns from samples of DuckDB table ``s``: what
    :func:`start_sampled_text_columns` returns, finished at once (arguments, return value as
    there)."""
    return start_sampled_text_columns(con, config, segments, skipped, ids, fetch_texts)()


def start_sampled_text_columns(
    con: duckdb.DuckDBPyConnection,
    config: ExtractConfig,
    segments: Segments,
    skipped: dict[str, str],
    ids: pa.Table,
    fetch_texts: FetchTexts,
) -> Callable[[], list[ColumnWindow]]:
    """Language and embedding columns from samples of DuckDB table ``s``, in two steps: the
    samples are drawn in ``con`` now and the sampled calls' texts are read by ``fetch_texts`` on
    a worker thread (its own connection; ``con`` is not used after this returns), so the caller
    can build other columns meanwhile; without embedding signals the languages are identified
    and the columns built on that thread too. The returned function waits for the columns and
    returns them (and raises what the read or the identification raised).

    Args:
        con: DuckDB connection holding table ``s`` (one row per call with ``seg_id``, ``win``,
            ``_i`` (the call's row in ``ids``), ``h`` (the salted hash of its ids that orders
            the samples: the salt is drawn from the run's rng), and the texts that are
            embedded: every call's text is needed for their null counts and first non-NULL
            texts).
        config: signals and sample sizes (:class:`drift.signals.ExtractConfig`).
        segments: segment id (``None`` = all traffic) → (label, keys).
        skipped: signal → reason; embedding signals are added here when the model is missing.
        ids: ``trace_id`` and ``span_id`` of every call (row ``_i`` of ``s``), and optionally
            its ``start_unix_nano`` (then handed to ``fetch_texts`` with the keys: a sealed
            hour's scan skips the calls that started at no sampled time).
        fetch_texts: reads the texts of the language sample that ``s`` does not hold (only
            those calls' texts are read).

    Returns:
        A function returning ``prompt_language`` / ``output_language`` (categorical counts of
        ISO 639-1 codes),
        ``language_mismatch`` (booleans) and the :data:`EMBEDDING_TESTS` windows
        (``prompt_embedding`` / ``answer_embedding``: classifier test, ``prompt_centroid`` /
        ``answer_centroid``: mean-embedding distance; shape (n, 384), with the window's calls
        whose text was not captured as nulls), per segment.
    """
    wanted = set(config.signals)
    langs = [s for s in driftsignals.names(source="sampled") if s in wanted]
    in_s = _columns(con)
    emb = [s for s, (c, _) in EMBEDDING_TESTS.items() if s in wanted and c in in_s]
    embedded = list(dict.fromkeys(EMBEDDING_TESTS[s][0] for s in emb))
    lang_cols = {c for s in langs for c in _LANGUAGE_TEXTS[s]}
    cols = [c for c in ("input_text", "output_text") if c in lang_cols or c in embedded]
    if not cols:
        return lambda: []
    present = [c for c in cols if c in in_s]
    missing = [c for c in cols if c not in in_s]
    sampled, nulls, starts = draw(con, config, segments, ids, present, embedded)
    key_table = fetch_keys(sampled, starts, config.text_sample) if missing else None

    def read() -> dict[tuple[int, str, str], tuple[str | None, ...]]:
        fetched: dict[tuple[int, str, str], tuple[str | None, ...]] = {}
        if key_table is not None:
            for r in fetch_texts(key_table, missing).to_pylist():
                fetched[(int(r["win"]), r["trace_id"], r["span_id"])] = tuple(r[c] for c in missing)
        return fetched

    def build() -> list[ColumnWindow]:
        return _finish(sampled, nulls, read(), present, missing, config, segments, skipped)

    if embedded:  # the embedder runs on the caller's thread, in finish()
        if key_table is None:
            return lambda: _finish(sampled, nulls, {}, present, missing, config, segments, skipped)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drift-texts")
        reading = worker.submit(read)
        worker.shutdown(wait=False)  # the thread ends with the read
        return lambda: _finish(
            sampled, nulls, reading.result(), present, missing, config, segments, skipped
        )
    # languages only: the texts are read and identified on the worker thread
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drift-texts")
    building: Future[list[ColumnWindow]] = worker.submit(build)
    worker.shutdown(wait=False)  # the thread ends with the columns
    return building.result


def _finish(
    sampled: list[tuple[bool, list[tuple[Any, ...]]]],
    nulls: Nulls,
    fetched: dict[tuple[int, str, str], tuple[str | None, ...]],
    present: Sequence[str],
    missing: Sequence[str],
    config: ExtractConfig,
    segments: Segments,
    skipped: dict[str, str],
) -> list[ColumnWindow]:
    """The columns of :func:`start_sampled_text_columns` from the sampled rows and texts."""
    wanted = set(config.signals)
    langs = [s for s in driftsignals.names(source="sampled") if s in wanted]
    emb = [s for s, (c, _) in EMBEDDING_TESTS.items() if s in wanted and c in present]
    rows: Rows = {}
    none = (None,) * len(missing)
    for per_segment, got in sampled:
        for seg_id, win, rn, trace_id, span_id, *texts in got:
            key = (seg_id if per_segment else None, int(win))
            values = dict(zip(present, texts, strict=True))
            extra = (
                fetched.get((int(win), trace_id, span_id), none)
                if rn <= config.text_sample
                else none
            )
            values.update(zip(missing, extra, strict=True))
            rows.setdefault(key, []).append((int(rn), values))
    out: list[ColumnWindow] = []
    if langs:
        out += _language_columns(rows, segments, langs, config.text_sample)
    if emb:
        out += _embedding_columns(rows, nulls, segments, emb, config, skipped)
    return out


#: language signal → the texts it identifies
_LANGUAGE_TEXTS: dict[str, tuple[str, ...]] = {
    "prompt_language": ("input_text",),
    "output_language": ("output_text",),
    "language_mismatch": ("input_text", "output_text"),
}


def _columns(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("DESCRIBE s").fetchall()}


def _language_columns(
    rows: dict[tuple[int | None, int], list[tuple[int, dict[str, str | None]]]],
    segments: Segments,
    names: Sequence[str],
    k: int,
) -> list[ColumnWindow]:
    # every distinct sampled text identified once, all in one batch
    distinct = list(
        dict.fromkeys(
            t
            for items in rows.values()
            for rn, texts in items
            if rn <= k
            for c in ("input_text", "output_text")
            if (t := texts.get(c)) is not None
        )
    )
    memo = dict(zip(distinct, detect_languages([t[:2000] for t in distinct]), strict=True))

    def lang(text: str | None) -> LanguageGuess | None:
        return None if text is None else memo[text]

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
    rows: Rows,
    nulls: Nulls,
    segments: Segments,
    names: Sequence[str],
    config: ExtractConfig,
    skipped: dict[str, str],
) -> list[ColumnWindow]:
    """One embedding window per signal in ``names`` (keys of :data:`EMBEDDING_TESTS`) × segment.

    Each window × segment embeds the first ``config.embedding_sample`` calls of the salted
    order whose text (prompt or answer, by signal) is not NULL; texts shared by prompts and
    answers or by segments are embedded once.
    """
    from drift.embeddings import load_embedder

    try:
        embedder = load_embedder(max_seq_length=config.embedding_max_seq)
    except EmbeddingModelUnavailableError as exc:
        for n in names:
            skipped[n] = str(exc)
        return []
    texts: dict[tuple[tuple[int | None, int], str], list[str]] = {}
    for key, items in rows.items():
        ordered = [t for _, t in sorted(items, key=lambda it: it[0])]
        for col in dict.fromkeys(EMBEDDING_TESTS[n][0] for n in names):
            kept = [text for t in ordered if (text := t.get(col)) is not None]
            texts[(key, col)] = kept[: config.embedding_sample]
    unique = list(dict.fromkeys(t for group in texts.values() for t in group))
    vectors = dict(zip(unique, embedder.embed(unique), strict=True)) if unique else {}
    width = embedder.dim

    def matrix(seg_id: int | None, win: int, col: str) -> np.ndarray:
        group = texts.get(((seg_id, win), col), [])
        if not group:
            return np.zeros((0, width))
        return np.vstack([vectors[t] for t in group]).astype(np.float64)

    out: list[ColumnWindow] = []
    for seg_id, (label, _) in segments.items():
        for n in names:
            col, method = EMBEDDING_TESTS[n]
            out.append(
                ColumnWindow(
                    n,
                    "embedding",
                    label,
                    reference=matrix(seg_id, 0, col),
                    current=matrix(seg_id, 1, col),
                    reference_nulls=nulls.get((seg_id, 0), {}).get(col, 0),
                    current_nulls=nulls.get((seg_id, 1), {}).get(col, 0),
                    method=method,
                )
            )
    return out
