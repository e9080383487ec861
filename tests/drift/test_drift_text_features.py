"""The sealed per-call text features (refusal, empty output): sealing stores exactly the DuckDB
expressions' values with their definitions' digest; a drift run reads them instead of every
answer, falls back to the text for files sealed before them or under other definitions, reads
only the sampled calls' texts for language identification, and stores the run it stores from
the store alone."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from collector.lake import layout, manifest, seal, textfeatures
from collector.store import analytics, driftqueries
from collector.store import engine as store_engine
from drift.callreaders import lake_reader
from drift.runs import DriftSettings, run_drift
from tests.collector.lake import calldata
from tests.support.driftlake import HOUR, NOW, SIGNALS, T0, VOLATILE, WINDOWS

SPANS = [
    (WINDOWS.reference_start_ns, WINDOWS.reference_end_ns),
    (WINDOWS.current_start_ns, WINDOWS.current_end_ns),
]
#: the benchmark's 12 signals: the proportions from features, languages from sampled texts
TEXT_SIGNALS = [*SIGNALS, "prompt_language", "output_language", "language_mismatch"]


@pytest.fixture
def sealed(sqlite_url: str, tmp_path: Path) -> tuple[str, layout.Lake]:
    calldata.load(sqlite_url, calldata.drifting_history())
    lake = layout.open_lake(str(tmp_path / "lake"))
    seal.seal_pending(sqlite_url, lake, now_ns=NOW, delay_s=0)
    return sqlite_url, lake


def _paths(lake: layout.Lake) -> list[str]:
    return [
        lake.data_path("calls", "default", h) for h in sorted(manifest.load(lake, "default").hours)
    ]


def _run(url: str, lake: layout.Lake | None, signals: list[str]) -> dict[str, Any]:
    settings = DriftSettings.model_validate(
        {"signals": signals, "seed": 7, "alert": False, "rate_windows_hours": [3.0],
         "text_sample": 50}
    )  # fmt: skip
    engine = store_engine.make_engine(url)
    try:
        summary = run_drift(engine, url, "default", WINDOWS, settings, read=lake_reader(lake))
        assert summary.status == "ok", summary.error
        with engine.connect() as conn:
            run = driftqueries.get_run(conn, "default", summary.run_id)
    finally:
        engine.dispose()
    assert run is not None
    return {k: v for k, v in run.items() if k not in VOLATILE}


def _rows(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: (r["win"], r["trace_id"], r["span_id"]))


def test_sealing_stores_the_expressions_values_and_their_digest(
    sealed: tuple[str, layout.Lake],
) -> None:
    _, lake = sealed
    con = duckdb.connect()
    for path in _paths(lake):
        t = pq.read_table(path)
        assert t.schema == layout.calls_schema().with_metadata(t.schema.metadata)
        assert pq.read_metadata(path).metadata[textfeatures.METADATA_KEY] == textfeatures.DIGEST
        con.register("f", t)
        want = con.sql(
            f"SELECT {textfeatures.refusal_sql('output_text')}, "
            f"{textfeatures.empty_output_sql('output_text')} FROM f"
        ).fetchall()
        assert list(zip(t["refusal"].to_pylist(), t["empty_output"].to_pylist(), strict=True)) == (
            want
        )
    everything = pa.concat_tables(pq.read_table(p) for p in _paths(lake))
    assert pc.sum(everything["refusal"].cast(pa.int64())).as_py() > 50
    assert everything["refusal"].null_count == everything["output_text"].null_count > 0


def test_features_are_read_from_fresh_files_and_computed_from_text_elsewhere(
    sealed: tuple[str, layout.Lake],
) -> None:
    """A file sealed before the features (no columns, no digest) and one sealed under other
    definitions (wrong values, another digest) give the same features as the store."""
    url, lake = sealed
    cols = ["trace_id", "span_id", "model", "refusal", "empty_output"]
    store_only = textfeatures.read_windows(url, None, "default", SPANS, cols)
    assert _rows(textfeatures.read_windows(url, lake, "default", SPANS, cols)) == _rows(store_only)
    before = _run(url, lake, SIGNALS)
    paths = _paths(lake)
    old = pq.read_table(paths[0]).drop_columns(list(layout.FEATURE_COLUMNS))
    pq.write_table(old.replace_schema_metadata(None), paths[0], compression="zstd")
    other = pq.read_table(paths[1])
    for n in layout.FEATURE_COLUMNS:
        i = other.schema.get_field_index(n)
        other = other.set_column(i, n, pa.array([True] * other.num_rows))
    other = other.replace_schema_metadata({textfeatures.METADATA_KEY: b"an-older-definition"})
    pq.write_table(other, paths[1], compression="zstd")
    assert not textfeatures.fresh(lake, paths[0]) and not textfeatures.fresh(lake, paths[1])
    assert textfeatures.fresh(lake, paths[2])
    assert _rows(textfeatures.read_windows(url, lake, "default", SPANS, cols)) == _rows(store_only)
    assert _run(url, lake, SIGNALS) == before == _run(url, None, SIGNALS)


def test_texts_are_read_for_the_named_calls_only(sealed: tuple[str, layout.Lake]) -> None:
    url, lake = sealed
    every = textfeatures.read_windows(
        url, None, "default", SPANS, ["trace_id", "span_id", "start_unix_nano", "output_text"]
    )
    tail = pc.greater_equal(every["start_unix_nano"], T0 + 6 * HOUR)  # not sealed
    keys = pa.concat_tables(
        [
            every.filter(pc.equal(every["win"], 0)).slice(0, 40),
            every.filter(pc.and_(pc.equal(every["win"], 1), pc.invert(tail))).slice(0, 20),
            every.filter(tail).slice(0, 20),
        ]
    ).select(["win", "trace_id", "span_id", "start_unix_nano"])
    # with each call's start time (a sealed hour's scan keeps those start times first) and
    # without: the same texts
    for where, named in itertools.product(
        (lake, None), (keys, keys.drop_columns(["start_unix_nano"]))
    ):
        got = textfeatures.read_texts(url, where, "default", SPANS, named, ["output_text"])
        assert got.schema == textfeatures.texts_schema(["output_text"])
        assert got.num_rows == 80
        want = {(r["win"], r["trace_id"], r["span_id"]): r["output_text"] for r in _rows(every)}
        assert {(r["win"], r["trace_id"], r["span_id"]): r["output_text"] for r in _rows(got)} == {
            k: want[k] for k in ((r["win"], r["trace_id"], r["span_id"]) for r in _rows(keys))
        }
    with pytest.raises(ValueError, match="input_text / output_text"):
        textfeatures.read_texts(url, lake, "default", SPANS, keys, ["model"])


def test_run_with_language_signals_through_the_lake_equals_the_store(
    sealed: tuple[str, layout.Lake],
) -> None:
    url, lake = sealed
    store_only = _run(url, None, TEXT_SIGNALS)
    assert _run(url, lake, TEXT_SIGNALS) == store_only
    langs = [r for r in store_only["results"] if r["signal"] == "output_language"]
    assert langs and all(r["n_reference"] + r["n_reference_null"] > 0 for r in langs)
    drifted = {(r["signal"], r["segment"]) for r in store_only["results"] if r["drifted"]}
    assert ("refusal", None) in drifted


def test_the_sealed_schema_lists_the_features_last() -> None:
    names = layout.calls_schema().names
    assert names[-2:] == list(layout.FEATURE_COLUMNS)
    assert names[: len(layout.SEALED_COLUMNS)] == list(layout.SEALED_COLUMNS)
    assert all(n not in analytics.CALLS.c for n in layout.FEATURE_COLUMNS)
