"""The benchmarks' fast SQLite load (``benchmarks/storeload.py``) leaves the same store as the
writer's upsert (``collector.store.bulk``): the same schema, rows (with their rowids), indexes
and full-text index; and the vectorised stats generator gives the rows a seed always gave."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from benchmarks.stats import T0_NS, build_rows
from benchmarks.storeload import fast_load, schema
from collector.store import bulk
from collector.store import engine as store_engine

NAMES = [c.name for c in bulk.CALLS.columns]
JSON_COLS = {"finish_reasons", "flags"}


def _rows(n: int) -> list[tuple[Any, ...]]:
    """Stats benchmark rows, some with captured texts (so the FTS index has terms)."""
    rng = np.random.default_rng(3)
    starts = np.sort(T0_NS + rng.integers(0, 86_400 * 10**9, n))
    rows = build_rows(rng, 0, starts)
    i_in, i_out = NAMES.index("input_text"), NAMES.index("output_text")
    out = []
    for k, row in enumerate(rows):
        r = list(row)
        if k % 3 == 0:
            r[i_in] = f"question {k} about zebras"
            r[i_out] = None if k % 2 else f"answer {k}"
        elif k % 5 == 1:
            r[i_out] = f"answer {k} alone"  # an output text without its input
        out.append(tuple(r))
    return out


def _dump(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [
        tuple(
            orjson.dumps(v).decode() if n in JSON_COLS and v is not None else v
            for n, v in zip(NAMES, row, strict=True)
        )
        for row in rows
    ]


@pytest.fixture
def two_stores(_sqlite_template: Path, tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "writer.db", tmp_path / "fast.db"
    shutil.copyfile(_sqlite_template, a)
    shutil.copyfile(_sqlite_template, b)
    return a, b


def test_fast_load_leaves_the_writers_store(two_stores: tuple[Path, Path]) -> None:
    writer, fast = two_stores
    rows = _rows(3000)
    engine = store_engine.make_engine(f"sqlite:///{writer}")
    try:
        for lo in range(0, len(rows), 1000):
            with engine.begin() as conn:
                bulk.upsert(conn, bulk.CALLS, rows[lo : lo + 1000])
    finally:
        engine.dispose()
    with fast_load(fast) as con:
        con.execute("BEGIN")
        con.executemany(
            f"INSERT INTO llm_calls ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})",
            _dump(rows),
        )
        con.execute("COMMIT")

    con = sqlite3.connect(writer)
    con.execute(f"ATTACH '{fast}' AS f")
    fast_schema = con.execute("SELECT type, name, tbl_name, sql FROM f.sqlite_master").fetchall()
    assert sorted(fast_schema, key=lambda r: (r[0], r[1])) == schema(con)
    assert con.execute("PRAGMA f.journal_mode").fetchone() == ("wal",)
    assert (
        con.execute("PRAGMA f.index_list(llm_calls)").fetchall()
        == con.execute("PRAGMA main.index_list(llm_calls)").fetchall()
    )
    cols = ", ".join(["rowid", *NAMES])
    for x, y in (("main", "f"), ("f", "main")):
        diff = f"SELECT {cols} FROM {x}.llm_calls EXCEPT SELECT {cols} FROM {y}.llm_calls"
        assert con.execute(f"SELECT count(*) FROM ({diff})").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM f.llm_calls").fetchone() == (3000,)
    # one FTS document per row with a text, as the insert trigger writes them
    texts = sum(1 for r in rows if r[NAMES.index("input_text")] or r[NAMES.index("output_text")])
    assert con.execute("SELECT count(*) FROM main.llm_calls_fts_docsize").fetchone() == (texts,)
    a = con.execute("SELECT * FROM main.llm_calls_fts_docsize ORDER BY id").fetchall()
    assert a == con.execute("SELECT * FROM f.llm_calls_fts_docsize ORDER BY id").fetchall()
    con.close()
    for term in ("zebras", "answer", "alone", "question NEAR(zebras)"):
        hits = []
        for path in (writer, fast):
            c = sqlite3.connect(path)
            hits.append(
                c.execute(
                    "SELECT rowid FROM llm_calls_fts WHERE llm_calls_fts MATCH ? ORDER BY rowid",
                    (term,),
                ).fetchall()
            )
            # the trigger still follows later writes
            c.execute("UPDATE llm_calls SET output_text = 'okapi' WHERE rowid = 2")
            assert c.execute(
                "SELECT rowid FROM llm_calls_fts WHERE llm_calls_fts MATCH 'okapi'"
            ).fetchall() == [(2,)]
            c.rollback()
            c.close()
        assert hits[0] == hits[1] and hits[0]


def test_build_rows_keeps_the_seeded_rows() -> None:
    """The first row a seed gives (per-row loop before vectorising: same draws, same order)."""
    rng = np.random.default_rng(1)
    starts = np.array([T0_NS, T0_NS + 10**9])
    rows = [dict(zip(NAMES, r, strict=True)) for r in build_rows(rng, 7, starts)]
    ref = np.random.default_rng(1)
    model_idx = ref.integers(0, 4, 2)
    ttft = ref.lognormal(-1.6, 0.7, 2)
    out_tok = ref.integers(1, 700, 2)
    in_tok = ref.integers(20, 4000, 2)
    tpot = ref.lognormal(-3.7, 0.3, 2)
    e2e = ttft + tpot * np.maximum(out_tok - 1, 0)
    ref.exponential(0.05, 2)
    u = ref.random((2, 4))
    for i, row in enumerate(rows):
        assert row["trace_id"] == f"{7 + i:032x}" and row["call_id"] == f"chatcmpl-{7 + i}"
        assert row["input_tokens"] == int(in_tok[i])
        assert row["end_unix_nano"] == int(starts[i] + e2e[i] * 1e9)
        error = u[i, 0] < 0.05
        assert row["status"] == ("error" if error else "ok")
        assert row["output_tokens"] == (None if error else int(out_tok[i]))
        assert row["ttft_s"] == (float(ttft[i]) if u[i, 1] > 0.1 and not error else None)
        assert row["model"] == ("gpt-4o", "gpt-4o-mini", "llama-3.1-8b", "qwen2.5-7b")[model_idx[i]]
        assert row["input_text"] is None and row["flags"] == []
