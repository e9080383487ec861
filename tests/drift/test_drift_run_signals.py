"""Signal extraction details: the DuckDB refusal rule equals textsignals, per-call proportions
(guardrail, empty, thumbs-down with latest vote per user), segments, and the scheduled job."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from collector.scheduler import JobContext
from collector.store import engine as store_engine
from drift.jobs import run_once
from drift.runs import DriftSettings
from drift.signals import ExtractConfig, extract, refusal_sql
from drift.textsignals import is_refusal
from drift.windows import Windows

TEXTS = [
    "I'm sorry, but I can't help with that.",
    "  \n I cannot provide that information.",
    "I cannot stress enough how useful this is.",
    "Sure! Here is the recipe.",
    "As an AI language model, I don't have opinions.",
    "My apologies, the answer was wrong.",
    "I\u2019m unable to assist with this request.",
    "",
    "   ",
    "Here is a long answer. " * 20 + "I cannot help with that.",
    "Je ne peux pas vous aider.",
    "I won't do that, sorry.",
    "I won't be able to help with this one.",
    "I will not continue this conversation.",
    "The function (a+b)*[c] returns $5 | ^ \\ done.",
    None,
]


def test_refusal_sql_equals_the_python_heuristic() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (output_text VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?)", [(t,) for t in TEXTS])
    got = [r[0] for r in con.execute(f"SELECT {refusal_sql('output_text')} FROM t").fetchall()]
    assert got == [is_refusal(t) for t in TEXTS]
    assert got.count(True) >= 6  # the corpus exercises both branches


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, list):
        vals = [{"stringValue": v} for v in value]
        return {"key": key, "value": {"arrayValue": {"values": vals}}}
    return {"key": key, "value": {"intValue": str(value)}}


HOUR = 3600 * 10**9
BASE = 1_790_000_000 * 10**9


def _spans(n: int, win: int, model: str, finish: str, out: str, offset: int) -> list[Any]:
    spans = []
    for j in range(n):
        i = offset + j + 1
        start = BASE + win * HOUR + (j + 1) * 10**9
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": 10 + j % 7,
            "gen_ai.usage.output_tokens": 20 + j % 5,
            "gen_ai.response.finish_reasons": [finish],
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": out}]}]
            ),
        }
        spans.append(
            {
                "traceId": f"{i:032x}",
                "spanId": f"{i + 1:016x}",
                "name": "chat",
                "kind": 3,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + 10**9),
                "status": {"code": 1},
                "attributes": [_attr(k, v) for k, v in attrs.items()],
            }
        )
    return spans


def _post(client: TestClient, spans: list[Any]) -> None:
    body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
    r = client.post(
        "/v1/traces", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert r.status_code == 200, r.text


@pytest.fixture(autouse=True)
def _no_scheduled_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRIFTLINE_DRIFT_ENABLED", "false")


@pytest.mark.parametrize("vote_on", ["trace", "span", "both"])
def test_proportions_votes_and_segments(client: TestClient, vote_on: str) -> None:
    # votes on whole traces, on spans, or both kinds in one run (each join of the extraction
    # runs only when it has votes): the same thumbs_down either way
    # model a: stops normally in the reference, hits the content filter / refuses in current
    _post(client, _spans(40, 0, "gpt-4o", "stop", "Sure, here it is.", 0))
    _post(client, _spans(20, 1, "gpt-4o", "content_filter", "", 100))
    _post(client, _spans(20, 1, "gpt-4o", "stop", "I'm sorry, I can't help with that.", 200))
    _post(client, _spans(40, 0, "gpt-4o-mini", "stop", "Fine.", 300))
    _post(client, _spans(40, 1, "gpt-4o-mini", "stop", "Fine.", 400))
    # two votes by one user on call 0: the later (down) wins; call 1 up; call 100 down
    votes = [
        ("fb1", 0, "thumbs_up", 5),
        ("fb2", 0, "thumbs_down", 9),
        ("fb3", 1, "thumbs_up", 5),
        ("fb4", 100, "thumbs_down", 5),
    ]
    for fid, i, kind, at_s in votes:
        r = client.post(
            "/api/v1/feedback",
            json={
                "feedback_id": fid,
                "trace_id": f"{i + 1:032x}",
                **(
                    {"span_id": f"{i + 2:016x}"}
                    if vote_on == "span" or (vote_on == "both" and i >= 100)
                    else {}
                ),
                "kind": kind,
                "user_id": "u1",
                "timestamp": (BASE + HOUR * (i >= 100) + at_s * 10**9) / 1e9,
            },
        )
        assert r.status_code in (200, 201, 202), r.text
    url = client.app.state.driftline.settings.database_url  # type: ignore[attr-defined]
    windows = Windows(BASE, BASE + HOUR, BASE + HOUR, BASE + 2 * HOUR, "range")
    config = ExtractConfig(
        signals=("input_tokens", "finish_reason", "refusal", "empty_output", "guardrail_hit",
                 "thumbs_down"),
        segment_by=("model",),
    )  # fmt: skip
    ex = extract(url, "default", windows, config, rng=np.random.default_rng(0))
    assert (ex.n_reference_calls, ex.n_current_calls) == (80, 80)
    assert set(ex.segment_keys) == {"model=gpt-4o", "model=gpt-4o-mini", None}
    cols = {(c.signal, c.segment): c for c in ex.columns}
    g = cols[("guardrail_hit", "model=gpt-4o")]
    assert g.reference_counts == {False: 40} and g.current_counts == {True: 20, False: 20}
    e = cols[("empty_output", "model=gpt-4o")]
    # an empty answer part is stored as "no captured text" (NULL) by the collector: unknown
    assert e.current_counts == {False: 20} and e.current_nulls == 20
    ref_refusal = cols[("refusal", "model=gpt-4o")]
    assert ref_refusal.reference_counts == {False: 40}
    assert ref_refusal.current_counts == {True: 20} and ref_refusal.current_nulls == 20
    t = cols[("thumbs_down", None)]
    assert t.reference_counts == {True: 1, False: 1} and t.reference_nulls == 78
    assert t.current_counts == {True: 1} and t.current_nulls == 79
    fr = cols[("finish_reason", None)]
    assert fr.current_counts == {"stop": 60, "content_filter": 20}
    tokens = cols[("input_tokens", "model=gpt-4o-mini")]
    assert tokens.reference is not None and tokens.reference.size == 40
    # with the language sample deferred (as run_drift extracts): the same columns, the text
    # ones from ``pending``
    lang = dataclasses.replace(config, signals=(*config.signals, "prompt_language"))
    whole = extract(url, "default", windows, lang, rng=np.random.default_rng(0))
    later = extract(url, "default", windows, lang, rng=np.random.default_rng(0), defer_texts=True)
    assert whole.pending is None and later.pending is not None
    assert repr((*later.columns, *later.pending())) == repr(whole.columns)
    assert any(c.signal == "prompt_language" for c in whole.columns)


def test_scheduled_job_stores_a_rolling_run(client: TestClient, db_url: str) -> None:
    import time

    now = time.time_ns()
    spans = _spans(40, 0, "gpt-4o", "stop", "ok", 0)
    for k, s in enumerate(spans):  # 40 calls in the last 2 hours
        start = now - 2 * HOUR + 60 * 10**9 + k * (HOUR // 21)
        s["startTimeUnixNano"], s["endTimeUnixNano"] = str(start), str(start + 10**9)
    _post(client, spans)
    settings = DriftSettings(  # type: ignore[call-arg]
        current_hours=1.0, reference_hours=1.0, signals=["input_tokens", "finish_reason"],
        seed=3,
    )  # fmt: skip
    engine = store_engine.make_engine(db_url)
    try:
        run_once(JobContext(client.app.state.driftline.settings, engine, CollectorRegistry()),  # type: ignore[attr-defined]
                 settings)  # fmt: skip
    finally:
        engine.dispose()
    items = client.get("/api/v1/drift/runs").json()["items"]
    assert len(items) == 1 and items[0]["trigger"] == "schedule" and items[0]["status"] == "ok"
    assert items[0]["reference"]["kind"] == "rolling"
    assert items[0]["n_reference_calls"] + items[0]["n_current_calls"] == 40


def test_scheduled_job_tests_a_rare_rate_over_longer_windows(
    client: TestClient, db_url: str
) -> None:
    """The production path (the scheduler's ``run_once``) tests refusal over the current hour
    and the 2 / 3 h windows ending now when the reference is rolling: 2 refusals per hour
    for the last 3 hours (none before) are not significant in the current hour (p ~ 0.08) but
    are over 3 hours (6 of 6 events in a quarter of the calls). A pinned reference (range)
    tests the current hour only."""
    import time

    now = time.time_ns()
    spans: list[Any] = []
    for h in range(13):  # 12 h reference, 1 h current, 40 calls per hour
        refusals = 2 if h >= 10 else 0
        hour = _spans(40 - refusals, 0, "gpt-4o", "stop", "Sure, here it is.", 1000 * h)
        hour += _spans(refusals, 0, "gpt-4o", "stop", "I'm sorry, I can't help with that.",
                       1000 * h + 500)  # fmt: skip
        for k, s in enumerate(hour):  # spread over the hour, a minute clear of its edges
            start = now - (13 - h) * HOUR + 60 * 10**9 + k * ((HOUR - 120 * 10**9) // 40)
            s["startTimeUnixNano"], s["endTimeUnixNano"] = str(start), str(start + 10**9)
        spans += hour
    _post(client, spans)
    engine = store_engine.make_engine(db_url)
    ctx = JobContext(client.app.state.driftline.settings, engine, CollectorRegistry())  # type: ignore[attr-defined]
    base = {"current_hours": 1.0, "reference_hours": 12.0, "signals": ["refusal"], "seed": 1}
    ref_start_s = (now - 12 * HOUR) / 1e9
    pinned = f"{ref_start_s}..{ref_start_s + 11.5 * 3600}"  # not adjacent to the current window
    try:
        run_once(ctx, DriftSettings.model_validate(base))
        run_once(ctx, DriftSettings.model_validate({**base, "reference": pinned}))
    finally:
        engine.dispose()
    items = client.get("/api/v1/drift/runs").json()["items"]
    by_kind = {}
    for item in items:
        run = client.get(f"/api/v1/drift/runs/{item['run_id']}").json()
        (row,) = [r for r in run["results"] if r["signal"] == "refusal"]
        by_kind[item["reference"]["kind"]] = row
    rolling, pinned_row = by_kind["rolling"], by_kind["range"]
    assert rolling["method"] == "rate_exact_windows" and rolling["drifted"] is True
    assert rolling["n_current"] == 120 and rolling["pvalue"] < 0.01  # the 3 h window decided
    assert pinned_row["method"] == "rate_exact" and pinned_row["drifted"] is False


def test_column_order_equals_the_sql_order_with_ties_and_null_ids() -> None:
    # drift.extractcolumns.ordered sorts in numpy and reads ids only for tied start times:
    # row for row the order of ORDER BY win, seg_id, t, trace_id, span_id (NULL ids last,
    # non-ASCII ids by code point), whatever order the rows were inserted in
    from drift.extractcolumns import ORDER, ordered

    rng = np.random.default_rng(3)
    n = 5_000
    ids = ["a", "b", "B", "é", "ab", "a\u00e9", "zz", "\u4e2d", None]
    rows = [
        (
            int(rng.integers(0, 2)),
            int(rng.integers(-1, 4)),
            int(rng.integers(0, 40)) * 10**9,  # start times tie often
            ids[int(rng.integers(0, len(ids)))],
            ids[int(rng.integers(0, len(ids)))],
            i,
        )
        for i in range(n)
    ]
    con = duckdb.connect()
    try:
        con.execute(
            "CREATE TEMP TABLE s (win TINYINT, seg_id BIGINT, t BIGINT, trace_id VARCHAR, "
            "span_id VARCHAR, x BIGINT)"
        )
        con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?, ?)", rows)
        got = ordered(con, ["x"])
        want = con.sql(f"SELECT win, seg_id, t, x FROM s ORDER BY {ORDER}").to_arrow_table()
        # full duplicates of (win, seg, t, ids) may come in any order: compare the keys, and
        # x where the keys are unique
        keys = con.sql(f"SELECT x, trace_id, span_id FROM s ORDER BY {ORDER}").to_arrow_table()
        by_x = {r["x"]: (r["trace_id"], r["span_id"]) for r in keys.to_pylist()}
        g = [(r["win"], r["seg_id"], r["t"], *by_x[r["x"]]) for r in got.to_pylist()]
        w = [(r["win"], r["seg_id"], r["t"], *by_x[r["x"]]) for r in want.to_pylist()]
        assert g == w
        assert sorted(got.column("x").to_pylist()) == list(range(n))
        # the same order when s holds each call's row ``_i`` and the ids stay in an Arrow
        # table beside it (as drift.signals.extract builds s)
        ids = pa.table(
            {"trace_id": [r[3] for r in rows], "span_id": [r[4] for r in rows]},
            schema=pa.schema([("trace_id", pa.string()), ("span_id", pa.string())]),
        )
        con.execute("ALTER TABLE s ADD COLUMN _i BIGINT")
        con.execute("UPDATE s SET _i = x")
        by_ids = ordered(con, ["x"], ids)
        g2 = [(r["win"], r["seg_id"], r["t"], *by_x[r["x"]]) for r in by_ids.to_pylist()]
        assert g2 == w
        # and when s is the Arrow table itself (as extract registers it), in any row order
        arrow_s = con.sql("SELECT * FROM s ORDER BY random()").to_arrow_table()
        from_arrow = ordered(con, ["x"], ids, arrow_s)
        g3 = [(r["win"], r["seg_id"], r["t"], *by_x[r["x"]]) for r in from_arrow.to_pylist()]
        assert g3 == w
        unique = con.sql(
            "SELECT count(*) FROM (SELECT DISTINCT win, seg_id, t, trace_id, span_id FROM s)"
        ).fetchall()[0][0]
        assert unique > n * 0.9  # mostly unique keys: x order is checked through them
    finally:
        con.close()


def test_stable_argsort_is_numpys_stable_argsort() -> None:
    # drift.extractcolumns.stable_argsort: the same permutation as kind="stable" (ties in
    # row order), for narrow keys (radix) and wide ones (unstable sort, runs of ties fixed)
    from drift.extractcolumns import _group_codes, stable_argsort

    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(0, 3_000))
        spread = int(rng.choice([1, 3, 1_000, 10**12]))
        for dtype in (np.int8, np.int16, np.int64):
            narrow = rng.integers(0, min(spread, np.iinfo(dtype).max), n, dtype=dtype)
            assert np.array_equal(stable_argsort(narrow), np.argsort(narrow, kind="stable"))
        x = rng.integers(0, spread, n) + 1_780_000_000 * 10**9  # start times, unix ns
        assert np.array_equal(stable_argsort(x), np.argsort(x, kind="stable"))
        win = rng.integers(0, 2, n)
        seg = rng.integers(-1, int(rng.choice([10, 40_000])), n)
        group = win * (1 << 32) + seg
        want = np.argsort(group, kind="stable")
        assert np.array_equal(stable_argsort(_group_codes(win, seg)), want)


def test_column_gather_equals_arrows_take_and_its_dictionary() -> None:
    # drift.extractcolumns._take (how ordered() gathers each column): the values of Arrow's
    # take, nulls kept; few-valued text / boolean columns come dictionary-encoded with the
    # dictionary and codes that pc.dictionary_encode gives the taken column
    import pyarrow.compute as pc

    from drift.extractcolumns import _take

    rng = np.random.default_rng(9)
    n = 4_000
    words = np.array(["stop", "length", "content_filter", None], dtype=object)
    many = np.array([f"w{i}" for i in range(40)], dtype=object)
    floats = rng.gamma(2.0, 1.0, n)
    cols = [
        pa.chunked_array(
            [
                pa.array(words[rng.integers(0, 4, n // 2)]),
                pa.array(words[rng.integers(0, 3, n - n // 2)]),
            ]
        ),
        pa.chunked_array([pa.array(many[rng.integers(0, 40, n)])]),
        pa.chunked_array([pa.array(rng.random(n) < 0.03, mask=rng.random(n) < 0.1)]),
        pa.chunked_array([pa.array(floats, mask=rng.random(n) < 0.05)]),
        pa.chunked_array([pa.array(floats)]),
        pa.chunked_array([pa.array(rng.integers(0, 9, n)), pa.array([1, None, 3])]),
        pa.chunked_array([pa.array(rng.integers(0, 2, n).astype(np.int8))]),
        pa.chunked_array([pa.array([], pa.string())]),
        pa.chunked_array([pa.array([None, None], pa.bool_())]),
    ]
    for col in cols:
        order = rng.permutation(len(col))
        got, want = _take(col, order), col.take(order)
        assert got.to_pylist() == want.to_pylist()
        if pa.types.is_dictionary(got.type):
            enc = pc.dictionary_encode(want).combine_chunks()
            assert got.dictionary.to_pylist() == enc.dictionary.to_pylist()
            assert got.indices.to_pylist() == enc.indices.to_pylist()


def test_group_time_order_is_the_two_stable_sorts() -> None:
    # drift.extractcolumns._group_time_order: one sort of a composite key (or the two sorts
    # when it does not fit in an int64) gives the permutation of a stable sort by start time
    # then a stable sort by group, for rows in time order, in random order, with ties
    from drift.extractcolumns import _group_codes, _group_time_order

    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(0, 3_000))
        win = rng.integers(0, 2, n)
        seg = rng.integers(-1, int(rng.choice([3, 10, 40_000])), n)
        spread = int(rng.choice([1, 50, 10**12, 2**62]))
        start = rng.integers(0, spread, n, dtype=np.int64) + (
            0 if spread == 2**62 else 1_780 * 10**15
        )
        if rng.random() < 0.5:
            start = np.sort(start)  # a window read in time order
        codes = _group_codes(win, seg)
        order = np.argsort(start, kind="stable")
        want = order[np.argsort(codes[order], kind="stable")]
        assert np.array_equal(_group_time_order(codes, start), want)


def test_boolean_gather_with_one_value_present() -> None:
    # _take's boolean path: the dictionary and codes pc.dictionary_encode gives the taken
    # column when only True, only False, or neither occurs (nulls or not)
    import pyarrow.compute as pc

    from drift.extractcolumns import _take

    rng = np.random.default_rng(4)
    for values in ([True], [False], [True, False], [False, True]):
        for nulls in (0.0, 0.3, 1.0):
            n = 500
            data = np.array(values * n)[:n]
            col = pa.chunked_array(
                [pa.array(data[:200], mask=rng.random(200) < nulls), pa.array(data[200:])]
            )
            order = rng.permutation(n)
            got, want = _take(col, order), col.take(order)
            assert got.to_pylist() == want.to_pylist()
            enc = pc.dictionary_encode(want).combine_chunks()
            assert got.dictionary.to_pylist() == enc.dictionary.to_pylist()
            assert got.indices.to_pylist() == enc.indices.to_pylist()


def test_segment_groups_equal_group_by() -> None:
    # drift.signals.segment_groups: the combinations (NULL a value of its own) and counts of
    # GROUP BY over the segment columns, and each row's combination
    from drift.signals import segment_groups

    rng = np.random.default_rng(8)
    models = np.array(["gpt-4o", "claude", "é", "", None], dtype=object)
    variants = np.array(["v0", "v1", None], dtype=object)
    for n in (0, 1, 1_000):
        calls = pa.table(
            {
                "model": pa.chunked_array(
                    [pa.array(models[rng.integers(0, 5, n // 2)], pa.string()),
                     pa.array(models[rng.integers(0, 4, n - n // 2)], pa.string())]
                ),
                "variant": pa.array(variants[rng.integers(0, 3, n)], pa.string()),
            }
        )  # fmt: skip
        groups, row_group = segment_groups(calls, ["model", "variant"])
        got = {(r["model"], r["variant"]): r["n"] for r in groups.to_pylist()}
        want = duckdb.sql(
            "SELECT model, variant, count(*) AS n FROM calls GROUP BY model, variant"
        ).fetchall()
        assert got == {(m, v): c for m, v, c in want}
        assert groups.column("_u").to_pylist() == list(range(groups.num_rows))
        keys = list(zip(groups["model"].to_pylist(), groups["variant"].to_pylist(), strict=True))
        rows = list(zip(calls["model"].to_pylist(), calls["variant"].to_pylist(), strict=True))
        assert [keys[g] for g in row_group.tolist()] == rows
    # many combinations (codes sorted rather than counted)
    many = pa.table(
        {
            "model": pa.array([f"m{i % 700}" for i in range(3_000)]),
            "variant": pa.array([None if i % 7 == 0 else f"v{i % 997}" for i in range(3_000)]),
        }
    )
    groups, row_group = segment_groups(many, ["model", "variant"])
    want = duckdb.sql("SELECT model, variant, count(*) FROM many GROUP BY ALL").fetchall()
    got = {(r["model"], r["variant"]): r["n"] for r in groups.to_pylist()}
    assert got == {(m, v): c for m, v, c in want}
    keys = list(zip(groups["model"].to_pylist(), groups["variant"].to_pylist(), strict=True))
    rows = list(zip(many["model"].to_pylist(), many["variant"].to_pylist(), strict=True))
    assert [keys[g] for g in row_group.tolist()] == rows
