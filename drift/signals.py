"""Signal extraction: per window and segment, the columns a drift run tests.

Calls come as one Arrow table from a :data:`drift.callreaders.CallReader`: sealed hours from
the Parquet lake, the unsealed hot tail from the store through ADBC
(:func:`collector.lake.textfeatures.read_windows`; or the sealed part on Spark); every per-call
signal is computed in DuckDB over that Arrow table, and the columns leave DuckDB as numpy arrays
(numbers, NaN = null) or ``GROUP BY`` counts (categories), the representation
:mod:`drift.columnar` tests. Refusal and empty output come as the lake's per-call text features
(sealed with the hour; evaluated from the answer text, with the same DuckDB expressions, where
not sealed), so a run does not scan every answer. Only bounded random samples cross into Python
per text: language identification (whose texts are read for the sampled calls only) and prompt
/ answer embeddings (:mod:`drift.textsample`).

Signals (:data:`SIGNALS`): token counts and latencies (numbers); finish_reason mix; refusal,
empty output, guardrail hits and thumbs-down (proportions); judge score (numbers, when the judges
subsystem stores scores); prompt / output language and language mismatch (sampled); prompt
and answer embeddings (sampled, classifier two-sample test and centroid distance; a call
without captured text is not in that text's sample). Segments: the
combinations of ``model``, ``variant`` and ``service`` (``service_name``) of the tenant, the
largest ``max_segments`` of them, plus all traffic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.lake import query as lake_query
from collector.lake.textfeatures import FEATURE_COLUMNS, refusal_sql
from drift.callreaders import CallReader, lake_reader
from drift.colwindow import ColumnWindow
from drift.extractcolumns import categorical_columns, numeric_columns, ordered
from drift.report import Kind
from drift.signalsources import judge_scores, thumbs_votes
from drift.textsample import EMBEDDING_TESTS, FetchTexts, start_sampled_text_columns
from drift.windows import Windows

log = logging.getLogger(__name__)

NUMERIC_SIGNALS = ("input_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s")
PROPORTION_SIGNALS = ("refusal", "empty_output", "guardrail_hit", "thumbs_down")
SAMPLED_SIGNALS = ("prompt_language", "output_language", "language_mismatch")
EMBEDDING_SIGNALS = tuple(EMBEDDING_TESTS)  # prompt_/answer_ embedding and centroid
#: every signal and its kind for the tests
SIGNALS: dict[str, Kind] = {
    **dict.fromkeys(NUMERIC_SIGNALS, "numerical"),
    "finish_reason": "categorical",
    **dict.fromkeys(PROPORTION_SIGNALS, "categorical"),
    "judge_score": "numerical",
    **dict.fromkeys(SAMPLED_SIGNALS, "categorical"),
    **dict.fromkeys(EMBEDDING_SIGNALS, "embedding"),
}
SEGMENT_COLUMNS = {"model": "model", "variant": "variant", "service": "service_name"}
__all__ = ["SIGNALS", "ExtractConfig", "Extraction", "extract", "refusal_sql"]


@dataclass(frozen=True, slots=True)
class ExtractConfig:
    """What to extract.

    Attributes:
        signals: names from :data:`SIGNALS`.
        segment_by: dimensions of a segment, from ``model``, ``variant``, ``service``.
        max_segments: the largest segments (by calls in both windows) that are tested; the
            others still count in all traffic.
        include_all: also test all traffic of the tenant (segment ``None``) when there is more
            than one segment.
        text_sample: calls per window × segment whose texts get language identification.
        embedding_sample: prompts, and answers, per window × segment that are embedded (each
            text its own sample of the calls that captured it; 2 CPU cores embed about 100
            short texts per second with all-MiniLM-L6-v2 at 128 tokens).
        embedding_max_seq: tokens kept per prompt or answer for the embedding (1..256).
    """

    signals: tuple[str, ...] = tuple(SIGNALS)
    segment_by: tuple[str, ...] = ("model", "variant", "service")
    max_segments: int = 20
    include_all: bool = True
    text_sample: int = 200
    embedding_sample: int = 128
    embedding_max_seq: int = 128

    def __post_init__(self) -> None:
        unknown = [s for s in self.signals if s not in SIGNALS]
        if unknown:
            raise ValueError(f"signals: unknown {unknown}; known: {list(SIGNALS)}")
        bad = [s for s in self.segment_by if s not in SEGMENT_COLUMNS]
        if bad:
            raise ValueError(f"segment_by: unknown {bad}; known: {list(SEGMENT_COLUMNS)}")
        for name in ("max_segments", "text_sample", "embedding_sample"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if not 1 <= self.embedding_max_seq <= 256:
            raise ValueError(f"embedding_max_seq must be in 1..256, got {self.embedding_max_seq}")


@dataclass(frozen=True, slots=True)
class Extraction:
    """The extracted columns of one run.

    Attributes:
        columns: one :class:`ColumnWindow` per signal × segment (segment label ``None`` = all
            traffic).
        segment_keys: segment label → ``{"model": ..., "variant": ..., "service": ...}``
            (``{}`` for all traffic; ``None`` values where the call did not say).
        n_reference_calls, n_current_calls: calls read per window (all segments).
        skipped: signal (or ``"segments"``) → why it was not tested.
        pending: with ``extract(..., defer_texts=True)``, the sampled text columns (languages,
            embeddings) still being built: a function that waits for them and returns them
            (they follow ``columns``; it may add to ``skipped``, and raises what their read or
            identification raised); None otherwise (``columns`` holds every column).
    """

    columns: tuple[ColumnWindow, ...]
    segment_keys: dict[str | None, dict[str, str | None]]
    n_reference_calls: int
    n_current_calls: int
    skipped: dict[str, str] = field(default_factory=dict)
    pending: Callable[[], list[ColumnWindow]] | None = None


def _segment_label(keys: dict[str, str | None]) -> str:
    return ",".join(f"{k}={'(none)' if v is None else v}" for k, v in keys.items())


def extract(
    database_url: str,
    tenant: str,
    windows: Windows,
    config: ExtractConfig,
    *,
    rng: np.random.Generator,
    read: CallReader | None = None,
    defer_texts: bool = False,
) -> Extraction:
    """Read the tenant's calls of both windows and build every configured column.

    Args:
        database_url: SQLAlchemy URL of the store (SQLite or PostgreSQL).
        tenant: whose calls.
        windows: reference and current windows.
        config: signals, segments and sample sizes.
        rng: draws the text samples (languages, embeddings) and the embedding tests' splits.
        read: reads the calls (:mod:`drift.callreaders`; default: the store alone). Feedback
            and judge results are always read from the store.
        defer_texts: return without waiting for the sampled text columns: they come from
            :attr:`Extraction.pending` (a caller can test the other columns meanwhile).

    Returns:
        :class:`Extraction`. Units: tokens (counts), seconds (latencies), judge score in the
        judge's scale; proportions are booleans.

    Raises:
        ValueError: bad ``database_url``.
    """
    wanted = set(config.signals)
    seg_cols = [SEGMENT_COLUMNS[s] for s in config.segment_by]
    names = [
        "trace_id",
        "span_id",
        "start_unix_nano",
        *seg_cols,
        *[s for s in NUMERIC_SIGNALS if s in wanted],
        "finish_reason",
        "redactions",
    ]
    embedded = {EMBEDDING_TESTS[s][0] for s in wanted & set(EMBEDDING_SIGNALS)}
    # refusal / empty output come as the lake's per-call text features (sealed with the hour,
    # computed from the answer text where not sealed); texts are read in full only when
    # embedded (the embedding sample needs every call's null); the language sample's texts
    # are read for the sampled calls only
    names += [n for n in FEATURE_COLUMNS if n in wanted]
    names += [c for c in ("output_text", "input_text") if c in embedded]
    # the salt of the text samples is drawn whenever a text was read before the features
    # existed, so the run's random stream (and every later draw) is unchanged
    texts_read = bool(wanted & {*PROPORTION_SIGNALS[:2], *SAMPLED_SIGNALS}) or bool(embedded)
    read = read if read is not None else lake_reader(None)
    spans = [
        (windows.reference_start_ns, windows.reference_end_ns),
        (windows.current_start_ns, windows.current_end_ns),
    ]
    # the store's votes and judge scores are read on a worker thread while the calls are read
    wants_judge = "judge_score" in wanted or "refusal" in wanted
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drift-votes")
    try:
        votes_read = worker.submit(thumbs_votes, database_url, tenant, windows.reference_start_ns)
        judge_read = (
            worker.submit(judge_scores, database_url, tenant, windows.reference_start_ns)
            if wants_judge
            else None
        )
    finally:
        worker.shutdown(wait=False)  # the thread ends with the reads
    calls = read.calls(database_url, tenant, spans, list(dict.fromkeys(names)))

    def fetch_texts(keys: pa.Table, columns: Sequence[str]) -> pa.Table:
        return read.texts(database_url, tenant, spans, keys, columns)

    skipped: dict[str, str] = {}
    con = lake_query.cursor()  # a connection to the process's open database (a new one: ~40 ms)
    try:
        con.register("votes_arrow", votes_read.result())
        judge = None
        if judge_read is not None:
            judge, why = judge_read.result()
            if judge is None and "judge_score" in wanted:
                skipped["judge_score"] = why
        con.register("judge_arrow", judge if judge is not None else _EMPTY_JUDGE)
        salt = int(rng.integers(0, 2**31)) if texts_read else None
        return _build(
            con, calls, windows, config, seg_cols, skipped, salt, fetch_texts, defer_texts
        )
    finally:
        con.close()


_EMPTY_JUDGE = pa.table(
    {
        "trace_id": pa.array([], pa.string()),
        "span_id": pa.array([], pa.string()),
        "score": pa.array([], pa.float64()),
        "refusal": pa.array([], pa.bool_()),
        "pi": pa.array([], pa.float64()),
    }
)


def segment_groups(calls: pa.Table, seg_cols: Sequence[str]) -> tuple[pa.Table, np.ndarray]:
    """The distinct combinations of ``seg_cols`` among ``calls`` and each call's combination.

    Returns ``(groups, row_group)``: ``groups`` has ``seg_cols`` (their values, NULL kept as
    a value of its own, as ``GROUP BY`` keeps it), ``n`` (int64, calls with that combination)
    and ``_u`` (int64, the row's own index); ``row_group`` (int64, shape (calls.num_rows,)) is
    each call's row in ``groups``. The same groups as ``GROUP BY seg_cols`` (values compared
    byte for byte, as DuckDB compares them), from Arrow dictionary codes.
    """
    codes = np.zeros(calls.num_rows, dtype=np.int64)
    dicts: list[tuple[pa.Array, int]] = []
    radix = 1
    for c in seg_cols:
        enc = pc.dictionary_encode(calls.column(c)).combine_chunks()
        k = len(enc.dictionary)
        idx = np.asarray(enc.indices.fill_null(k).to_numpy(zero_copy_only=False), dtype=np.int64)
        codes = codes * (k + 1) + idx  # null is code k
        dicts.append((enc.dictionary, k))
        radix *= k + 1
    if radix <= 4 * calls.num_rows + 1024:
        counts = np.bincount(codes, minlength=radix)
        present = np.flatnonzero(counts)
        lut = np.zeros(radix, dtype=np.int64)
        lut[present] = np.arange(present.size, dtype=np.int64)
        row_group, n = lut[codes], counts[present]
    else:  # many combinations: sort the codes
        present, row_group, n = np.unique(codes, return_inverse=True, return_counts=True)
        row_group = row_group.reshape(-1)
    cols: dict[str, pa.Array] = {}
    rest = present.astype(np.int64)
    for c, (dictionary, k) in reversed(list(zip(seg_cols, dicts, strict=True))):
        idx = rest % (k + 1)
        rest = rest // (k + 1)
        cols[c] = dictionary.take(pa.array(idx, mask=idx == k))
    table = {c: cols[c] for c in seg_cols}
    return (
        pa.table(
            {
                **table,
                "n": pa.array(n.astype(np.int64)),
                "_u": pa.array(np.arange(present.size, dtype=np.int64)),
            }
        ),
        row_group.astype(np.int64),
    )


def _build(
    con: duckdb.DuckDBPyConnection,
    calls: pa.Table,
    windows: Windows,
    config: ExtractConfig,
    seg_cols: list[str],
    skipped: dict[str, str],
    salt: int | None,
    fetch_texts: FetchTexts,
    defer_texts: bool = False,
) -> Extraction:
    wanted = set(config.signals)
    have = set(calls.column_names)
    numeric = [s for s in NUMERIC_SIGNALS if s in wanted]
    refusal = "c.refusal" if "refusal" in have else "NULL"
    # the vote and judge joins only when there is something to join (same columns either way)
    n_judge = con.execute("SELECT count(*) FROM judge_arrow").fetchall()[0][0]
    judge = (
        f"coalesce(j.refusal, {refusal}) AS refusal, "
        if n_judge
        else f"CAST({refusal} AS BOOLEAN) AS refusal, "
    )
    ids = calls.select(["trace_id", "span_id", "start_unix_nano"])
    # the text sample's salted hash of each call's ids (``_i`` finds the ids of sampled rows):
    # ``hash(trace_id || ':' || span_id || ':' || salt)``, the string built by one concat
    # (half the work of the chain of ``||``; the same string, NULL when an id is NULL)
    h = (
        ", hash(CASE WHEN c.trace_id IS NULL OR c.span_id IS NULL THEN NULL ELSE "
        f"concat(c.trace_id, ':', c.span_id, ':', {int(salt)}) END) AS h"
        if salt is not None
        else ""
    )
    con.execute(
        "CREATE TEMP TABLE votes AS SELECT trace_id, span_id, "
        "bool_or(kind = 'thumbs_down') AS down FROM (SELECT *, row_number() OVER ("
        "PARTITION BY trace_id, coalesce(span_id, ''), coalesce(user_id, feedback_id) "
        "ORDER BY timestamp_unix_nano DESC) AS rn FROM votes_arrow) WHERE rn = 1 "
        "GROUP BY trace_id, span_id"
    )
    # votes on whole traces (vt) and on spans (vs): each join only when there are such votes
    # (thumbs_down is the OR of both, NULL without either: one alone is its own value)
    n_trace, n_span = con.execute(
        "SELECT count(*) FILTER (span_id IS NULL), count(*) FILTER (span_id IS NOT NULL) FROM votes"
    ).fetchall()[0]
    thumbs = {
        (True, True): "CASE WHEN vt.down IS NULL AND vs.down IS NULL THEN NULL "
        "ELSE coalesce(vt.down, FALSE) OR coalesce(vs.down, FALSE) END",
        (True, False): "vt.down",
        (False, True): "vs.down",
        (False, False): "NULL::BOOLEAN",
    }[(n_trace > 0, n_span > 0)]
    # ``_i``: each call's row in ``calls``; its ids stay there (read only for the few
    # rows that need them: the text sample's keys, tied start times). ``_seg``: each call's
    # segment (-1 beyond ``max_segments``), from the segments' codes, not a join on their text
    calls_arrow = calls.append_column("_i", pa.array(np.arange(calls.num_rows, dtype=np.int64)))
    order_seg = "".join(f", {c} NULLS FIRST" for c in seg_cols)
    by_codes = bool(seg_cols) and all(
        pa.types.is_string(calls.schema.field(c).type)
        or pa.types.is_large_string(calls.schema.field(c).type)
        for c in seg_cols
    )
    if by_codes:
        groups, row_group = segment_groups(calls, seg_cols)
        con.register("seg_groups", groups)
        con.execute(
            f"CREATE TEMP TABLE seg AS SELECT *, row_number() OVER (ORDER BY n DESC{order_seg}) "
            "- 1 AS seg_id FROM seg_groups"
        )
        got = con.execute("SELECT _u, seg_id FROM seg").fetchnumpy()
        lut = np.full(groups.num_rows, -1, dtype=np.int64)
        sid = np.asarray(got["seg_id"], dtype=np.int64)
        lut[np.asarray(got["_u"], dtype=np.int64)] = np.where(sid < config.max_segments, sid, -1)
        calls_arrow = calls_arrow.append_column("_seg", pa.array(lut[row_group]))
        seg_expr, join_seg = "c._seg", ""
    con.register("calls_arrow", calls_arrow)
    if not by_codes:  # no segments (one row: all traffic), or segment columns not text
        con.execute(
            f"CREATE TEMP TABLE seg AS SELECT *, row_number() OVER (ORDER BY n DESC{order_seg}) "
            "- 1 AS seg_id FROM (SELECT "
            + (", ".join(f"c.{c}" for c in seg_cols) + ", " if seg_cols else "")
            + "count(*) AS n FROM calls_arrow c"
            + (" GROUP BY " + ", ".join(f"c.{c}" for c in seg_cols) if seg_cols else "")
            + ")"
        )
        seg_expr = f"CASE WHEN g.seg_id < {config.max_segments} THEN g.seg_id ELSE -1 END"
        join_seg = " JOIN seg g ON " + (
            " AND ".join(f"c.{c} IS NOT DISTINCT FROM g.{c}" for c in seg_cols) or "TRUE"
        )
    # ``s`` stays an Arrow table (registered under that name for the samples' SQL): copying
    # the run's calls into a DuckDB table and reading them back out cost more than the joins
    s_table = con.sql(
        f"SELECT c.win, c.start_unix_nano AS t, {seg_expr} AS seg_id, "
        + "".join(f"CAST(c.{n} AS DOUBLE) AS {n}, " for n in numeric)
        + "c.finish_reason, "
        + judge
        + ("c.empty_output, " if "empty_output" in have else "NULL::BOOLEAN AS empty_output, ")
        + "CASE WHEN c.finish_reason = 'content_filter' OR c.redactions > 0 THEN TRUE "
        "WHEN c.finish_reason IS NULL AND c.redactions IS NULL THEN NULL ELSE FALSE END "
        "AS guardrail_hit, "
        + thumbs
        + " AS thumbs_down, "
        + (
            "j.score AS judge_score, j.pi AS judge_pi"
            if n_judge
            else "NULL::DOUBLE AS judge_score, NULL::DOUBLE AS judge_pi"
        )
        + ", c._i"
        + h
        + "".join(f", c.{t}" for t in ("output_text", "input_text") if t in have)
        + " FROM calls_arrow c"
        + join_seg
        # votes on the whole trace and on this span: two equality hash joins, one row each
        + (
            " LEFT JOIN (SELECT trace_id, bool_or(down) AS down FROM votes"
            " WHERE span_id IS NULL GROUP BY trace_id) vt ON vt.trace_id = c.trace_id"
            if n_trace
            else ""
        )
        + (
            " LEFT JOIN (SELECT trace_id, span_id, bool_or(down) AS down FROM votes"
            " WHERE span_id IS NOT NULL GROUP BY trace_id, span_id) vs"
            " ON vs.trace_id = c.trace_id AND vs.span_id = c.span_id"
            if n_span
            else ""
        )
        + (
            " LEFT JOIN (SELECT trace_id, span_id, avg(score) AS score,"
            " bool_or(refusal) AS refusal, avg(pi) FILTER (WHERE score IS NOT NULL) AS pi"
            " FROM judge_arrow GROUP BY trace_id, span_id) j"
            " ON j.trace_id = c.trace_id AND j.span_id = c.span_id"
            if n_judge
            else ""
        )
    ).to_arrow_table()
    con.register("s", s_table)
    seg_rows = con.execute(
        f"SELECT seg_id, {', '.join(seg_cols) or 'NULL'} FROM seg "
        f"WHERE seg_id < {config.max_segments} ORDER BY seg_id"
    ).fetchall()
    n_segments = con.execute("SELECT count(*) FROM seg").fetchall()[0][0]
    if n_segments > config.max_segments:
        skipped["segments"] = (
            f"{n_segments - config.max_segments} smaller segments tested only in all traffic"
        )
    segments: dict[int | None, tuple[str | None, dict[str, str | None]]] = {}
    for row in seg_rows:
        keys = {d: row[1 + i] for i, d in enumerate(config.segment_by)}
        segments[row[0]] = (_segment_label(keys), keys)
    if config.include_all and (len(segments) != 1 or not seg_cols):
        segments[None] = (None, {})
    if not seg_cols:
        segments = {None: (None, {})}
    n_ref, n_cur = (int(pc.sum(pc.equal(s_table.column("win"), w)).as_py() or 0) for w in (0, 1))
    columns: list[ColumnWindow] = []
    nums = (
        [*numeric, "judge_score"]
        if "judge_score" in wanted and "judge_score" not in skipped
        else numeric
    )
    cats = [s for s in ("finish_reason", *PROPORTION_SIGNALS) if s in wanted]
    # the text sample is drawn now and its texts read on a worker thread meanwhile
    texts = (
        start_sampled_text_columns(con, config, segments, skipped, ids, fetch_texts)
        if salt is not None
        else None
    )
    table = None
    if nums or cats:  # one sort of every call for both
        pi = ["judge_pi"] if "judge_score" in nums else []
        table = ordered(con, list(dict.fromkeys([*nums, *pi, *cats])), ids, s_table)
    columns += numeric_columns(con, nums, segments, table)
    columns += categorical_columns(con, cats, segments, windows.current_start_ns, table)
    if texts is not None and not defer_texts:
        columns += texts()
    return Extraction(
        columns=tuple(columns),
        segment_keys={label: keys for label, keys in segments.values()},
        n_reference_calls=int(n_ref),
        n_current_calls=int(n_cur),
        skipped=skipped,
        pending=texts if defer_texts else None,
    )
