"""The stored form of a drift run: its ``drift_runs`` row, its ``drift_results`` rows and the
alert events it emits (:func:`emit_drift_events`, the single call site into alerting).

:func:`drift.runs.run_drift` writes the run row first (:func:`start_run`, ``running``), then
every result and the summary (:func:`finish_ok`) or ``failed`` with the error.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from collector.store import driftqueries
from drift.columnar import ColumnDetail
from drift.report import DriftReport, SignalResult
from drift.windows import Windows

if TYPE_CHECKING:
    from drift.runs import DriftSettings
    from drift.signals import Extraction


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def result_row(
    tenant: str, run_id: str, seq: int, r: SignalResult, d: ColumnDetail, keys: dict[str, Any]
) -> dict[str, Any]:
    """The ``drift_results`` row of result ``r`` (number ``seq`` of run ``run_id``) with its
    detail ``d`` and segment ``keys``; non-finite numbers are stored as NULL."""
    res = r.result
    return {
        "tenant": tenant,
        "run_id": run_id,
        "seq": seq,
        "signal": r.signal,
        "kind": r.kind,
        "segment": r.segment,
        "segment_keys": keys,
        "method": res.method,
        "score_kind": res.score_kind,
        "statistic": _finite(res.statistic),
        "pvalue": _finite(res.pvalue),
        "adjusted_pvalue": _finite(r.adjusted_pvalue),
        "threshold": res.threshold,
        "drifted": res.drifted,
        "unadjusted_drifted": r.unadjusted_drifted,
        "insufficient_data": res.insufficient_data,
        "n_reference": res.n_reference,
        "n_current": res.n_current,
        "n_reference_null": r.n_reference_null,
        "n_current_null": r.n_current_null,
        "effect_size": _finite(d.effect_size),
        "effect_kind": d.effect_kind,
        "psi": _finite(d.psi),
        "reference_summary": d.reference_summary,
        "current_summary": d.current_summary,
        "unseen_categories": list(res.unseen_categories),
        "histogram": d.histogram,
    }


def emit_drift_events(
    engine: Engine,
    tenant: str,
    run_id: str,
    rows: list[dict[str, Any]],
    previously: set[tuple[str, str | None]],
) -> int:
    """The single call site into alerting (:func:`alerts.events.emit_event`).

    One ``drift_detected`` event per drifted result (labels ``signal``, ``segment``; value =
    the effect size, else the statistic), and a ``resolved`` one for each (signal, segment)
    that drifted in the previous run and is now evaluated without drift. Returns the number of
    events emitted.
    """
    from collector.store.events import emit_event

    n = 0
    for row in rows:
        key = (row["signal"], row["segment"])
        if row["drifted"] is True:
            resolved = False
        elif row["drifted"] is False and key in previously:
            resolved = True
        else:
            continue
        value = row["effect_size"] if row["effect_size"] is not None else row["statistic"]
        emit_event(
            engine,
            tenant,
            "drift_detected",
            labels={"signal": row["signal"], "segment": row["segment"] or "all"},
            annotations={
                "run_id": run_id,
                "method": row["method"],
                "effect_kind": row["effect_kind"] or "",
                "summary": f"{row['signal']} drifted ({row['method']}) in "
                f"{row['segment'] or 'all traffic'}",
            },
            value=value,
            resolved=resolved,
        )
        n += 1
    return n


def start_run(
    engine: Engine,
    tenant: str,
    run_id: str,
    trigger: str,
    windows: Windows,
    settings: DriftSettings,
) -> None:
    """Insert run ``run_id`` of ``tenant`` as ``running`` with its windows and settings."""
    with engine.begin() as conn:
        driftqueries.insert_run(
            conn,
            {
                "tenant": tenant,
                "run_id": run_id,
                "trigger": trigger,
                "status": "running",
                "started_at": dt.datetime.now(dt.UTC),
                "reference_kind": windows.reference_kind,
                "reference_label": windows.reference_label,
                "reference_start_unix_nano": windows.reference_start_ns,
                "reference_end_unix_nano": windows.reference_end_ns,
                "current_start_unix_nano": windows.current_start_ns,
                "current_end_unix_nano": windows.current_end_ns,
                "fdr_q": settings.fdr_q,
                "config": settings.model_dump(mode="json"),
                "skipped": {},
            },
        )


def finish_ok(
    engine: Engine,
    tenant: str,
    run_id: str,
    rows: list[dict[str, Any]],
    report: DriftReport,
    ex: Extraction,
    elapsed_s: float,
) -> None:
    """Store the results ``rows`` of run ``run_id`` and mark it ``ok`` with the report's
    counts, the calls read and what was skipped (``elapsed_s``: seconds since the start)."""
    with engine.begin() as conn:
        driftqueries.insert_results(conn, rows)
        driftqueries.finish_run(
            conn,
            tenant,
            run_id,
            {
                "status": "ok",
                "finished_at": dt.datetime.now(dt.UTC),
                "duration_s": elapsed_s,
                "n_reference_calls": ex.n_reference_calls,
                "n_current_calls": ex.n_current_calls,
                "n_results": len(rows),
                "n_evaluated": report.n_evaluated,
                "n_drifted": report.n_drifted,
                "drift_share": report.drift_share,
                "dataset_drifted": report.dataset_drifted,
                "skipped": ex.skipped,
            },
        )
