"""One rule for a usable judge score and one for a refusal: Python and SQL agree on a table of
cases, on SQLite, PostgreSQL and DuckDB."""

from __future__ import annotations

import duckdb
import pytest
from sqlalchemy import Column, Float, Integer, MetaData, String, Table, create_engine, select, text

from collector.lake.textfeatures import REFUSAL_WINDOW_CHARS, refusal_sql
from collector.store.judgescore import is_usable_score, usable_score, usable_score_sql
from drift.textsignals import is_refusal

#: (status, score): failed attempts, parse errors stored as failed, unknown verdicts (no
#: score), a zero score (usable: 0 is a score, not unknown), negative and fractional scores
SCORE_CASES: list[tuple[str | None, float | None]] = [
    ("ok", 4.0),
    ("ok", 0.0),
    ("ok", -1.5),
    ("ok", None),
    ("failed", 3.0),
    ("failed", None),
    ("OK", 5.0),
    ("", 2.0),
    (None, 1.0),
]


def test_the_rule_in_python() -> None:
    got = [is_usable_score(s, v) for s, v in SCORE_CASES]
    assert got == [True, True, True, False, False, False, False, False, False]


def test_sqlalchemy_and_sql_text_agree_with_python(db_url: str) -> None:
    engine = create_engine(db_url)
    md = MetaData()
    t = Table(
        "judgescore_cases",
        md,
        Column("i", Integer, primary_key=True),
        Column("status", String(16)),
        Column("score", Float),
    )
    md.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(
                t.insert(),
                [{"i": i, "status": s, "score": v} for i, (s, v) in enumerate(SCORE_CASES)],
            )
            by_orm = {r.i for r in conn.execute(select(t.c.i).where(usable_score(t)))}
            by_sql = {
                r[0]
                for r in conn.execute(
                    text(f"SELECT r.i FROM judgescore_cases r WHERE {usable_score_sql('r')}")
                )
            }
    finally:
        md.drop_all(engine)
        engine.dispose()
    want = {i for i, (s, v) in enumerate(SCORE_CASES) if is_usable_score(s, v)}
    assert by_orm == want and by_sql == want


def test_sql_text_agrees_with_python_in_duckdb() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE r (i INTEGER, status VARCHAR, score DOUBLE)")
    con.executemany(
        "INSERT INTO r VALUES (?, ?, ?)", [(i, s, v) for i, (s, v) in enumerate(SCORE_CASES)]
    )
    got = {
        row[0] for row in con.execute(f"SELECT i FROM r WHERE {usable_score_sql('r')}").fetchall()
    }
    assert got == {i for i, (s, v) in enumerate(SCORE_CASES) if is_usable_score(s, v)}


#: answers at the edges of the refusal rule: the searched opening's length, folded quotes,
#: case, whitespace of every kind, a first-person marker with and without a request verb,
#: regex metacharacters, and unknown (None)
REFUSAL_CASES: list[str | None] = [
    "x" * (REFUSAL_WINDOW_CHARS - len("i'm sorry")) + "I'm sorry",
    "x" * (REFUSAL_WINDOW_CHARS - len("i'm sorry") + 1) + "I'm sorry",
    "\u2018I\u2019M SORRY\u2019",
    "\t\x0b\x0c\r\n I APOLOGIZE for the delay.",
    "I can't wait to show you.",
    "I can't share that.",
    "i will not PROCESS this",
    "but i cannot (help) [you] with $^ this",
    "sorry, I",
    "\u00a0I'm sorry",
    "",
    None,
]


@pytest.mark.parametrize("text", REFUSAL_CASES)
def test_refusal_sql_and_python_agree(text: str | None) -> None:
    con = duckdb.connect()
    got = con.execute(f"SELECT {refusal_sql('t')} FROM (SELECT ?::VARCHAR AS t)", [text]).fetchall()
    assert got[0][0] == is_refusal(text)


def test_the_refusal_cases_exercise_both_verdicts() -> None:
    verdicts = [is_refusal(t) for t in REFUSAL_CASES]
    assert {True, False, None} <= set(verdicts)
