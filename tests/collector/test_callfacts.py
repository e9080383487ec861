"""One field list for what a span says (``Extract``) and the stored row (``CallRecord``).

Both subclass :class:`collector.store.schema.CallFacts`; every shared fact is carried from the
extract into the record by name, so a fact added to ``CallFacts`` reaches ``llm_calls`` without
a second copy. The spool's compact form (tuples in ``fields()`` order, pickled between
processes) must still rebuild equal objects.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

from collector.cost.prices import PriceTable
from collector.ingest.normalize import CallRecord, Extract, finalize
from collector.spool import prepared
from collector.store.schema import CALL_COLUMNS, CALL_FACTS, CallFacts, SpanData
from tests.conftest import PRICE_FIXTURE

PRICES = PriceTable.load(PRICE_FIXTURE)


def _distinct_extract(role: str = "client") -> Extract:
    """An Extract whose every shared fact holds a value no other field holds."""
    values: dict[str, Any] = {}
    for i, f in enumerate(dataclasses.fields(CallFacts)):
        t = str(f.type)
        if t.startswith("int"):
            values[f.name] = 1000 + i
        elif t.startswith("float"):
            values[f.name] = 0.5 + i
        else:
            values[f.name] = f"v{i}"
    values.update(input_tokens=7, output_tokens=11, ttft_s=0.25, e2e_s=2.25)
    return Extract(
        **values,
        role=role,
        finish_reasons=("stop",),
        reported_cost_usd=None,
        flags=frozenset({"x"}),
    )


def test_the_shared_facts_are_declared_once_and_are_llm_calls_columns() -> None:
    assert len(CALL_FACTS) + 2 == 42  # + finish_reasons and flags, typed per class
    for cls in (Extract, CallRecord):
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[: len(CALL_FACTS)] == list(CALL_FACTS)
        # no subclass re-declares a shared fact
        own = set(cls.__dataclass_fields__) - set(CALL_FACTS)
        assert own.isdisjoint(CALL_FACTS)
    assert sorted(f.name for f in dataclasses.fields(CallRecord)) == sorted(CALL_COLUMNS)


def test_finalize_carries_every_shared_fact_by_name() -> None:
    ex = _distinct_extract()
    rec = finalize(ex, tenant="t", prices=PRICES)
    for name in CALL_FACTS:
        assert getattr(rec, name) == getattr(ex, name), name
    assert rec.tpot_s == (2.25 - 0.25) / 10
    assert rec.finish_reasons == ["stop"] and rec.finish_reason == "stop"


def test_an_engine_span_alone_reports_its_own_latencies_as_server_side() -> None:
    ex = _distinct_extract(role="engine")
    rec = finalize(ex, tenant="t", prices=PRICES)
    assert (rec.server_ttft_s, rec.server_e2e_s) == (0.25, 2.25)
    assert ex.server_ttft_s not in (None, 0.25)  # the extract's own value is replaced


def test_compact_form_and_pickle_rebuild_equal_objects() -> None:
    ex = _distinct_extract()
    span = SpanData("ab" * 16, "cd" * 8, None, "chat", 3, 1, 2, 0, None, {}, [], [], {}, None, None)
    item = prepared.Item(span, ex, "t", False)
    sent = pickle.loads(pickle.dumps(prepared.compact([([item], [])])))
    back = prepared.expand(sent)
    assert back == [([item], [])]
    rec = finalize(ex, tenant="t", prices=PRICES)
    assert pickle.loads(pickle.dumps(rec)) == rec
