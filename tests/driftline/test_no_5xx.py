"""Client input on the REST API is a 400 naming the parameter, never a 5xx (issue 35, item 5):
times outside what an int64 of unix nanoseconds holds, NaN/inf, forged cursors, durations and
buckets out of range, and body fields PostgreSQL cannot store (NUL, over-long text).

Each case answered 500 before ``driftline.api.params`` / ``collector.timeparse`` bounded them.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from driftline.app import create_app
from driftline.cli import cli
from tests.conftest import make_settings


def forged_cursor(*values: Any) -> str:
    """A cursor as the API encodes them (base64 of a JSON list), with values it never makes."""
    raw = json.dumps(list(values)).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


BAD_TIMES = [
    "inf",
    "-inf",
    "nan",
    "1e12",  # year 33658: past 2262, the last int64 nanosecond
    "1e30",
    "-1e30",
    "1e308",  # finite, but inf once in nanoseconds
    "-1",
    "99999999999",
    "9999-12-31T23:59:59",
    "0001-01-01T00:00:00+01:00",
    "99999999999999999999999d",  # a duration ago before 1970
    "9" * 400 + "d",  # inf seconds
]
TIME_ROUTES = [
    "/api/v1/calls",
    "/api/v1/traces",
    "/api/v1/sessions",
    "/api/v1/quality",
    "/api/v1/stats",
    "/api/v1/stats/engine",
]
CURSORS = [
    forged_cursor(10**30, "a", "b"),
    forged_cursor(2**63, "a", "b"),
    forged_cursor(1e300, "a", "b"),
    forged_cursor(10**30, "a"),
    forged_cursor(-(2**64), "a"),
]
CURSOR_ROUTES = [
    "/api/v1/calls",
    "/api/v1/traces",
    "/api/v1/sessions",
    "/api/v1/scores",
    "/api/v1/drift/runs",
]


def assert_400(r: Any, name: str) -> None:
    assert r.status_code == 400, (r.request.url, r.status_code, r.text[:300])
    assert name in r.json()["error"]["message"], r.text[:300]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("no5xx") / "driftline.db"
    settings = make_settings(f"sqlite:///{db}", grpc_enabled=False, scheduler_enabled=False)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def pg_api(pg_url: str) -> Any:
    settings = make_settings(pg_url, grpc_enabled=False, scheduler_enabled=False)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("route", TIME_ROUTES)
def test_out_of_range_times_are_400_naming_the_parameter(api: TestClient, route: str) -> None:
    for value in BAD_TIMES:
        assert_400(api.get(route, params={"since": value}), "since")
        assert_400(api.get(route, params={"until": value}), "until")
    assert api.get(route, params={"since": "2262-04-11T23:47:16Z"}).status_code == 200
    assert api.get(route, params={"since": "0", "until": "2h"}).status_code == 200


@pytest.mark.parametrize("route", CURSOR_ROUTES)
def test_forged_cursors_are_400(api: TestClient, route: str) -> None:
    for cursor in CURSORS:
        assert_400(api.get(route, params={"cursor": cursor}), "cursor")
    r = api.get(route, params={"cursor": "A" * 60_000})
    assert r.status_code == 400 and "cursor" in r.text, r.text[:300]
    assert len(r.text) < 2000  # the message does not echo 60 KB back


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_judge_results_cursor_past_the_id_column_is_400(
    db: str, request: pytest.FixtureRequest, api: TestClient
) -> None:
    """The id column is an INTEGER: 2**31 and up overflowed it on PostgreSQL (a 500)."""
    c = api if db == "sqlite" else request.getfixturevalue("pg_api")
    for cursor in [str(2**31), str(2**63 - 1), "9" * 40, "\u0661\u0662"]:  # Arabic-Indic
        assert_400(c.get("/api/v1/judge/results", params={"cursor": cursor}), "cursor")
    assert c.get("/api/v1/judge/results", params={"cursor": str(2**31 - 1)}).status_code == 200


def test_durations_out_of_range_are_400(api: TestClient) -> None:
    for value in ["inf", "nan", "1e30", "1e300", "-1"]:
        assert_400(api.get("/api/v1/traces", params={"min_duration_s": value}), "min_duration_s")
    for value in ["99999999999d", "1e300", "9" * 400]:
        r = api.get("/api/v1/stats", params={"group_by": "bucket", "bucket": value})
        assert_400(r, "bucket")
    assert api.get("/api/v1/traces", params={"min_duration_s": "2.5"}).status_code == 200
    r = api.get("/api/v1/stats", params={"group_by": "bucket", "bucket": "1h"})
    assert r.status_code == 200


BODY_TIMES: list[Any] = [
    "10000-01-01T00:00:00Z",
    "1e30",
    "-1e30",
    "nan",
    "inf",
    "1e12",
    "-1",
    "0001-01-01T00:00:00",
]


def test_score_and_feedback_timestamps_out_of_range_are_400(api: TestClient) -> None:
    for ts in BODY_TIMES:
        score = {
            "session_id": "s",
            "name": "x",
            "data_type": "numeric",
            "value": 1,
            "timestamp": ts,
        }
        assert_400(api.post("/api/v1/scores", json=score), "timestamp")
        fb = {"trace_id": "a" * 32, "kind": "rating", "value": 1, "timestamp": ts}
        assert_400(api.post("/api/v1/feedback", json=fb), "timestamp")
    for ts in [1e30, -5, 1e308]:  # numbers: feedback takes unix seconds too
        fb = {"trace_id": "a" * 32, "kind": "rating", "value": 1, "timestamp": ts}
        assert_400(api.post("/api/v1/feedback", json=fb), "timestamp")
    # nothing of the above was stored
    assert api.get("/api/v1/scores").json()["items"] == []
    assert api.get("/api/v1/feedback").json()["items"] == []


def test_nan_and_infinite_values_are_400_never_stored(api: TestClient) -> None:
    """Python's JSON parser reads NaN and Infinity; a stored NaN would be an unknown as 0."""
    for raw in ["NaN", "Infinity", "-Infinity", "1e400"]:
        body = '{"session_id": "s", "name": "x", "data_type": "numeric", "value": ' + raw + "}"
        r = api.post("/api/v1/scores", content=body, headers={"content-type": "application/json"})
        assert_400(r, "value")
        body = '{"trace_id": "' + "b" * 32 + '", "kind": "rating", "value": ' + raw + "}"
        r = api.post("/api/v1/feedback", content=body, headers={"content-type": "application/json"})
        assert_400(r, "value")
    big = '{"trace_id": "' + "b" * 32 + '", "kind": "rating", "value": 1' + "0" * 400 + "}"
    r = api.post("/api/v1/feedback", content=big, headers={"content-type": "application/json"})
    assert_400(r, "value")
    assert api.get("/api/v1/scores").json()["items"] == []
    assert api.get("/api/v1/feedback").json()["items"] == []


def test_review_label_score_past_int64_is_400(api: TestClient) -> None:
    assert_400(api.post("/api/v1/review/1", json={"score": 2**70}), "score")


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_nul_and_long_fields_are_400_on_every_store(
    db: str, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    """PostgreSQL refuses NUL in text/JSONB and over-long varchars at insert, the JSON
    encoder nesting past 255 levels (each a 500 before); the good item of a batch is stored."""
    if db == "postgres":
        url: str = request.getfixturevalue("pg_url")
    else:
        url = f"sqlite:///{tmp_path}/d.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), tmp_path / "d.db")
    settings = make_settings(url, grpc_enabled=False, scheduler_enabled=False)
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        tid = "c" * 32
        bad_feedback = [
            {"trace_id": tid, "kind": "thumbs_up", "comment": "a\x00b"},
            {"trace_id": tid, "kind": "thumbs_up", "metadata": {"k\x00": 1}},
            {"trace_id": tid, "kind": "thumbs_up", "user_id": "u" * 300},
            {"trace_id": tid, "kind": "thumbs_up", "metadata": {"source": "s" * 100}},
            {"trace_id": tid, "kind": "thumbs_up", "metadata": {"a": deep}},
        ]
        for fb in bad_feedback:
            r = c.post("/api/v1/feedback", json=fb)
            assert r.status_code == 400, r.text
        score: dict[str, Any] = {"session_id": "s", "name": "x", "data_type": "numeric", "value": 1}
        extras: list[dict[str, Any]] = [
            {"comment": "a\x00"},
            {"attributes": {"a": ["\x00"]}},
            {"label": "\x00"},
            {"attributes": {"a": deep}},  # orjson, the store's encoder, stops at 255 levels
        ]
        for extra in extras:
            r = c.post("/api/v1/scores", json={**score, **extra})
            assert r.status_code == 400 and ("NUL" in r.text or "nested" in r.text), r.text
        good = {"trace_id": tid, "kind": "thumbs_up", "user_id": "u1"}
        r = c.post("/api/v1/feedback/batch", json={"items": [bad_feedback[0], good]})
        assert r.status_code == 202, r.text
        assert len(r.json()["items"]) == 1 and r.json()["rejected"][0]["index"] == 0
        r = c.post("/api/v1/scores", json={"items": [{**score, "comment": "\x00"}, score]})
        assert r.status_code == 201 and len(r.json()["items"]) == 1, r.text
        assert len(c.get("/api/v1/feedback").json()["items"]) == 1
        assert len(c.get("/api/v1/scores").json()["items"]) == 1


@pytest.mark.postgres
def test_nul_in_any_query_parameter_or_path_is_400_on_postgres(pg_url: str) -> None:
    """PostgreSQL cannot bind text holding NUL: every GET route, each query parameter and
    path parameter set to ``a\\x00b`` in turn (35 of them answered 500 before)."""
    settings = make_settings(pg_url, grpc_enabled=False, scheduler_enabled=False)
    failures, tried = [], 0
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        for path, ops in c.get("/openapi.json").json()["paths"].items():
            if "get" not in ops:
                continue
            plain = path.replace("{", "").replace("}", "")
            urls = [(plain, {p["name"]: "a\x00b"}) for p in ops["get"].get("parameters", [])
                    if p["in"] == "query"]  # fmt: skip
            if "{" in path:
                urls.append((path.split("{")[0] + "a%00b" + path.split("}", 1)[1], {}))
            for url, params in urls:
                tried += 1
                r = c.get(url, params=params)
                if r.status_code != 400 or "NUL" not in r.text:
                    failures.append(f"{url} {params}: {r.status_code} {r.text[:120]}")
    assert tried > 50
    assert not failures, "\n".join(failures)


def test_export_cli_refuses_times_and_durations_out_of_range(
    _sqlite_template: Path, tmp_path: Path
) -> None:
    """``driftline export`` takes the API's bounds: a usage error naming the option, never a
    traceback (``--min-duration-s inf`` raised OverflowError before)."""
    shutil.copyfile(_sqlite_template, tmp_path / "d.db")
    base = ["export", "traces", "--database-url", f"sqlite:///{tmp_path}/d.db", "--no-progress"]
    base += ["--out", str(tmp_path / "t.jsonl")]
    for option, value in [("--min-duration-s", "inf"), ("--min-duration-s", "1e30")]:
        r = CliRunner().invoke(cli, [*base, option, value])
        assert r.exit_code == 2 and option in r.output, r.output
    for option, value in [("--since", "1e12"), ("--until", "inf"), ("--since", "nan")]:
        r = CliRunner().invoke(cli, [*base, option, value])
        assert r.exit_code == 2 and option in r.output, r.output
    assert CliRunner().invoke(cli, [*base, "--min-duration-s", "1"]).exit_code == 0
