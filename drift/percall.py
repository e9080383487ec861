"""The per-call table of a drift run: one row per call, one column per per-call signal.

Each registered signal (:mod:`collector.lake.driftsignals`) says how its per-call value is made:
a ``call`` signal's DuckDB expression over the call's columns, a sealed text feature (the
judges' verdict first where the signal is ``judged``), the latest thumbs vote per user joined
from the store's feedback. The judge score and its inclusion probability are joined from the
judge results. :func:`drift.signals.extract` builds the table once and every column is cut from
it (:mod:`drift.extractcolumns`, :mod:`drift.textsample`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from collector.lake import driftsignals
from collector.lake.driftsignals import SEGMENT_COLUMNS, DriftSignal
from drift.segments import assign_segments

if TYPE_CHECKING:
    from drift.signals import ExtractConfig


def _votes(con: duckdb.DuckDBPyConnection) -> tuple[str, str]:
    """Each call's thumbs-down from ``votes_arrow`` (the latest vote per user and target):
    ``(expression, joins)``. Votes on whole traces (``vt``) and on spans (``vs``) are joined
    only when there are such votes; thumbs-down is the OR of both, NULL without either (one
    alone is its own value)."""
    con.execute(
        "CREATE TEMP TABLE votes AS SELECT trace_id, span_id, "
        "bool_or(kind = 'thumbs_down') AS down FROM (SELECT *, row_number() OVER ("
        "PARTITION BY trace_id, coalesce(span_id, ''), coalesce(user_id, feedback_id) "
        "ORDER BY timestamp_unix_nano DESC) AS rn FROM votes_arrow) WHERE rn = 1 "
        "GROUP BY trace_id, span_id"
    )
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
    # two equality hash joins, one row each
    joins = (
        " LEFT JOIN (SELECT trace_id, bool_or(down) AS down FROM votes"
        " WHERE span_id IS NULL GROUP BY trace_id) vt ON vt.trace_id = c.trace_id"
        if n_trace
        else ""
    ) + (
        " LEFT JOIN (SELECT trace_id, span_id, bool_or(down) AS down FROM votes"
        " WHERE span_id IS NOT NULL GROUP BY trace_id, span_id) vs"
        " ON vs.trace_id = c.trace_id AND vs.span_id = c.span_id"
        if n_span
        else ""
    )
    return thumbs, joins


#: the judge results per call: mean score, any refusal verdict, mean π of the scored results
_JUDGE_JOIN = (
    " LEFT JOIN (SELECT trace_id, span_id, avg(score) AS score,"
    " bool_or(refusal) AS refusal, avg(pi) FILTER (WHERE score IS NOT NULL) AS pi"
    " FROM judge_arrow GROUP BY trace_id, span_id) j"
    " ON j.trace_id = c.trace_id AND j.span_id = c.span_id"
)


def _signal_values(
    chosen: Sequence[DriftSignal], have: set[str], judged: bool, thumbs: str
) -> list[str]:
    """The SELECT items of the per-call signals of ``chosen`` (registry order): a ``call``
    signal's expression (numbers as DOUBLE), a text feature as read (NULL where the calls
    lack it; a judge verdict first where the signal is ``judged`` and calls were judged), the
    votes' thumbs-down. Judge scores and sampled texts are not per-call columns here."""
    out = []
    for sig in chosen:
        if sig.source == "call":
            value = f"CAST({sig.sql} AS DOUBLE)" if sig.kind == "numeric" else f"{sig.sql}"
        elif sig.source == "feature":
            own = f"c.{sig.name}" if sig.name in have else "NULL"
            value = (
                f"coalesce(j.{sig.name}, {own})"
                if sig.judged and judged
                else f"CAST({own} AS BOOLEAN)"
            )
        elif sig.source == "votes":
            value = thumbs
        else:
            continue
        out.append(f"{value} AS {sig.name}")
    return out


def per_call_table(
    con: duckdb.DuckDBPyConnection,
    calls: pa.Table,
    config: ExtractConfig,
    chosen: Sequence[DriftSignal],
    salt: int | None,
) -> pa.Table:
    """The table ``s``: one row per call with ``win``, ``t`` (start), ``seg_id``, the value of
    every per-call signal of ``chosen``, ``judge_score`` / ``judge_pi``, ``_i`` (the call's row
    in ``calls``), ``h`` (with ``salt``: the text sample's hash) and the texts read.

    It stays an Arrow table (registered under that name for the samples' SQL): copying the
    run's calls into a DuckDB table and reading them back out cost more than the joins.
    """
    have = set(calls.column_names)
    seg_cols = [SEGMENT_COLUMNS[d] for d in config.segment_by]
    seg_expr, joins = assign_segments(con, calls, config, seg_cols)
    # the vote and judge joins only when there is something to join (same columns either way)
    thumbs = "NULL::BOOLEAN"
    if any(sig.source == "votes" for sig in chosen):
        thumbs, vote_joins = _votes(con)
        joins += vote_joins
    n_judge = con.execute("SELECT count(*) FROM judge_arrow").fetchall()[0][0]
    if n_judge:
        joins += _JUDGE_JOIN
    judge = (
        "j.score AS judge_score, j.pi AS judge_pi"
        if n_judge
        else "NULL::DOUBLE AS judge_score, NULL::DOUBLE AS judge_pi"
    )
    # the text sample's salted hash of each call's ids (``_i`` finds the ids of sampled rows):
    # ``hash(trace_id || ':' || span_id || ':' || salt)``, the string built by one concat
    # (half the work of the chain of ``||``; the same string, NULL when an id is NULL)
    h = (
        ", hash(CASE WHEN c.trace_id IS NULL OR c.span_id IS NULL THEN NULL ELSE "
        f"concat(c.trace_id, ':', c.span_id, ':', {int(salt)}) END) AS h"
        if salt is not None
        else ""
    )
    values = "".join(f"{v}, " for v in _signal_values(chosen, have, bool(n_judge), thumbs))
    texts = "".join(f", c.{t}" for t in driftsignals.TEXT_COLUMNS if t in have)
    return con.sql(
        f"SELECT c.win, c.start_unix_nano AS t, {seg_expr} AS seg_id, {values}{judge}, c._i{h}"
        f"{texts} FROM calls_arrow c{joins}"
    ).to_arrow_table()
