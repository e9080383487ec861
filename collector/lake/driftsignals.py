"""The drift-signal registry: every signal a drift run tests, one entry each.

An entry (:class:`DriftSignal`) says everything each read path needs:

* its **kind** — ``numeric`` (a per-call number: tokens, seconds, a judge score), ``categorical``
  (a mix of labels), ``rate`` (a per-call boolean: a proportion, tested as a rate) or
  ``embedding`` (a sampled text, embedded);
* its **test** — the two-sample test a run applies (:mod:`drift.columnar` picks it by kind and
  sample size; the name here documents it, and the embedding signals' method is read from it);
* its **extraction** — where the per-call value comes from (``source``):

  - ``call``: a DuckDB expression (:attr:`DriftSignal.sql`) over one row ``c`` of the calls a
    run reads, using the ``llm_calls`` columns in :attr:`DriftSignal.reads`. The store path and
    the lake path read those columns (:func:`drift_columns`), the Spark path
    (:func:`collector.lake.spark.numeric_signal`) reads a plain-column numeric signal's column;
  - ``feature``: a per-call text feature sealed with the hour (:mod:`collector.lake.textfeatures`;
    the entry's :attr:`DriftSignal.feature` builds its DuckDB expression over the answer text);
  - ``votes``, ``judge``: joined by the run from the store's feedback and judge results;
  - ``sampled``: language identification of a bounded sample of texts;
  - ``embedded``: a bounded sample of :attr:`DriftSignal.text` embedded.

Adding a per-call signal is one :func:`register` call (or one entry in :data:`BUILTIN`); the store
path, the lake path and Spark all read it from here. Signals are listed in registration order,
which is the order a run tests (and reports) them.

This module lives in the lake (below ``drift``) because the lake and Spark read it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from collector.store.schema import CALL_COLUMNS

SignalKind = Literal["numeric", "categorical", "rate", "embedding"]
Source = Literal["call", "feature", "votes", "judge", "sampled", "embedded"]
_KINDS = ("numeric", "categorical", "rate", "embedding")
_SOURCES = ("call", "feature", "votes", "judge", "sampled", "embedded")

#: the columns every drift read carries besides the signals' own: the call's ids and start
ID_COLUMNS: tuple[str, ...] = ("trace_id", "span_id", "start_unix_nano")
#: segment dimension → its ``llm_calls`` column
SEGMENT_COLUMNS: dict[str, str] = {
    "model": "model",
    "variant": "variant",
    "service": "service_name",
}
#: captured texts a run may read (embedding samples; the refusal / empty features' source)
TEXT_COLUMNS: tuple[str, ...] = ("output_text", "input_text")
#: the per-call table's own columns (:mod:`drift.percall`), which no signal may be named
RESERVED_NAMES = frozenset({"win", "t", "seg_id", "h", "judge_pi", *TEXT_COLUMNS})


@dataclass(frozen=True, slots=True)
class DriftSignal:
    """One drift signal.

    Attributes:
        name: the signal's name in runs, results and the API (``[a-z][a-z0-9_]*``).
        kind: ``numeric`` | ``categorical`` | ``rate`` | ``embedding``.
        test: the test a run applies: ``block_rank`` (numeric, time-ordered; ``hajek_mean``
            when weighted), ``rate`` (a proportion; over longer windows when rare),
            ``categorical_rate`` (a label mix), ``classifier_auc`` or ``mean_embedding_distance``
            (embeddings).
        source: where the per-call value comes from (module docstring).
        reads: ``llm_calls`` columns the extraction reads per call (``call`` signals).
        sql: ``call`` signals: DuckDB expression over the call row ``c`` giving the value
            (NULL = unknown), e.g. ``"c.ttft_s"``.
        feature: ``feature`` signals: ``text column -> DuckDB expression`` (NULL text: NULL).
        text: ``embedded`` signals: the captured text column embedded.
        judged: a judge verdict of the same name (the judges' ``refusal`` rubric) overrides
            the per-call value where the call was judged.
    """

    name: str
    kind: SignalKind
    test: str
    source: Source = "call"
    reads: tuple[str, ...] = ()
    sql: str | None = None
    feature: Callable[[str], str] | None = None
    text: str | None = None
    judged: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.islower() or self.name[0] == "_":
            raise ValueError(f"name: {self.name!r} is not a lower-case identifier")
        if self.name in RESERVED_NAMES:
            raise ValueError(f"name: {self.name!r} is a column of the run's per-call table")
        if self.kind not in _KINDS:
            raise ValueError(f"kind: {self.kind!r} not in {_KINDS}")
        if self.source not in _SOURCES:
            raise ValueError(f"source: {self.source!r} not in {_SOURCES}")
        if self.source == "call" and (self.sql is None or not self.reads):
            raise ValueError(f"{self.name}: a call signal needs sql and reads")
        if self.source == "feature" and self.feature is None:
            raise ValueError(f"{self.name}: a feature signal needs feature")
        embedded = self.kind == "embedding" and self.text in TEXT_COLUMNS
        if self.source == "embedded" and not embedded:
            raise ValueError(f"{self.name}: an embedded signal needs kind embedding and text")

    @property
    def column(self) -> str | None:
        """The ``llm_calls`` column a ``call`` signal is, when it is one plain column (the
        expression ``c.<column>``), else None."""
        if self.source == "call" and len(self.reads) == 1 and self.sql == f"c.{self.reads[0]}":
            return self.reads[0]
        return None


def _column(name: str, test: str = "block_rank") -> DriftSignal:
    return DriftSignal(name, "numeric", test, reads=(name,), sql=f"c.{name}")


#: a guardrail fired: the provider's content filter stopped the answer, or the collector
#: redacted the captured content; unknown when neither is known
GUARDRAIL_SQL = (
    "CASE WHEN c.finish_reason = 'content_filter' OR c.redactions > 0 THEN TRUE "
    "WHEN c.finish_reason IS NULL AND c.redactions IS NULL THEN NULL ELSE FALSE END"
)


def _builtin() -> tuple[DriftSignal, ...]:
    from collector.lake.textrules import empty_output_sql, refusal_sql

    return (
        *(_column(n) for n in ("input_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s")),
        DriftSignal(
            "finish_reason",
            "categorical",
            "categorical_rate",
            reads=("finish_reason",),
            sql="c.finish_reason",
        ),
        DriftSignal("refusal", "rate", "rate", source="feature", feature=refusal_sql, judged=True),
        DriftSignal("empty_output", "rate", "rate", source="feature", feature=empty_output_sql),
        DriftSignal(
            "guardrail_hit",
            "rate",
            "rate",
            reads=("finish_reason", "redactions"),
            sql=GUARDRAIL_SQL,
        ),
        DriftSignal("thumbs_down", "rate", "rate", source="votes"),
        DriftSignal("judge_score", "numeric", "hajek_mean", source="judge"),
        DriftSignal("prompt_language", "categorical", "categorical_rate", source="sampled"),
        DriftSignal("output_language", "categorical", "categorical_rate", source="sampled"),
        DriftSignal("language_mismatch", "rate", "rate", source="sampled"),
        DriftSignal(
            "prompt_embedding", "embedding", "classifier_auc", source="embedded", text="input_text"
        ),
        DriftSignal(
            "prompt_centroid",
            "embedding",
            "mean_embedding_distance",
            source="embedded",
            text="input_text",
        ),
        DriftSignal(
            "answer_embedding", "embedding", "classifier_auc", source="embedded", text="output_text"
        ),
        DriftSignal(
            "answer_centroid",
            "embedding",
            "mean_embedding_distance",
            source="embedded",
            text="output_text",
        ),
    )


_REGISTRY: dict[str, DriftSignal] = {}
_LOCK = threading.Lock()
_FROZEN_FEATURES = False  # set once the built-in entries are in (end of this module)


def register(signal: DriftSignal) -> DriftSignal:
    """Add ``signal`` (tested after those registered before it) and return it.

    Raises:
        ValueError: a signal of that name is registered already, it reads a column that is
            not an ``llm_calls`` column, or a ``feature`` signal is registered after import
            (the sealed files' feature columns and their digest are fixed when the lake's
            layout is imported).
    """
    unknown = [c for c in signal.reads if c not in CALL_COLUMNS or c == "tenant"]
    if unknown:
        raise ValueError(f"{signal.name}: reads {unknown}, not llm_calls columns")
    if signal.source == "feature" and _FROZEN_FEATURES:
        raise ValueError(f"{signal.name}: feature signals are fixed at import (lake layout)")
    with _LOCK:
        if signal.name in _REGISTRY:
            raise ValueError(f"signal {signal.name!r} is registered already")
        _REGISTRY[signal.name] = signal
    return signal


def unregister(name: str) -> None:
    """Remove the signal ``name`` (a test's own signal; unknown names are ignored)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def get(name: str) -> DriftSignal:
    """The registered signal ``name``.

    Raises:
        KeyError: no such signal.
    """
    return _REGISTRY[name]


def signals(
    *, kind: SignalKind | None = None, source: Source | None = None
) -> tuple[DriftSignal, ...]:
    """The registered signals (registration order), optionally of one ``kind`` / ``source``."""
    every = tuple(_REGISTRY.values())  # one snapshot: a registration meanwhile is not seen
    return tuple(
        s
        for s in every
        if (kind is None or s.kind == kind) and (source is None or s.source == source)
    )


def names(*, kind: SignalKind | None = None, source: Source | None = None) -> tuple[str, ...]:
    """Names of :func:`signals`."""
    return tuple(s.name for s in signals(kind=kind, source=source))


def drift_columns() -> tuple[str, ...]:
    """Every ``llm_calls`` column a drift run may read per call: the ids and start, the
    segment columns, the columns of every registered ``call`` signal, the captured texts."""
    reads = [c for s in signals(source="call") for c in s.reads]
    return tuple(dict.fromkeys([*ID_COLUMNS, *SEGMENT_COLUMNS.values(), *reads, *TEXT_COLUMNS]))


for _s in _builtin():
    register(_s)
#: the ``feature`` signals: sealed as boolean columns of the lake's ``calls`` files
FEATURE_SIGNALS: tuple[str, ...] = names(source="feature")
_FROZEN_FEATURES = True
