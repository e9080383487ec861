"""``driftline drift run --engine spark``: the sealed hours' signal columns extracted by Apache
Spark (``local[2]``) give the same table as DuckDB, and the same stored run and verdicts as the
default engine and as the store alone."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from collector.lake import layout, query, seal, textfeatures
from collector.lake import spark as lake_spark
from collector.store import driftqueries
from collector.store import engine as store_engine
from drift.callreaders import lake_reader, spark_reader, spark_session
from drift.cli import drift
from drift.runs import DriftSettings, run_drift
from tests.collector.lake import calldata
from tests.support.driftlake import HOUR, NOW, SIGNALS, T0, VOLATILE, WINDOWS, stored_run

pytest.importorskip("pyspark")
pytestmark = pytest.mark.slow
SPANS = [
    (WINDOWS.reference_start_ns, WINDOWS.reference_end_ns),
    (WINDOWS.current_start_ns, WINDOWS.current_end_ns),
]


@pytest.fixture(scope="module")
def session() -> Any:
    s = spark_session("local[2]")
    s.conf.set("spark.sql.shuffle.partitions", "2")
    yield s
    s.stop()


@pytest.fixture
def sealed(sqlite_url: str, tmp_path: Path) -> tuple[str, layout.Lake]:
    calldata.load(sqlite_url, calldata.drifting_history())
    lake = layout.open_lake(str(tmp_path / "lake"))
    seal.seal_pending(sqlite_url, lake, now_ns=NOW, delay_s=0)
    return sqlite_url, lake


def _rows(t: Any) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: (r["win"], r["trace_id"], r["span_id"]))


def test_spark_extracts_the_same_windows_as_duckdb(
    session: Any, sealed: tuple[str, layout.Lake]
) -> None:
    url, lake = sealed
    cols = [*query.DRIFT_COLUMNS, *layout.FEATURE_COLUMNS]
    want = textfeatures.read_windows(url, lake, "default", SPANS, cols)
    got = lake_spark.read_windows(session, url, lake, "default", SPANS, cols)
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows == 2600
    assert _rows(got) == _rows(want)
    assert want.select(["refusal"]).to_pylist().count({"refusal": True}) > 50
    # the texts of named calls, sealed and in the hot tail
    keys = want.take(list(range(0, 2600, 37)))
    args = ("default", SPANS, keys.select(["win", "trace_id", "span_id"]), ["output_text"])
    got_texts = lake_spark.read_texts(session, url, lake, *args)
    want_texts = textfeatures.read_texts(url, lake, *args)
    assert got_texts.schema == want_texts.schema
    assert got_texts.num_rows == keys.num_rows and _rows(got_texts) == _rows(want_texts)
    # a file sealed before the text features: computed from its text, on both engines
    path = lake.data_path("calls", "default", T0)
    old = pq.read_table(path).drop_columns(list(layout.FEATURE_COLUMNS))
    pq.write_table(old.replace_schema_metadata(None), path, compression="zstd")
    got = lake_spark.read_windows(session, url, lake, "default", SPANS, cols)
    assert got.schema == want.schema and _rows(got) == _rows(want)
    # a window wholly in the hot tail, and one wholly sealed
    for spans in ([(T0 + 6 * HOUR, T0 + 7 * HOUR)], [(T0 + HOUR, T0 + 2 * HOUR)]):
        a = lake_spark.read_windows(session, url, lake, "default", spans, ["trace_id", "span_id"])
        b = query.read_windows(url, lake, "default", spans, ["trace_id", "span_id"])
        assert a.num_rows > 0 and _rows(a) == _rows(b)


def test_spark_engine_run_equals_the_default_engine(
    session: Any, sealed: tuple[str, layout.Lake]
) -> None:
    url, lake = sealed
    engine = store_engine.make_engine(url)
    try:
        want = stored_run(engine, url, None)
        assert stored_run(engine, url, lake_reader(lake)) == want
        got = stored_run(engine, url, spark_reader(session, lake))
    finally:
        engine.dispose()
    assert got == want
    drifted = [(r["signal"], r["segment"]) for r in got["results"] if r["drifted"]]
    assert ("ttft_s", None) in drifted
    ttft = next(r for r in got["results"] if (r["signal"], r["segment"]) == ("ttft_s", None))
    assert np.isfinite(ttft["statistic"]) and ttft["n_reference"] > 1000


def test_spark_engine_language_signals_equal_the_default_engine(
    session: Any, sealed: tuple[str, layout.Lake]
) -> None:
    """The language sample's texts are read on Spark for the sampled calls only: same run."""
    url, lake = sealed
    settings = DriftSettings.model_validate(
        {"signals": [*SIGNALS, "prompt_language", "output_language", "language_mismatch"],
         "seed": 7, "alert": False, "rate_windows_hours": [3.0], "text_sample": 50}
    )  # fmt: skip
    engine = store_engine.make_engine(url)
    runs = []
    try:
        for read in (None, lake_reader(lake), spark_reader(session, lake)):
            summary = run_drift(engine, url, "default", WINDOWS, settings, read=read)
            assert summary.status == "ok", summary.error
            with engine.connect() as conn:
                run = driftqueries.get_run(conn, "default", summary.run_id)
            assert run is not None
            runs.append({k: v for k, v in run.items() if k not in VOLATILE})
    finally:
        engine.dispose()
    assert runs[0] == runs[1] == runs[2]
    assert any(r["signal"] == "output_language" for r in runs[0]["results"])


def test_cli_engine_spark(
    session: Any, sealed: tuple[str, layout.Lake], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line: same verdicts from ``--engine spark`` (on the running local session)
    and the default engine; ``--spark-master`` only with ``--engine spark``."""
    url, lake = sealed
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_LAKE_URL", lake.url)
    monkeypatch.setenv("DRIFTLINE_DRIFT_SIGNALS", str(SIGNALS).replace("'", '"'))
    monkeypatch.setenv("DRIFTLINE_DRIFT_ALERT", "false")
    args = [
        "run", "--once", "--tenant", "default", "--seed", "7",
        "--reference", "2026-01-01T00:00:00Z..2026-01-01T04:00:00Z",
        "--since", "2026-01-01T04:00:00Z", "--until", "2026-01-01T06:30:00Z",
    ]  # fmt: skip
    runner = CliRunner()
    outputs = []
    for extra in ([], ["--engine", "spark", "--spark-master", "local[2]"]):
        res = runner.invoke(drift, args + extra, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        outputs.append(re.sub(r"run \w+ | duration=\S+", "", res.output))
    assert outputs[0] == outputs[1]
    assert "drifted: ttft_s [all traffic]" in outputs[1]
    res = runner.invoke(drift, [*args, "--spark-master", "local[1]"])
    assert res.exit_code == 2 and "only with --engine spark" in res.output
