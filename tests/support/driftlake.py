"""A drift run over the partly sealed history of :func:`tests.collector.lake.calldata.
drifting_history`, as stored; shared by the lake and Spark drift-run tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from collector.store import driftqueries
from drift.callreaders import CallReader
from drift.runs import DriftSettings, run_drift
from drift.windows import Windows
from tests.collector.lake import calldata

HOUR = calldata.HOUR_NS
T0 = calldata.T0_NS
#: hours 0-5 are closed and sealed; hour 6 (calls up to 6.5 h) stays in the store
NOW = T0 + 6 * HOUR + 3 * HOUR // 4
WINDOWS = Windows(T0, T0 + 4 * HOUR, T0 + 4 * HOUR, T0 + int(6.5 * HOUR), "rolling")
SIGNALS = [
    "input_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "finish_reason",
    "refusal",
    "empty_output",
    "guardrail_hit",
    "thumbs_down",
]
#: fields of a stored run that differ between two runs of the same data
VOLATILE = {"run_id", "started_at", "finished_at", "duration_s"}


def drift_settings() -> DriftSettings:
    return DriftSettings.model_validate(
        {"signals": SIGNALS, "seed": 7, "alert": False, "rate_windows_hours": [3.0]}
    )


def stored_run(engine: Engine, url: str, read: CallReader | None) -> dict[str, Any]:
    """One drift run of the default tenant over :data:`WINDOWS`, as stored (volatile fields
    dropped)."""
    summary = run_drift(engine, url, "default", WINDOWS, drift_settings(), read=read)
    assert summary.status == "ok", summary.error
    with engine.connect() as conn:
        run = driftqueries.get_run(conn, "default", summary.run_id)
    assert run is not None
    return {k: v for k, v in run.items() if k not in VOLATILE}
