"""The spool processor stores exactly the rows the span writer stores for the same input, whether
the batches are prepared inline or in a prepare worker process (whose results cross the process
boundary in compact form), and the compact form rebuilds the very items it came from."""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from collector.cost.prices import PriceTable
from collector.ingest import decode as codec
from collector.ingest.prepare import prepare
from collector.ingest.writer import BatchWriter, write_batch
from collector.spool.log import TRACES_JSON, TRACES_PROTOBUF, Spool
from collector.spool.processor import (
    SpoolProcessor,
    expand,
    prepare_traces,
    prepare_traces_compact,
)
from collector.store import engine as store_engine
from collector.store.schema import CALL_COLUMNS, SPAN_COLUMNS
from tests.collector.test_otlp_http import pb_request
from tests.conftest import CASES, PRICE_FIXTURE, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from ingest import build_bodies

CASE_FILES = [
    "15_vllm_ttft_itl.json",  # vLLM engine spans (merged with their callers)
    "08_negative_and_unset_durations.json",
    "12_token_key_dialects.json",
    "14_streaming_missing_usage.json",
    "16_model_name_variants.json",
    "02_int_value_shapes.json",
]


@functools.cache
def _records() -> list[tuple[int, str, bytes]]:
    """(kind, tenant, body): SDK spans with message text, the dialect cases, a bad record (the
    SDK's ids are random: built once per test session)."""
    out = [
        (TRACES_PROTOBUF, "a" if i % 3 else "b", b) for i, b in enumerate(build_bodies(6, 15, 3))
    ]
    out += [(TRACES_JSON, "a", (CASES / name).read_bytes()) for name in CASE_FILES]
    out += [(TRACES_PROTOBUF, "b", pb_request(4, trace_byte=9, model="gpt-4o-mini"))]
    out.insert(3, (TRACES_PROTOBUF, "a", b"\xff not protobuf"))
    return out


def _dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``spans`` and ``llm_calls`` but the receive time, in key order."""
    engine = store_engine.make_engine(url)
    span_cols = ", ".join(c for c in SPAN_COLUMNS if c != "received_unix_nano")
    with engine.connect() as conn:
        out = {
            "spans": [
                tuple(r)
                for r in conn.execute(
                    text(f"SELECT {span_cols} FROM spans ORDER BY tenant, trace_id, span_id")
                )
            ],
            "llm_calls": [
                tuple(r)
                for r in conn.execute(
                    text(
                        f"SELECT {', '.join(CALL_COLUMNS)} FROM llm_calls "
                        "ORDER BY tenant, trace_id, span_id"
                    )
                )
            ],
        }
    engine.dispose()
    return out


def _reference(tmp_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The records written one by one through :func:`write_batch`, without the spool."""
    url = f"sqlite:///{tmp_path}/ref.db"
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    prices = PriceTable.load(PRICE_FIXTURE)
    for kind, tenant, body in _records():
        media = codec.JSON if kind == TRACES_JSON else codec.PROTOBUF
        try:
            spans = codec.decode(body, media).spans
        except codec.DecodeError:
            continue
        items, _ = prepare(spans, 1_000_000, "full")
        write_batch(engine, [(tenant, items)], prices)
    engine.dispose()
    return _dump(url)


@pytest.mark.parametrize("workers", [0, 1], ids=["inline", "prepare-worker"])
def test_processor_stores_the_rows_the_writer_stores(tmp_path: Path, workers: int) -> None:
    ref = _reference(tmp_path)
    assert len(ref["spans"]) > 100 and len(ref["llm_calls"]) > 90
    url = f"sqlite:///{tmp_path}/d.db"
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    sp = Spool(tmp_path / "sp")
    for kind, tenant, body in _records():
        sp.append(kind, tenant, body, time.time_ns()).result(5)
    writer = BatchWriter(engine, PriceTable.load(PRICE_FIXTURE))
    writer.start()
    proc = SpoolProcessor(
        sp,
        writer,
        joiner=None,
        capture_mode=lambda _t: "full",
        batch_bytes=20_000,  # several batches, several records each
        prepare_workers=workers,
    )
    proc.start()
    wait_for(lambda: sp.unprocessed_bytes == 0, timeout_s=60)
    proc.close()
    writer.close()
    sp.close()
    engine.dispose()
    assert _dump(url) == ref


def test_compact_items_rebuild_the_items() -> None:
    jobs = [
        (kind, i, body, mode)
        for i, (kind, _tenant, body) in enumerate(_records())
        for mode in ("full", "redacted", "none")
    ]
    assert expand(prepare_traces_compact(jobs, 200)) == prepare_traces(jobs, 200)
