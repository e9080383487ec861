"""A drift signal added in ONE registry entry (:mod:`collector.lake.driftsignals`) flows through
the store path, the lake path and the Spark path's column list to a drift result.

The fixture registers three signals a test owner might add (an expression over two columns, a
plain column, a per-call proportion) and unregisters them after; nothing else is edited.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.lake import driftsignals, layout, query, seal, spark
from collector.lake.driftsignals import DriftSignal
from collector.store import driftqueries
from collector.store import engine as store_engine
from drift.callreaders import CallReader, lake_reader
from drift.runs import DriftSettings, run_drift
from drift.signals import SIGNALS, ExtractConfig
from tests.collector.lake import calldata
from tests.support.driftlake import NOW, VOLATILE, WINDOWS

NEW = (
    # TTFT's share of the whole call: drifts (TTFT 1.6x slower, the rest unchanged)
    DriftSignal(
        "first_token_share",
        "numeric",
        "block_rank",
        reads=("ttft_s", "e2e_s"),
        sql="c.ttft_s / nullif(c.e2e_s, 0)",
    ),
    # a plain column (so Spark can extract it too): the engine queue, unchanged
    DriftSignal("queue_wait_s", "numeric", "block_rank", reads=("queue_s",), sql="c.queue_s"),
    # a per-call proportion: first token later than 0.3 s
    DriftSignal("slow_first_token", "rate", "rate", reads=("ttft_s",), sql="c.ttft_s > 0.3"),
)
NAMES = [s.name for s in NEW]


@pytest.fixture
def new_signals() -> Iterator[tuple[DriftSignal, ...]]:
    for s in NEW:
        driftsignals.register(s)
    try:
        yield NEW
    finally:
        for s in NEW:
            driftsignals.unregister(s.name)


def _run(engine: Any, url: str, read: CallReader | None, signals: list[str]) -> dict[str, Any]:
    settings = DriftSettings.model_validate(
        {"signals": signals, "seed": 7, "alert": False, "rate_windows_hours": [3.0]}
    )
    summary = run_drift(engine, url, "default", WINDOWS, settings, read=read)
    assert summary.status == "ok", summary.error
    with engine.connect() as conn:
        run = driftqueries.get_run(conn, "default", summary.run_id)
    assert run is not None
    return {k: v for k, v in run.items() if k not in VOLATILE}


def test_a_registered_signal_flows_through_the_store_and_the_lake_to_a_result(
    new_signals: tuple[DriftSignal, ...], sqlite_url: str, tmp_path: Path
) -> None:
    calldata.load(sqlite_url, calldata.drifting_history())
    engine = store_engine.make_engine(sqlite_url)
    try:
        signals = ["ttft_s", *NAMES]
        store_only = _run(engine, sqlite_url, None, signals)
        results = {(r["signal"], r["segment"]): r for r in store_only["results"]}
        assert {s for s, _ in results} == set(signals)
        assert results[("first_token_share", None)]["kind"] == "numerical"
        assert results[("slow_first_token", None)]["kind"] == "categorical"
        assert results[("first_token_share", None)]["drifted"] is True
        assert results[("slow_first_token", None)]["drifted"] is True
        assert results[("queue_wait_s", None)]["drifted"] is False

        lake = layout.open_lake(str(tmp_path / "lake"))
        seal.seal_pending(sqlite_url, lake, now_ns=NOW, delay_s=0)
        assert _run(engine, sqlite_url, lake_reader(lake), signals) == store_only
    finally:
        engine.dispose()


def test_the_read_columns_and_the_spark_list_come_from_the_registry(
    new_signals: tuple[DriftSignal, ...],
) -> None:
    assert [s for s in SIGNALS if s in NAMES] == NAMES
    assert SIGNALS["queue_wait_s"] == "numerical" and SIGNALS["slow_first_token"] == "categorical"
    assert ExtractConfig().signals[-3:] == tuple(NAMES)  # the default runs every signal
    assert {"queue_s", "ttft_s", "e2e_s"} <= set(driftsignals.drift_columns())
    # Spark extracts the numeric signals that are one plain column, under the signal's name
    assert spark.spark_numeric_signals()["queue_wait_s"] == "queue_s"
    assert "first_token_share" not in spark.spark_numeric_signals()
    with pytest.raises(ValueError, match="first_token_share"):
        spark.numeric_signal(None, "unused", "default", [(0, 1)], "first_token_share")


def test_unregistered_the_signal_is_gone_and_the_builtins_are_unchanged() -> None:
    assert not set(NAMES) & set(SIGNALS)
    with pytest.raises(ValueError, match="unknown"):
        ExtractConfig(signals=("queue_wait_s",))
    assert list(spark.spark_numeric_signals()) == [
        "input_tokens",
        "output_tokens",
        "ttft_s",
        "tpot_s",
        "e2e_s",
    ]
    assert driftsignals.drift_columns() == query.DRIFT_COLUMNS
    assert layout.FEATURE_COLUMNS == ("refusal", "empty_output")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"name": "Bad-Name", "kind": "numeric", "test": "t", "reads": ("x",), "sql": "c.x"},
            "name",
        ),
        ({"name": "a", "kind": "ordinal", "test": "t", "reads": ("x",), "sql": "c.x"}, "kind"),
        (
            {"name": "seg_id", "kind": "numeric", "test": "t", "reads": ("x",), "sql": "c.x"},
            "per-call",
        ),
        ({"name": "_x", "kind": "numeric", "test": "t", "reads": ("x",), "sql": "c.x"}, "name"),
        ({"name": "a", "kind": "numeric", "test": "t"}, "sql and reads"),
        ({"name": "a", "kind": "rate", "test": "t", "source": "feature"}, "feature"),
        ({"name": "a", "kind": "numeric", "test": "t", "source": "embedded"}, "embedded"),
        ({"name": "a", "kind": "numeric", "test": "t", "source": "web"}, "source"),
    ],
)
def test_a_malformed_entry_is_refused_naming_what_is_wrong(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        DriftSignal(**kwargs)


def test_a_name_registers_once_and_features_are_fixed_at_import() -> None:
    with pytest.raises(ValueError, match="registered already"):
        driftsignals.register(DriftSignal("ttft_s", "numeric", "t", reads=("ttft_s",), sql="x"))
    for cols in (("nope",), ("tenant",)):  # a typo, or another tenant's name: refused
        bad = DriftSignal("misread", "numeric", "t", reads=cols, sql=f"c.{cols[0]}")
        with pytest.raises(ValueError, match="not llm_calls columns"):
            driftsignals.register(bad)
    late = DriftSignal("shouting", "rate", "rate", source="feature", feature=lambda c: c)
    with pytest.raises(ValueError, match="fixed at import"):
        driftsignals.register(late)
    assert "shouting" not in SIGNALS
