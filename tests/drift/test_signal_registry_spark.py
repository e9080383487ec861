"""A drift signal registered in one entry also runs on the Spark engine: the same stored run
as the default engine, and Spark's own numeric extraction reads it (slow: starts Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from collector.lake import driftsignals, layout, seal
from collector.lake import spark as lake_spark
from collector.store import engine as store_engine
from drift.callreaders import lake_reader, spark_reader, spark_session
from tests.collector.lake import calldata
from tests.drift.test_signal_registry import NAMES, NEW, _run
from tests.support.driftlake import NOW, WINDOWS

pytest.importorskip("pyspark")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session() -> Any:
    s = spark_session("local[2]")
    s.conf.set("spark.sql.shuffle.partitions", "2")
    yield s
    s.stop()


@pytest.fixture
def new_signals() -> Iterator[None]:
    for s in NEW:
        driftsignals.register(s)
    try:
        yield
    finally:
        for s in NEW:
            driftsignals.unregister(s.name)


def test_a_registered_signal_runs_on_spark(
    session: Any, new_signals: None, sqlite_url: str, tmp_path: Path
) -> None:
    calldata.load(sqlite_url, calldata.drifting_history())
    lake = layout.open_lake(str(tmp_path / "lake"))
    seal.seal_pending(sqlite_url, lake, now_ns=NOW, delay_s=0)
    engine = store_engine.make_engine(sqlite_url)
    try:
        want = _run(engine, sqlite_url, lake_reader(lake), NAMES)
        got = _run(engine, sqlite_url, spark_reader(session, lake), NAMES)
    finally:
        engine.dispose()
    assert got == want
    assert {r["signal"] for r in got["results"]} == set(NAMES)

    spans = [(WINDOWS.reference_start_ns, WINDOWS.reference_end_ns)]
    frames = lake_spark.numeric_signal(
        session, lake.url, "default", spans, "queue_wait_s", segment_by=()
    )
    (values,) = frames[()]
    assert values.size > 0 and np.isnan(values).any() and (values[~np.isnan(values)] >= 0).all()
