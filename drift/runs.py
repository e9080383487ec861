"""A drift run: windows → extraction → tests → stored run → alert events.

:func:`run_drift` is what ``driftline drift run`` and the scheduled job call. The run row is
written first (``status='running'``), then every signal × segment result with its effect size
and histograms, then the summary (``ok``), or ``failed`` with the error. Each drifted result
emits one ``drift_detected`` event to the alerts subsystem
(:func:`drift.runrows.emit_drift_events`; the rows and events: :mod:`drift.runrows`).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError
from sqlalchemy import Engine, func, select

from collector.errors import ConfigError
from collector.store import driftqueries
from collector.store.models import LLMCall
from drift.callreaders import DEFAULT_SPARK_MASTER, CallReader
from drift.columnar import evaluate_columns
from drift.errors import DriftError
from drift.runrows import emit_drift_events, finish_ok, result_row, start_run
from drift.signals import SIGNALS, ExtractConfig, Extraction, extract
from drift.windows import NS, DeployMarker, Windows, deploy_windows, parse_reference

log = logging.getLogger(__name__)


class DriftSettings(BaseSettings):
    """Drift monitor configuration, env prefix ``DRIFTLINE_DRIFT_`` (e.g.
    ``DRIFTLINE_DRIFT_REFERENCE_HOURS=168``). Durations in hours unless named ``_s``."""

    model_config = SettingsConfigDict(env_prefix="DRIFTLINE_DRIFT_", extra="ignore")

    enabled: bool = Field(True, description="Run the scheduled drift job in the collector.")
    interval_s: float = Field(3600.0, gt=0, description="Seconds between scheduled runs.")
    current_hours: float = Field(1.0, gt=0, description="Length of the current window.")
    reference_hours: float = Field(
        24.0, gt=0, description="Rolling / deploy reference: hours before the current window."
    )
    reference: str | None = Field(
        None, description="Pinned reference: START..END (ISO 8601) or deploy:COLUMN=VALUE."
    )
    tenants: list[str] = Field(
        default_factory=list, description="Tenants to monitor (empty: every tenant with calls)."
    )
    signals: list[str] = Field(default_factory=lambda: list(SIGNALS))
    segment_by: list[str] = Field(default_factory=lambda: ["model", "variant", "service"])
    max_segments: int = Field(20, ge=1)
    include_all: bool = Field(True, description="Also test all traffic of the tenant.")
    min_samples: int = Field(30, ge=1, description="Below this per window: insufficient data.")
    fdr_q: float = Field(
        0.01,
        gt=0,
        lt=1,
        description="Benjamini–Hochberg level over every verdict of a run; on a quiet tenant "
        "also the chance that a run raises any drift alert (docs/drift-guarantees.md).",
    )
    rate_windows_hours: list[float] = Field(
        default_factory=lambda: [2.0, 3.0],
        description="Longer windows (hours, ending now) in which rare proportions (refusal, "
        "empty output, guardrail hit, thumbs-down) are tested besides the current window, "
        "weighted Bonferroni; rolling reference only; [] = current window only "
        "(docs/drift-guarantees.md).",
    )
    text_sample: int = Field(200, ge=1, description="Texts per window × segment for language.")
    embedding_sample: int = Field(
        128, ge=1, description="Prompts, and answers, per window × segment embedded."
    )
    seed: int | None = Field(None, description="Seed of the run's rng (None: fresh entropy).")
    spark_master: str = Field(
        DEFAULT_SPARK_MASTER,
        min_length=1,
        description="Spark master of `driftline drift run --engine spark` (local[N], "
        "spark://host:7077, yarn, ...) when --spark-master is not given (docs/lake.md).",
    )
    alert: bool = Field(True, description="Emit drift_detected alert events.")

    @field_validator("rate_windows_hours")
    @classmethod
    def _positive_hours(cls, value: list[float]) -> list[float]:
        if any(not (math.isfinite(h) and h > 0) for h in value):
            raise ValueError(f"every window must be a finite number of hours > 0, got {value}")
        return value

    def extract_config(self) -> ExtractConfig:
        """The :class:`ExtractConfig` of these settings. Raises ValueError naming a field."""
        return ExtractConfig(
            signals=tuple(self.signals),
            segment_by=tuple(self.segment_by),
            max_segments=self.max_segments,
            include_all=self.include_all,
            text_sample=self.text_sample,
            embedding_sample=self.embedding_sample,
        )


def rate_lookbacks_s(settings: DriftSettings, windows: Windows) -> tuple[float, ...]:
    """Seconds before the current window's start that the rare-rate windows reach back.

    One per ``settings.rate_windows_hours`` entry longer than the current window: its length
    minus the current window's, kept when at most half the reference (the reference keeps the
    majority of its calls). Empty unless the reference is rolling: only then does it end where
    the current window starts (a deploy reference ends there too, but its calls are the other
    side of the deploy). Input of :func:`drift.ratewindows.windowed_rate_test`.
    """
    if windows.reference_kind != "rolling":
        return ()
    cur_s = (windows.current_end_ns - windows.current_start_ns) / NS
    ref_s = (windows.reference_end_ns - windows.reference_start_ns) / NS
    lookbacks = {h * 3600.0 - cur_s for h in settings.rate_windows_hours}
    return tuple(sorted(x for x in lookbacks if 0.0 < x <= ref_s / 2))


def load_drift_settings(**overrides: Any) -> DriftSettings:
    """:class:`DriftSettings` from explicit overrides (None ignored), the environment, defaults.

    Raises:
        ConfigError: an invalid value; the message names the ``DRIFTLINE_DRIFT_*`` variable.
    """
    try:
        return DriftSettings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:  # e.g. DRIFTLINE_DRIFT_RATE_WINDOWS_HOURS=2,3 (not JSON)
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"DRIFTLINE_DRIFT_{field.group(1).upper()}" if field else "a DRIFTLINE_DRIFT_* value"
        raise ConfigError(
            f"invalid drift configuration: {name} cannot be parsed; list and dict values are "
            "JSON, e.g. DRIFTLINE_DRIFT_RATE_WINDOWS_HOURS='[2, 3]'"
        ) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"DRIFTLINE_DRIFT_{'.'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigError(f"invalid drift configuration: {problems}") from None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Outcome of one run: ``status`` ``ok`` | ``failed``; counts as stored."""

    run_id: str
    tenant: str
    status: str
    n_results: int
    n_evaluated: int
    n_drifted: int
    drifted: tuple[tuple[str, str | None], ...]
    skipped: dict[str, str]
    duration_s: float
    error: str | None = None


def resolve_windows(
    engine: Engine,
    tenant: str,
    settings: DriftSettings,
    *,
    now_ns: int,
    reference: str | None = None,
    since_ns: int | None = None,
) -> Windows:
    """The run's windows: ``reference`` (CLI) or ``settings.reference`` when given, else rolling.

    Raises:
        DriftError: a deploy marker that no call of the tenant carries.
        ValueError: a malformed reference (named) or empty windows.
    """
    spec = reference if reference is not None else settings.reference
    cur_start = (
        since_ns if since_ns is not None else now_ns - int(settings.current_hours * 3600 * NS)
    )
    ref_hours = settings.reference_hours
    if spec is not None:
        parsed = parse_reference(spec, now_ns=now_ns)
        if isinstance(parsed, DeployMarker):
            col = getattr(LLMCall, parsed.column)
            with engine.connect() as conn:
                marker = conn.execute(
                    select(func.min(LLMCall.start_unix_nano)).where(
                        LLMCall.tenant == tenant, col == parsed.value
                    )
                ).scalar()
            if marker is None:
                raise DriftError(f"deploy marker {spec!r}: no call of tenant {tenant!r} has it")
            w = deploy_windows(int(marker), parsed, now_ns=now_ns, reference_hours=ref_hours)
            if since_ns is not None:
                w = Windows(w.reference_start_ns, w.reference_end_ns, since_ns, now_ns, "deploy",
                            w.reference_label)  # fmt: skip
            return w
        if isinstance(parsed, tuple):
            return Windows(parsed[0], parsed[1], cur_start, now_ns, "range", spec)
        ref_hours = parsed
    return Windows(cur_start - int(ref_hours * 3600 * NS), cur_start, cur_start, now_ns, "rolling")


def run_drift(
    engine: Engine,
    database_url: str,
    tenant: str,
    windows: Windows,
    settings: DriftSettings,
    *,
    trigger: str = "cli",
    rng: np.random.Generator | None = None,
    read: CallReader | None = None,
) -> RunSummary:
    """Run every configured signal × segment test for one tenant and store the run.

    Args:
        engine: SQLAlchemy engine of the store (run and result rows are written with it).
        database_url: the same store's URL (the hot tail of calls is read through ADBC).
        tenant: whose calls.
        windows: reference and current windows.
        settings: signals, segments, thresholds, samples.
        trigger: ``cli`` | ``schedule`` (stored).
        rng: randomness of the samples and embedding tests (default: seeded by
            ``settings.seed``).
        read: how the calls are read (:mod:`drift.callreaders`: the lake's sealed hours plus
            the store's hot tail, on DuckDB or Spark; default: the store alone).

    Returns:
        :class:`RunSummary`; a failed extraction is stored as ``failed`` and returned with the
        error (not raised), so a scheduled loop continues with the next tenant.
    """
    rng = rng if rng is not None else np.random.default_rng(settings.seed)
    run_id = uuid.uuid4().hex
    t0 = time.perf_counter()
    config = settings.extract_config()
    start_run(engine, tenant, run_id, trigger, windows, settings)
    try:
        # the sampled text columns are still being built while the others are tested
        ex: Extraction = extract(
            database_url, tenant, windows, config, rng=rng, read=read, defer_texts=True
        )
        report, details = evaluate_columns(
            ex.columns,
            min_samples=settings.min_samples,
            fdr_q=settings.fdr_q,
            rng=rng,
            rate_lookbacks_s=rate_lookbacks_s(settings, windows),
            more=ex.pending,
        )
        rows = [
            result_row(tenant, run_id, i, r, d, ex.segment_keys.get(r.segment, {}))
            for i, (r, d) in enumerate(zip(report.results, details, strict=True))
        ]
    except Exception as exc:  # stored as a failed run; the caller decides what to do next
        log.exception("drift run %s of tenant %s failed", run_id, tenant)
        elapsed = time.perf_counter() - t0
        with engine.begin() as conn:
            driftqueries.finish_run(
                conn,
                tenant,
                run_id,
                {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                 "finished_at": dt.datetime.now(dt.UTC), "duration_s": elapsed},
            )  # fmt: skip
        return RunSummary(run_id, tenant, "failed", 0, 0, 0, (), {}, elapsed, str(exc))
    elapsed = time.perf_counter() - t0
    finish_ok(engine, tenant, run_id, rows, report, ex, elapsed)
    if settings.alert:
        with engine.connect() as conn:
            previously = driftqueries.previously_drifted(conn, tenant, run_id)
        if report.n_drifted or previously:
            emit_drift_events(engine, tenant, run_id, rows, previously)
    drifted = tuple((r.signal, r.segment) for r in report.results if r.drifted)
    return RunSummary(
        run_id, tenant, "ok", len(rows), report.n_evaluated, report.n_drifted, drifted,
        dict(ex.skipped), elapsed,
    )  # fmt: skip


def monitored_tenants(engine: Engine, settings: DriftSettings, *, since_ns: int) -> list[str]:
    """``settings.tenants``, or every tenant with a call started at or after ``since_ns``."""
    if settings.tenants:
        return list(settings.tenants)
    with engine.connect() as conn:
        rows = conn.execute(
            select(LLMCall.tenant).where(LLMCall.start_unix_nano >= since_ns).distinct()
        ).scalars()
        return sorted(rows)
