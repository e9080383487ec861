"""A drift run over a partly sealed history reads the sealed hours from the Parquet lake and
the hot tail from the store, and stores exactly the run it stores without the lake (SQLite and
PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from collector.lake import layout, manifest, seal
from collector.store import engine as store_engine
from drift.callreaders import lake_reader
from tests.collector.lake import calldata
from tests.support.driftlake import HOUR, NOW, T0, stored_run


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
