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

Signals (:data:`SIGNALS`, one entry each in the registry :mod:`collector.lake.driftsignals`,
which also says how each is extracted; the per-call table: :mod:`drift.percall`; segments:
:mod:`drift.segments`): token counts and latencies (numbers); finish_reason mix; refusal,
empty output, guardrail hits and thumbs-down (proportions); judge score (numbers, when the judges
subsystem stores scores); prompt / output language and language mismatch (sampled); prompt
and answer embeddings (sampled, classifier two-sample test and centroid distance; a call
without captured text is not in that text's sample). Segments: the
combinations of ``model``, ``variant`` and ``service`` (``service_name``) of the tenant, the
largest ``max_segments`` of them, plus all traffic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.lake import driftsignals
from collector.lake import query as lake_query
from collector.lake.driftsignals import DriftSignal
from collector.lake.textfeatures import refusal_sql
from drift.callreaders import CallReader, lake_reader
from drift.colwindow import ColumnWindow
from drift.extractcolumns import categorical_columns, numeric_columns, ordered
from drift.percall import per_call_table
from drift.report import Kind
from drift.segments import segment_groups, tested_segments
from drift.signalsources import judge_scores, thumbs_votes
from drift.textsample import FetchTexts, start_sampled_text_columns
from drift.windows import Windows

log = logging.getLogger(__name__)

#: the registry's kinds as the report's (a rate is tested as a two-category mix)
_REPORT_KIND: dict[str, Kind] = {
    "numeric": "numerical",
    "categorical": "categorical",
    "rate": "categorical",
    "embedding": "embedding",
}


class _SignalKinds(Mapping[str, Kind]):
    """Every registered signal (:mod:`collector.lake.driftsignals`, registration order) → its
    kind for the tests; read live, so a signal registered later is known."""

    def __getitem__(self, name: str) -> Kind:
        return _REPORT_KIND[driftsignals.get(name).kind]

    def __iter__(self) -> Iterator[str]:
        return iter(driftsignals.names())

    def __len__(self) -> int:
        return len(driftsignals.names())


#: every signal and its kind for the tests
SIGNALS: Mapping[str, Kind] = _SignalKinds()
EMBEDDING_SIGNALS = driftsignals.names(source="embedded")  # prompt_/answer_ embedding, centroid
SEGMENT_COLUMNS = driftsignals.SEGMENT_COLUMNS
__all__ = ["SIGNALS", "ExtractConfig", "Extraction", "extract", "refusal_sql", "segment_groups"]


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

    signals: tuple[str, ...] = field(default_factory=lambda: tuple(SIGNALS))
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
    chosen = _chosen(config)
    seg_cols = [SEGMENT_COLUMNS[s] for s in config.segment_by]
    names = _call_columns(chosen, seg_cols)
    # the salt of the text samples is drawn whenever a text was read before the features
    # existed, so the run's random stream (and every later draw) is unchanged
    texts_read = any(sig.source in ("feature", "sampled", "embedded") for sig in chosen)
    read = read if read is not None else lake_reader(None)
    spans = [
        (windows.reference_start_ns, windows.reference_end_ns),
        (windows.current_start_ns, windows.current_end_ns),
    ]
    # the store's votes and judge scores are read on a worker thread while the calls are read
    wants_judge = any(sig.source == "judge" or sig.judged for sig in chosen)
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
            if judge is None:
                skipped.update((sig.name, why) for sig in chosen if sig.source == "judge")
        con.register("judge_arrow", judge if judge is not None else _EMPTY_JUDGE)
        salt = int(rng.integers(0, 2**31)) if texts_read else None
        return _build(con, calls, windows, config, chosen, skipped, salt, fetch_texts, defer_texts)
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


def _chosen(config: ExtractConfig) -> list[DriftSignal]:
    """The registered signals named in ``config``, in registration order (the order tested)."""
    wanted = set(config.signals)
    return [sig for sig in driftsignals.signals() if sig.name in wanted]


def _call_columns(chosen: Sequence[DriftSignal], seg_cols: Sequence[str]) -> list[str]:
    """The per-call columns a run of ``chosen`` reads: ids and start, the segment columns, the
    columns of each ``call`` signal, the sealed text features (computed from the answer text
    where not sealed), and a text only when it is embedded (the embedding sample needs every
    call's null; the language sample's texts are read for the sampled calls only)."""
    embedded = {sig.text for sig in chosen if sig.source == "embedded"}
    names = [*driftsignals.ID_COLUMNS, *seg_cols]
    names += [c for sig in chosen if sig.source == "call" for c in sig.reads]
    names += [sig.name for sig in chosen if sig.source == "feature"]
    names += [c for c in driftsignals.TEXT_COLUMNS if c in embedded]
    return list(dict.fromkeys(names))


def _build(
    con: duckdb.DuckDBPyConnection,
    calls: pa.Table,
    windows: Windows,
    config: ExtractConfig,
    chosen: Sequence[DriftSignal],
    skipped: dict[str, str],
    salt: int | None,
    fetch_texts: FetchTexts,
    defer_texts: bool = False,
) -> Extraction:
    """Every column of ``chosen`` per segment from the calls read: the per-call table ``s``
    (:func:`drift.percall.per_call_table`), its segments, then the numeric and categorical
    columns from one sort of ``s`` and the sampled text columns (started first, on a worker
    thread)."""
    ids = calls.select(["trace_id", "span_id", "start_unix_nano"])
    s_table = per_call_table(con, calls, config, chosen, salt)
    con.register("s", s_table)
    segments = tested_segments(con, config, skipped)
    n_ref, n_cur = (int(pc.sum(pc.equal(s_table.column("win"), w)).as_py() or 0) for w in (0, 1))
    per_call = ("call", "feature", "votes", "judge")
    nums = [
        sig.name
        for sig in chosen
        if sig.kind == "numeric" and sig.source in per_call and sig.name not in skipped
    ]
    cats = [
        sig.name for sig in chosen if sig.kind in ("categorical", "rate") and sig.source in per_call
    ]
    # the text sample is drawn now and its texts read on a worker thread meanwhile
    texts = (
        start_sampled_text_columns(con, config, segments, skipped, ids, fetch_texts)
        if salt is not None
        else None
    )
    table = None
    if nums or cats:  # one sort of every call for both
        pi = ["judge_pi"] if any(driftsignals.get(n).source == "judge" for n in nums) else []
        table = ordered(con, list(dict.fromkeys([*nums, *pi, *cats])), ids, s_table)
    columns = numeric_columns(con, nums, segments, table)
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
