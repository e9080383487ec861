"""Tables of drift monitoring (drift/runs.py): one row per run, one per signal × segment result.

Window bounds are exact integers (``*_unix_nano``, UTC, half-open ``[start, end)``) like the
calls they select; wall times of the run are tz-aware UTC. ``NULL`` means unknown / no verdict
(``insufficient_data``), never 0 or ``False``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime


class DriftRun(Base):
    """One drift run of a tenant: the two windows, the configuration and the summary.

    ``status``: ``running`` | ``ok`` | ``failed`` (``error`` says why). ``reference_kind``:
    ``rolling`` (the N hours before the current window), ``range`` (a pinned date range) or
    ``deploy`` (the hours before a deploy marker, ``reference_label`` names it). ``skipped``
    maps a signal to the reason it was not tested (e.g. the embedding extra is missing).
    """

    __tablename__ = "drift_runs"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    trigger: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    duration_s: Mapped[float | None] = mapped_column(Float)
    reference_kind: Mapped[str] = mapped_column(String(16))
    reference_label: Mapped[str | None] = mapped_column(Text)
    reference_start_unix_nano: Mapped[int] = mapped_column(BigInteger)
    reference_end_unix_nano: Mapped[int] = mapped_column(BigInteger)
    current_start_unix_nano: Mapped[int] = mapped_column(BigInteger)
    current_end_unix_nano: Mapped[int] = mapped_column(BigInteger)
    n_reference_calls: Mapped[int | None] = mapped_column(Integer)
    n_current_calls: Mapped[int | None] = mapped_column(Integer)
    n_results: Mapped[int | None] = mapped_column(Integer)
    n_evaluated: Mapped[int | None] = mapped_column(Integer)
    n_drifted: Mapped[int | None] = mapped_column(Integer)
    drift_share: Mapped[float | None] = mapped_column(Float)
    dataset_drifted: Mapped[bool | None] = mapped_column()
    fdr_q: Mapped[float | None] = mapped_column(Float)
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    skipped: Mapped[dict[str, Any]] = mapped_column(JSONType)

    __table_args__ = (Index("ix_drift_runs_started", "tenant", "started_at"),)


class DriftResultRow(Base):
    """One signal × segment outcome of a run, with its effect size and binned histograms.

    ``segment`` is the label (``model=m,variant=v,service=s``; NULL = all traffic of the
    tenant) and ``segment_keys`` the same as a JSON object. ``effect_size`` /
    ``effect_kind``: normed Wasserstein for numbers, Jensen–Shannon distance (base 2) for
    categories, the rate difference (current − reference) for proportions, classifier AUC − 0.5
    for embeddings. ``histogram``: ``{"type": "bins"|"categories", "edges"|"categories": [...],
    "reference": [counts], "current": [counts]}`` for the dashboard (NULL for embeddings or
    an empty window).
    """

    __tablename__ = "drift_results"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    signal: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    segment: Mapped[str | None] = mapped_column(Text)
    segment_keys: Mapped[dict[str, Any]] = mapped_column(JSONType)
    method: Mapped[str] = mapped_column(String(32))
    score_kind: Mapped[str] = mapped_column(String(16))
    statistic: Mapped[float | None] = mapped_column(Float)
    pvalue: Mapped[float | None] = mapped_column(Float)
    adjusted_pvalue: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)
    drifted: Mapped[bool | None] = mapped_column()
    unadjusted_drifted: Mapped[bool | None] = mapped_column()
    insufficient_data: Mapped[bool] = mapped_column()
    n_reference: Mapped[int] = mapped_column(Integer)
    n_current: Mapped[int] = mapped_column(Integer)
    n_reference_null: Mapped[int] = mapped_column(Integer)
    n_current_null: Mapped[int] = mapped_column(Integer)
    effect_size: Mapped[float | None] = mapped_column(Float)
    effect_kind: Mapped[str | None] = mapped_column(String(32))
    psi: Mapped[float | None] = mapped_column(Float)
    reference_summary: Mapped[dict[str, Any]] = mapped_column(JSONType)
    current_summary: Mapped[dict[str, Any]] = mapped_column(JSONType)
    unseen_categories: Mapped[list[Any]] = mapped_column(JSONType)
    histogram: Mapped[dict[str, Any] | None] = mapped_column(JSONType)

    __table_args__ = (Index("ix_drift_results_signal", "tenant", "signal", "segment"),)
