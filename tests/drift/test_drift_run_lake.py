"""A drift run over a partly sealed history reads the sealed hours from the Parquet lake and
the hot tail from the store, and stores exactly the run it stores without the lake (SQLite and
PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from collector.lake import layout, manifest, seal
from collector.store import driftqueries
from collector.store import engine as store_engine
from drift.callreaders import CallReader, lake_reader
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


def test_drift_run_reads_sealed_hours_from_the_lake_with_the_same_answers(
    db_url: str, tmp_path: Path
) -> None:
    calldata.load(db_url, calldata.drifting_history())
    engine = store_engine.make_engine(db_url)
    try:
        store_only = stored_run(engine, db_url, None)
        drifted = {(r["signal"], r["segment"]) for r in store_only["results"] if r["drifted"]}
        assert ("ttft_s", None) in drifted and ("refusal", None) in drifted
        assert any(r["drifted"] is False for r in store_only["results"])
        assert store_only["n_reference_calls"] == 1600

        lake = layout.open_lake(str(tmp_path / "lake"))
        seal.seal_pending(db_url, lake, now_ns=NOW, delay_s=0)
        assert sorted(manifest.load(lake, "default").hours) == [T0 + k * HOUR for k in range(6)]
        assert stored_run(engine, db_url, lake_reader(lake)) == store_only

        # the sealed hours' rows gone from the store: the run still sees them, in the lake
        with engine.begin() as conn:
            conn.execute(
                text("DELETE FROM llm_calls WHERE start_unix_nano < :t"), {"t": T0 + 6 * HOUR}
            )
        assert stored_run(engine, db_url, lake_reader(lake)) == store_only
        assert stored_run(engine, db_url, None)["n_reference_calls"] == 0
    finally:
        engine.dispose()
