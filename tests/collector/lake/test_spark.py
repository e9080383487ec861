"""Apache Spark (``local[2]``) over the lake agrees with driftline's DuckDB answers to the last
row: the stats per model and one drift signal's columns (and the KS test on them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from collector.lake import layout, query, seal, spark
from collector.lake import stats as lake_stats
from tests.collector.lake import calldata

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.slow
HOUR = calldata.HOUR_NS
T0 = calldata.T0_NS


@pytest.fixture(scope="module")
def session() -> Any:
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[2]")
        .appName("driftline-lake-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield s
    s.stop()


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def test_spark_agrees_with_duckdb(session: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/d.db"
    calldata.load(url, calldata.rows(np.random.default_rng(5), 2000, span_ns=4 * HOUR))
    lake = layout.open_lake(str(tmp_path / "lake"))
    seal.seal_pending(url, lake, now_ns=T0 + 5 * HOUR, delay_s=0)
    since, until = T0, T0 + 4 * HOUR
    want = lake_stats.call_stats(
        url, lake, "default", group_by=["model"], since_ns=since, until_ns=until, source="raw"
    )
    got = spark.call_stats(
        session, lake.url, "default", group_by=["model"], since_ns=since, until_ns=until
    )
    assert [g["model"] for g in got] == [w["model"] for w in want]
    for g, w in zip(got, want, strict=True):
        for k, v in g.items():
            assert _eq(v, w[k]) or (v is None and w[k] is None), (g["model"], k, v, w[k])

    windows = [(T0, T0 + 2 * HOUR), (T0 + 2 * HOUR, T0 + 4 * HOUR)]
    frames = spark.numeric_signal(session, lake.url, "default", windows, "ttft_s")
    table = query.read_windows(url, lake, "default", windows, ["model", "ttft_s"])
    for key, (ref, cur) in frames.items():
        mine = []
        for w in (0, 1):
            rows = [r for r in table.to_pylist() if r["win"] == w and r["model"] == key[0]]
            vals = [np.nan if r["ttft_s"] is None else r["ttft_s"] for r in rows]
            mine.append(np.sort(np.asarray(vals, dtype=np.float64)))
        np.testing.assert_array_equal(ref, mine[0])
        np.testing.assert_array_equal(cur, mine[1])
        a, b = ref[~np.isnan(ref)], cur[~np.isnan(cur)]
        assert (
            sps.ks_2samp(a, b).statistic
            == sps.ks_2samp(mine[0][~np.isnan(mine[0])], mine[1][~np.isnan(mine[1])]).statistic
        )
